"""task_completion on hand-built turns: one parametrized table of cases, plus invariants."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from plangate.evaluators import RubricSet, evaluate, rubric_from_dict
from plangate.replay import build_table
from tests.helpers import turn_rows


def item(n: int, status: str, reason: str | None = None) -> dict[str, Any]:
    data = {"id": str(n), "text": f"Task {n}", "status": status}
    if reason:
        data["reason"] = reason
    return data


DONE = [item(1, "completed"), item(2, "completed")]
REFUND = ("refund_item", {"order_id": "O-1", "item_id": "blender", "reason": "damaged"})

CASES: list[
    tuple[str, dict[str, Any], dict[str, Any] | None, tuple[bool, str, float | None, str]]
] = [
    (
        "finished, plan closed",
        {"calls": [REFUND], "plans": {0: DONE}},
        None,
        (True, "complete", 1.0, "every plan item closed"),
    ),
    ("no plan, finished", {"calls": [REFUND]}, None, (True, "complete", 1.0, "ended by finish")),
    (
        "loop guard stop",
        {"calls": [REFUND], "stop_reason": "loop_guard"},
        None,
        (False, "incomplete", 0.0, "stopped by loop_guard"),
    ),
    (
        "an item left open",
        {"calls": [REFUND], "plans": {0: [item(1, "completed"), item(2, "pending")]}},
        None,
        (False, "incomplete", 0.5, "1 plan item(s) left open: [ ] 2 'Task 2' (pending)"),
    ),
    (
        "blocked with reason is fine",
        {
            "calls": [REFUND],
            "plans": {0: [item(1, "completed"), item(2, "blocked", "needs approval")]},
        },
        None,
        (True, "complete", 1.0, "closed"),
    ),
    (
        "blocked without reason",
        {"calls": [REFUND], "plans": {0: [item(1, "completed"), item(2, "blocked")]}},
        None,
        (False, "incomplete", 2 / 3, "blocked without a reason"),
    ),
    (
        "required call made",
        {"calls": [REFUND]},
        {"required_tools": [{"name": "refund_item", "arguments": {"order_id": "O-1"}}]},
        (True, "complete", 1.0, ""),
    ),
    (
        "required call with wrong arguments",
        {"calls": [REFUND]},
        {"required_tools": [{"name": "refund_item", "arguments": {"order_id": "O-2"}}]},
        (False, "incomplete", 0.5, 'required call refund_item({"order_id": "O-2"}) was never made'),
    ),
    (
        "forbidden tool",
        {"calls": [REFUND, ("cancel_order", {})]},
        {"forbidden_tools": ["cancel_order"]},
        (False, "incomplete", 0.5, "called forbidden tool cancel_order (1 times)"),
    ),
    (
        "plan expected",
        {"calls": [REFUND]},
        {"plan_expected": True},
        (False, "incomplete", 0.5, "a plan was expected but none was made"),
    ),
    (
        "plan not expected",
        {"calls": [REFUND], "plans": {0: DONE}},
        {"plan_expected": False},
        (False, "incomplete", 2 / 3, "planned a request that needed no plan"),
    ),
    (
        "answer contains",
        {"answer": "Refund issued for the blender."},
        {"answer": [{"kind": "contains", "value": "refund"}]},
        (True, "complete", 1.0, ""),
    ),
    (
        "answer regex fails",
        {"answer": "nothing"},
        {"answer": [{"kind": "regex", "value": r"O-\d+"}]},
        (False, "incomplete", 0.5, "answer does not match /O-\\d+/"),
    ),
    (
        "json path",
        {"answer": json.dumps({"refund": {"amount": 40}})},
        {"answer": [{"kind": "json_path", "value": "$.refund.amount", "expected": 40}]},
        (True, "complete", 1.0, ""),
    ),
    (
        "json path wrong value",
        {"answer": json.dumps({"refund": {"amount": 41}})},
        {"answer": [{"kind": "json_path", "value": "$.refund.amount", "expected": 40}]},
        (False, "incomplete", 0.5, "answer $.refund.amount is 41, expected 40"),
    ),
    (
        "required plan item",
        {"plans": {}, "calls": [("x", {})]},
        {"required_plan_items": ["task 3"]},
        (False, "incomplete", 0.5, "plan item 'task 3' was not completed"),
    ),
    (
        "source reward wins",
        {"reward": 0.0, "stop_reason": None},
        {"plan_expected": True},
        (False, "failure", 0.0, "test judged the turn: reward 0"),
    ),
    (
        "source reward success",
        {"reward": 1.0, "stop_reason": None},
        None,
        (True, "success", 1.0, "reward 1"),
    ),
    (
        "unknown ending is not a failure, nor a pass",
        {"stop_reason": None, "calls": [REFUND]},
        None,
        (None, "no evidence", None, "does not say how the turn ended"),
    ),
    (
        "an apology is not a completed task",
        {"stop_reason": None, "answer": "Sorry, I could not reach the carrier."},
        None,
        (None, "no evidence", None, "not applicable"),
    ),
    (
        "another agent's stop reason is not judged",
        {"stop_reason": "user_stop", "calls": [REFUND]},
        None,
        (None, "no evidence", None, "stop reason 'user_stop' is not judged"),
    ),
    (
        "another agent's stop reason, with a rubric",
        {"stop_reason": "user_stop", "calls": [REFUND]},
        {"required_tools": ["refund_item"]},
        (True, "complete", 1.0, "the rubric holds"),
    ),
]


@pytest.mark.parametrize(("case", "turn", "rubric", "expected"), CASES, ids=[c[0] for c in CASES])
def test_task_completion(
    case: str,
    turn: dict[str, Any],
    rubric: dict[str, Any] | None,
    expected: tuple[bool, str, float | None, str],
) -> None:
    table = build_table(turn_rows("s", **turn))
    rubrics = RubricSet(default=rubric_from_dict(rubric)) if rubric else None
    row = evaluate(table, rubrics, names=["task_completion"]).to_pylist()[0]
    passed, label, score, fragment = expected
    assert (row["passed"], row["label"]) == (passed, label)
    assert row["outcome"] == {True: "pass", False: "fail", None: "n/a"}[passed]
    assert row["score"] == pytest.approx(score)
    assert fragment in row["explanation"]
    assert row["evaluator"] == "task_completion" and row["version"] == 2


def test_per_turn_rubric_overrides_the_default() -> None:
    table = build_table(turn_rows("a", calls=[REFUND]) + turn_rows("b", calls=[REFUND]))
    rubrics = RubricSet(
        default=rubric_from_dict({"forbidden_tools": ["refund_item"]}),
        turns={("b", 0): rubric_from_dict({"required_tools": ["refund_item"]})},
    )
    rows = {
        r["session_id"]: r for r in evaluate(table, rubrics, names=["task_completion"]).to_pylist()
    }
    assert not rows["a"]["passed"] and rows["b"]["passed"]


@settings(max_examples=30, deadline=None)
@given(
    turns=st.lists(
        st.tuples(
            st.sampled_from(["finished", "loop_guard", "max_iterations", None]),
            st.lists(
                st.sampled_from(["pending", "in_progress", "completed", "blocked"]), max_size=4
            ),
            st.one_of(st.none(), st.sampled_from([0.0, 0.5, 1.0])),
        ),
        min_size=1,
        max_size=6,
    )
)
def test_invariants(turns: list[tuple[str | None, list[str], float | None]]) -> None:
    rows = []
    for n, (stop, statuses, reward) in enumerate(turns):
        plan = [item(i, s, "why" if s == "blocked" else None) for i, s in enumerate(statuses, 1)]
        rows += turn_rows(
            f"s{n}",
            calls=[("work", {"n": n})],
            stop_reason=stop,
            plans={0: plan} if plan else {},
            reward=reward,
        )
    table = build_table(rows)
    before = table.to_pylist()
    scores = evaluate(table, names=["task_completion"]).to_pylist()
    assert table.to_pylist() == before
    assert len(scores) == len(turns)
    for row, (stop, statuses, reward) in zip(
        sorted(scores, key=lambda r: int(r["session_id"][1:])), turns, strict=True
    ):
        assert row["score"] is None or 0.0 <= row["score"] <= 1.0
        if reward is None and stop is None and not statuses:
            assert (row["passed"], row["outcome"]) == (None, "n/a")  # nothing to judge
        elif reward is None:
            open_items = any(s in ("pending", "in_progress") for s in statuses)
            assert row["passed"] == (stop in ("finished", None) and not open_items)
        else:
            assert row["passed"] == (reward >= 1.0)
