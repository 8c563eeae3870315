"""tool_call_loops tells a loop from progress by the calls' results, where the table has them."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from plangate.evaluators import EvaluatorError, evaluate
from plangate.replay import build_table
from tests.helpers import turn_rows

SCROLL = ("scroll", {"direction": "down"})
SHOWN = '\'scroll {"direction":"down"}\''
OTHER = ("open", {"id": 7})
NOTE = "[Loop guard: this is the same call with the same arguments {n} times in a row; ...]"
STATUS = '[Plan: 0/2 done. Active: "read the feed".]'


def score(calls: list[tuple[tuple[str, dict[str, Any]], str | None]], **params: Any) -> Any:
    """One turn of `calls`, each (call, recorded output), scored by tool_call_loops."""
    rows = turn_rows("s", calls=[c for c, _ in calls])
    tools = [r for r in rows if r["span_kind"] == "TOOL"]
    for row, (_, output) in zip(tools, calls, strict=True):
        row["tool_output"] = output
    table = build_table(rows)
    found = evaluate(table, names=["tool_call_loops"], params={"tool_call_loops": params})
    row = found.to_pylist()[0]
    return row | {"details": json.loads(row["details"])}


def scrolls(*outputs: str | None) -> list[tuple[tuple[str, dict[str, Any]], str | None]]:
    return [(SCROLL, o) for o in outputs]


def test_five_scrolls_with_changing_results_pass_and_with_identical_results_fail() -> None:
    moving = score(scrolls("page 1", "page 2", "page 3", "page 4", "page 5"))
    assert (moving["outcome"], moving["label"], moving["score"]) == ("pass", "ok", 1.0)
    assert moving["explanation"] == (
        "no call repeated back to back with the same result (5 calls); 5 identical calls to "
        f"{SHOWN} from call 1 whose results changed each time: progress, not a loop"
    )
    assert moving["details"] | {"seconds_wasted": None, "tokens_wasted": None} == {
        "calls": 5,
        "longest_run": 1,
        "loop_start": None,
        "loop_call": None,
        "results": "compared",
        "identical_calls": 5,
        "progress_calls": 5,
        "progress_start": 0,
        "result_changes": 4,
        "redundant": 0,
        "cycle_calls": 0,
        "seconds_wasted": None,
        "tokens_wasted": None,
    }
    assert moving["details"]["seconds_wasted"] == 0.0  # progress wastes nothing

    stuck = score(scrolls(*["page 1"] * 5))
    assert (stuck["outcome"], stuck["label"]) == ("fail", "loop")
    assert stuck["explanation"] == (
        f"{SHOWN} repeated 5 times in a row from call 1 of 5 with the same result; "
        "4 of 5 calls repeat an earlier identical call"
    )
    assert stuck["details"]["longest_run"] == 5 and stuck["details"]["progress_calls"] == 0
    assert stuck["details"]["seconds_wasted"] == pytest.approx(4.0)


CASES: list[tuple[str, list[Any], dict[str, Any], tuple[str, int, str]]] = [
    (
        "a poll that moves on, then sticks: the identical answers are a loop",
        scrolls("10%", "50%", "done", "done", "done"),
        {},
        ("loop", 3, "repeated 3 times in a row from call 3 of 5 with the same result; "),
    ),
    (
        "the partial change is reported beside the loop",
        scrolls("10%", "50%", "done", "done", "done"),
        {},
        ("loop", 3, "whose results changed 2 of 4 times: a loop only where they stayed the same"),
    ),
    (
        "stuck twice, then a change: within the limit",
        scrolls("page 1", "page 1", "page 2"),
        {},
        ("ok", 2, "repeated 2 times in a row from call 1 of 3 with the same result"),
    ),
    (
        "a missing result stays in the run",
        scrolls("page 1", None, "page 1"),
        {},
        ("loop", 3, "with the same result (1 of 3 results not recorded)"),
    ),
    (
        "a missing result never hides a change",
        scrolls("page 1", None, "page 2"),
        {},
        ("ok", 2, "repeated 2 times in a row from call 1 of 3 with the same result (1 of 2"),
    ),
    (
        "no results recorded: identical calls alone decide",
        scrolls(None, None, None),
        {},
        ("loop", 3, "repeated 3 times in a row from call 1 of 3 (results not recorded)"),
    ),
    (
        "compare_results off: identical calls alone decide",
        scrolls("page 1", "page 2", "page 3"),
        {"compare_results": False},
        ("loop", 3, "repeated 3 times in a row from call 1 of 3 (results not compared)"),
    ),
    (
        "the harness's notes to the model are not the tool's result",
        scrolls(
            f"page 1\n{STATUS}",
            f"page 1\n{STATUS}",
            f"page 1\n{NOTE.format(n=3)}\n{STATUS}",
            f"page 1\n{NOTE.format(n=4)}\n{STATUS}",
        ),
        {},
        ("loop", 4, "repeated 4 times in a row from call 1 of 4 with the same result"),
    ),
    (
        "a result stored by reference is compared without its number",
        scrolls(
            '[Stored as ref-1: the result has 900 characters.]\nQuery it with query_result(ref="ref-1")',
            '[Stored as ref-2: the result has 900 characters.]\nQuery it with query_result(ref="ref-2")',
            '[Stored as ref-3: the result has 900 characters.]\nQuery it with query_result(ref="ref-3")',
        ),
        {},
        ("loop", 3, "repeated 3 times in a row from call 1 of 3 with the same result"),
    ),
    (
        "a bracket line the harness did not write is part of the result",
        scrolls("page 1\n[end of page 1]", "page 1\n[end of page 2]", "page 1\n[end of page 3]"),
        {},
        ("ok", 1, "whose results changed each time: progress, not a loop"),
    ),
    (
        "paging back and forth with new results is not a cycle",
        [(SCROLL, "p1"), (OTHER, "item"), (SCROLL, "p2"), (OTHER, "item"), (SCROLL, "p3")],
        {},
        ("ok", 1, "no call repeated back to back (5 calls); 1 of 5 calls repeat an earlier"),
    ),
    (
        "going back and forth to the same results is a cycle",
        [(SCROLL, "p1"), (OTHER, "item"), (SCROLL, "p1"), (OTHER, "item"), (SCROLL, "p1")],
        {},
        ("cycle", 1, "two calls alternate for 5 calls from call 1; 3 of 5 calls repeat"),
    ),
]


@pytest.mark.parametrize(("case", "calls", "params", "expected"), CASES, ids=[c[0] for c in CASES])
def test_results_tell_a_loop_from_progress(
    case: str, calls: list[Any], params: dict[str, Any], expected: tuple[str, int, str]
) -> None:
    found = score(calls, **params)
    label, longest, fragment = expected
    assert (found["label"], found["details"]["longest_run"]) == (label, longest)
    assert found["outcome"] == ("pass" if label == "ok" else "fail")
    assert fragment in found["explanation"]


def test_a_call_repeated_later_with_a_new_result_is_not_redundant() -> None:
    rechecked = score([(SCROLL, "p1"), (OTHER, "x"), (SCROLL, "p2"), (OTHER, "x")])
    assert rechecked["details"]["redundant"] == 1  # `open` gave the same answer again
    assert rechecked["score"] == pytest.approx(0.75)
    blind = score(
        [(SCROLL, "p1"), (OTHER, "x"), (SCROLL, "p2"), (OTHER, "x")], compare_results=False
    )
    assert blind["details"]["redundant"] == 2 and blind["details"]["results"] == "not compared"


@pytest.mark.parametrize(
    ("params", "message"),
    [
        (
            {"compare_results": "no"},
            "evaluator 'tool_call_loops': 'compare_results' must be true or false, not 'no'",
        ),
        (
            {"max_repeats": -1},
            "evaluator 'tool_call_loops': 'max_repeats' must be a whole number >= 0, not -1",
        ),
        (
            {"max_cycle_calls": True},
            "evaluator 'tool_call_loops': 'max_cycle_calls' must be a whole number >= 0, not True",
        ),
    ],
)
def test_bad_parameters_are_named(params: dict[str, Any], message: str) -> None:
    with pytest.raises(EvaluatorError) as raised:
        score(scrolls("p1"), **params)
    assert str(raised.value) == message


TURNS = st.lists(
    st.tuples(st.sampled_from([SCROLL, OTHER]), st.sampled_from(["p1", "p2", None])),
    min_size=1,
    max_size=14,
)


@settings(max_examples=60, deadline=None)
@given(calls=TURNS)
def test_results_only_ever_turn_a_fail_into_a_pass(calls: list[Any]) -> None:
    aware, blind = score(calls), score(calls, compare_results=False)
    if blind["outcome"] == "pass":
        assert aware["outcome"] == "pass"
    details = aware["details"]
    assert 1 <= details["longest_run"] <= details["identical_calls"] <= len(calls)
    assert details["identical_calls"] == blind["details"]["longest_run"]
    assert details["cycle_calls"] <= blind["details"]["cycle_calls"]
    assert details["redundant"] <= blind["details"]["redundant"]


@settings(max_examples=40, deadline=None)
@given(calls=TURNS, same=st.sampled_from(["page", None]))
def test_with_one_result_throughout_the_verdict_is_the_results_blind_one(
    calls: list[Any], same: str | None
) -> None:
    constant = [(c, same) for c, _ in calls]
    aware, blind = score(constant), score(constant, compare_results=False)
    for field in ("outcome", "label", "score"):
        assert aware[field] == blind[field]
    for field in ("longest_run", "loop_start", "redundant", "cycle_calls", "seconds_wasted"):
        assert aware["details"][field] == blind["details"][field]


@settings(max_examples=40, deadline=None)
@given(calls=st.lists(st.sampled_from([SCROLL, OTHER]), min_size=1, max_size=14))
def test_with_every_result_new_there_is_never_a_loop(calls: list[Any]) -> None:
    found = score([(c, f"page {i}") for i, c in enumerate(calls)])
    assert (found["outcome"], found["label"]) == ("pass", "ok")
    details = found["details"]
    assert (details["longest_run"], details["redundant"], details["cycle_calls"]) == (1, 0, 0)
    assert details["seconds_wasted"] == 0.0
