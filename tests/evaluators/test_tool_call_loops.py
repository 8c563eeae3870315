"""tool_call_loops on hand-built turns, invariants, and the harness's own detector."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from plangate.evaluators import evaluate
from plangate.harness import call_runs
from plangate.harness._call_runs import identical_runs
from plangate.replay import build_table
from tests.helpers import turn_rows

A = ("search", {"q": "a"})
B = ("search", {"q": "b"})
C = ("open", {"id": 1})

CASES: list[tuple[str, list[Any], dict[str, Any], tuple[bool | None, str, int, str]]] = [
    ("no calls", [], {}, (None, "no calls", 0, "not applicable: the turn made no tool calls")),
    ("all different", [A, B, C], {}, (True, "ok", 1, "no call repeated back to back (3 calls)")),
    (
        "two in a row is allowed",
        [A, A, B],
        {},
        (True, "ok", 2, "repeated 2 times in a row from call 1 of 3"),
    ),
    (
        "three in a row fails",
        [C, A, A, A, B],
        {},
        (False, "loop", 3, "repeated 3 times in a row from call 2 of 5"),
    ),
    (
        "threshold is a parameter",
        [A, A, A],
        {"max_repeats": 3},
        (True, "ok", 3, "repeated 3 times"),
    ),
    (
        "back and forth",
        [A, B, A, B, A],
        {},
        (False, "cycle", 1, "two calls alternate for 5 calls from call 1"),
    ),
    (
        "short back and forth is fine",
        [A, B, A],
        {},
        (True, "ok", 1, "no call repeated back to back (3 calls)"),
    ),
    (
        "argument order does not matter",
        [("s", {"a": 1, "b": 2}), ("s", {"b": 2, "a": 1}), ("s", {"a": 1, "b": 2})],
        {},
        (False, "loop", 3, "repeated 3 times"),
    ),
]


@pytest.mark.parametrize(("case", "calls", "params", "expected"), CASES, ids=[c[0] for c in CASES])
def test_tool_call_loops(
    case: str, calls: list[Any], params: dict[str, Any], expected: tuple[bool | None, str, int, str]
) -> None:
    table = build_table(turn_rows("s", calls=calls))
    row = evaluate(
        table, names=["tool_call_loops"], params={"tool_call_loops": params}
    ).to_pylist()[0]
    passed, label, longest, fragment = expected
    assert (row["passed"], row["label"]) == (passed, label)
    assert fragment in row["explanation"]
    if calls:
        import json

        assert json.loads(row["details"])["longest_run"] == longest


def test_call_ids_are_ignored_and_turns_do_not_bleed_into_each_other() -> None:
    rows = turn_rows("s", 0, calls=[C, A, A]) + turn_rows("s", 1, calls=[A, B])
    for row in rows:
        if row["span_kind"] == "TOOL":
            row["tool_call_id"] = "same-id-every-time"
    scores = {
        r["turn_index"]: r
        for r in evaluate(build_table(rows), names=["tool_call_loops"]).to_pylist()
    }
    assert "repeated 2 times in a row from call 2 of 3" in scores[0]["explanation"]
    assert "no call repeated back to back (2 calls)" in scores[1]["explanation"]


def test_time_and_tokens_wasted_on_repeats() -> None:
    import json

    table = build_table(turn_rows("s", calls=[A, A, A, A], call_seconds=2.0))
    details = json.loads(evaluate(table, names=["tool_call_loops"]).to_pylist()[0]["details"])
    assert details["seconds_wasted"] == pytest.approx(6.0)
    assert details["tokens_wasted"] == pytest.approx(3 * 110)
    assert details["redundant"] == 3

    untimed = build_table(turn_rows("s", calls=[A, A], start=None))
    details = json.loads(evaluate(untimed, names=["tool_call_loops"]).to_pylist()[0]["details"])
    assert details["seconds_wasted"] is None


KEYS = st.lists(st.sampled_from(["a", "b", "c"]), max_size=30)


@settings(max_examples=200, deadline=None)
@given(keys=KEYS, cut=st.integers(0, 30))
def test_runs_partition_the_sequence_and_respect_groups(keys: list[str], cut: int) -> None:
    groups = [0 if i < cut else 1 for i in range(len(keys))]
    runs = call_runs(keys, groups)
    assert int(runs.lengths.sum()) == len(keys)
    for start, length in zip(runs.starts, runs.lengths, strict=True):
        segment = keys[start : start + length]
        assert len(set(segment)) == 1
        assert len({groups[i] for i in range(start, start + length)}) == 1
    # Maximal: neighbouring runs of the same group hold different keys.
    for (s1, l1), s2 in zip(
        zip(runs.starts[:-1], runs.lengths[:-1], strict=True), runs.starts[1:], strict=True
    ):
        assert keys[s1] != keys[s2] or groups[s1] != groups[s2]
        assert s1 + l1 == s2


@settings(max_examples=30, deadline=None)
@given(keys=st.lists(st.sampled_from(["x", "y"]), min_size=1, max_size=20))
def test_evaluator_longest_run_equals_the_harness_detector(keys: list[str]) -> None:
    import json

    calls = [("t", {"k": k}) for k in keys]
    table = build_table(turn_rows("s", calls=calls))
    details = json.loads(evaluate(table, names=["tool_call_loops"]).to_pylist()[0]["details"])
    detected = max([r.length for r in identical_runs([f"t {k}" for k in keys], min_length=1)])
    assert details["longest_run"] == detected
    assert details["redundant"] == len(keys) - len(set(keys))
