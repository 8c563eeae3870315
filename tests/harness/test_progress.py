"""Identical calls whose results change are progress: the run detector and the loop guard."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from plangate.harness import Tool, call_runs, tool
from plangate.harness._call_runs import (
    RESULT_SEPARATOR,
    call_key,
    identical_runs,
    split_result,
    trailing_run,
    with_result,
)
from plangate.harness._guards import loop_guard
from plangate.harness._variant import GuardSettings
from tests.conftest import REPO
from tests.helpers import call, run

GUARDS = GuardSettings(loop_warn_after=3, loop_stop_after=5)
SCROLL = call_key("scroll", '{"direction":"down"}')


def feed(pages: list[str]) -> tuple[Tool, list[str]]:
    """A `scroll` tool that shows the next page on each call and stays on the last one."""
    served: list[str] = []

    @tool
    def scroll(direction: str) -> str:
        """Scroll the feed and return what is on screen now.

        Args:
            direction: Where to scroll.
        """
        page = pages[min(len(served), len(pages) - 1)]
        served.append(page)
        return page

    return scroll, served


def scrolls(count: int) -> list[object]:
    return [call("scroll", f"s{i}", direction="down") for i in range(count)]


async def test_a_scroll_that_gets_new_pages_is_never_stopped_nor_warned() -> None:
    scroll, served = feed([f"page {i}" for i in range(1, 9)])
    result, _ = await run(
        [*scrolls(8), call("finish", "f", summary="read")], "Read the feed", tools=(scroll,)
    )
    assert result.stop_reason == "finished"
    assert served == [f"page {i}" for i in range(1, 9)]
    assert not [e for e in result.events if e.kind in ("loop_warning", "loop_stop")]
    assert not [c for c in result.tool_calls if "Loop guard" in c.content]


async def test_a_scroll_that_gets_the_same_page_is_warned_then_stopped() -> None:
    scroll, served = feed(["the end of the feed"])
    result, _ = await run(scrolls(5), "Read the feed", tools=(scroll,))
    assert result.stop_reason == "loop_guard"
    assert result.stop_detail == f"5 identical calls in a row with the same result: {SCROLL}"
    assert len(served) == 4  # the fifth call was not run
    assert [c.status for c in result.tool_calls] == ["ok"] * 4 + ["error"]
    warnings = [e.detail for e in result.events if e.kind == "loop_warning"]
    assert warnings == [
        f"3 identical calls in a row with the same result: {SCROLL}",
        f"4 identical calls in a row with the same result: {SCROLL}",
    ]


async def test_the_guard_counts_from_the_last_change_of_result() -> None:
    scroll, served = feed(["page 1", "page 2", "the end"])
    result, _ = await run(scrolls(7), "Read the feed", tools=(scroll,))
    assert result.stop_reason == "loop_guard"
    assert served == ["page 1", "page 2"] + ["the end"] * 4  # calls 3 to 6, then a stop
    warned = [c.content for c in result.tool_calls if "Loop guard" in c.content]
    assert len(warned) == 2 and "3 times in a row" in warned[0]


async def test_the_guard_compares_what_the_tool_returned_not_the_reference_the_model_sees() -> None:
    scroll, served = feed(["x" * 2000])  # over alyx-context's 600 characters: a new ref each time
    result, _ = await run(scrolls(5), "Read the feed", variant="alyx-context", tools=(scroll,))
    assert result.tool_calls[0].content != result.tool_calls[1].content  # ref-1, ref-2
    assert result.stop_reason == "loop_guard" and len(served) == 4


def test_loop_guard_on_keys_with_results() -> None:
    same = [with_result(SCROLL, "page 1")] * 4
    stopped = loop_guard([*same, SCROLL], GUARDS)
    assert stopped is not None and stopped.stop
    assert stopped.detail == f"5 identical calls in a row with the same result: {SCROLL}"
    moving = [with_result(SCROLL, f"page {i}") for i in range(8)]
    assert loop_guard([*moving, SCROLL], GUARDS) is None
    # Without results (as saved before results were kept), identical calls alone count.
    plain = loop_guard([SCROLL] * 5, GUARDS)
    assert plain is not None and plain.detail == f"5 identical calls in a row: {SCROLL}"
    assert loop_guard([*same, SCROLL], dataclasses.replace(GUARDS, loop_guard=False)) is None


def test_a_key_carries_a_digest_of_its_result() -> None:
    ran = with_result(SCROLL, "page 1")
    assert split_result(ran) == (SCROLL, split_result(ran)[1])
    assert split_result(ran)[1] is not None and len(ran) == len(SCROLL) + 17
    assert split_result(ran) != split_result(with_result(SCROLL, "page 2"))
    assert split_result(SCROLL) == (SCROLL, None)
    odd = f"tool raw text{RESULT_SEPARATOR}not-a-digest"
    assert split_result(odd) == (odd, None)


KEYS = st.lists(st.sampled_from("ab"), min_size=1, max_size=16)


@st.composite
def calls_with_results(draw: st.DrawFn) -> tuple[list[str], list[str | None], list[int]]:
    keys = draw(KEYS)
    results = draw(st.lists(st.sampled_from(["p", "q", None]), min_size=len(keys)))
    cut = draw(st.integers(0, len(keys)))
    return keys, results[: len(keys)], [0 if i < cut else 1 for i in range(len(keys))]


@settings(max_examples=300, deadline=None)
@given(case=calls_with_results())
def test_runs_split_identical_calls_where_the_result_changes(
    case: tuple[list[str], list[str | None], list[int]],
) -> None:
    keys, results, groups = case
    runs = call_runs(keys, groups, results)
    blind = call_runs(keys, groups)
    assert int(runs.lengths.sum()) == len(keys) and int(runs.lengths.max()) <= len(keys)
    # Results only ever split runs: every boundary without them is one with them, and the
    # boundaries they add are exactly the runs marked as progress.
    assert set(blind.starts) <= set(runs.starts)
    assert {int(s) for s, p in zip(runs.starts, runs.progress, strict=True) if p} == set(
        runs.starts
    ) - set(blind.starts)
    for start, length, progress in zip(runs.starts, runs.lengths, runs.progress, strict=True):
        inside = range(start, start + length)
        assert len({keys[i] for i in inside}) == 1 and len({groups[i] for i in inside}) == 1
        assert len({results[i] for i in inside} - {None}) <= 1  # one recorded result per run
        if progress:  # begins at a recorded result that differs from the last one before it
            before = [results[i] for i in range(start) if results[i] is not None]
            assert results[start] is not None and before and before[-1] != results[start]
    last = groups.index(groups[-1])  # the last group is the running turn
    assert trailing_run(keys[last:], results[last:]) == int(runs.lengths[-1])


@settings(max_examples=200, deadline=None)
@given(keys=KEYS, result=st.sampled_from(["same", None]))
def test_one_result_throughout_gives_the_runs_of_identical_calls(
    keys: list[str], result: str | None
) -> None:
    runs, blind = call_runs(keys, results=[result] * len(keys)), call_runs(keys)
    assert np.array_equal(runs.starts, blind.starts)
    assert np.array_equal(runs.lengths, blind.lengths) and not runs.progress.any()
    assert identical_runs(keys, results=[result] * len(keys)) == identical_runs(keys)


@settings(max_examples=200, deadline=None)
@given(keys=KEYS)
def test_every_result_new_means_every_run_is_one_call(keys: list[str]) -> None:
    runs = call_runs(keys, results=[f"page {i}" for i in range(len(keys))])
    assert set(runs.lengths) == {1}
    assert list(runs.progress) == [i > 0 and keys[i] == keys[i - 1] for i in range(len(keys))]
    assert trailing_run(keys, [f"page {i}" for i in range(len(keys))]) == 1


@settings(max_examples=200, deadline=None)
@given(results=st.lists(st.sampled_from(["p", "q"]), max_size=10))
def test_the_guard_stops_when_the_same_result_came_back_four_times(results: list[str]) -> None:
    keys = [with_result(SCROLL, r) for r in results] + [SCROLL]
    same = next((i for i, r in enumerate(reversed(results)) if r != results[-1]), len(results))
    found = loop_guard(keys, GUARDS)
    assert (found is not None and found.stop) == (same + 1 >= GUARDS.loop_stop_after)
    assert (found is None) == (same + 1 < GUARDS.loop_warn_after)


async def test_a_variant_may_count_identical_calls_alone(tmp_path: Path) -> None:
    """`[guards] loop_compare_results = false`: new pages or not, five identical calls stop."""
    text = (REPO / "harness" / "variants" / "alyx.toml").read_text(encoding="utf-8")
    blind = tmp_path / "alyx-blind.toml"
    blind.write_text(
        text.replace('name = "alyx"', 'name = "alyx-blind"').replace(
            "[guards]", "[guards]\nloop_compare_results = false"
        ),
        encoding="utf-8",
    )
    scroll, served = feed([f"page {i}" for i in range(1, 9)])
    result, _ = await run(scrolls(5), "Read the feed", variant=str(blind), tools=(scroll,))
    assert result.stop_reason == "loop_guard"
    assert result.stop_detail == f"5 identical calls in a row: {SCROLL}"
    assert served == [f"page {i}" for i in range(1, 5)]
