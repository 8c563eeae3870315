"""Rubric files and pass@k / pass^k."""

from __future__ import annotations

from math import comb
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from plangate.evaluators import RubricError, evaluate, load_rubrics, repeat_scores, rubric_from_dict
from plangate.replay import build_table
from tests.helpers import turn_rows


def test_rubric_round_trips_through_its_dict() -> None:
    data = {
        "required_tools": [
            {"name": "refund_item", "arguments": {"order_id": "O-1"}, "match": "exact"},
            {"name": "send_email"},
        ],
        "order": "strict",
        "forbidden_tools": ["cancel_order"],
        "required_plan_items": ["refund"],
        "answer": [
            {"kind": "contains", "value": "refund"},
            {"kind": "json_path", "value": "$.a", "expected": 1},
        ],
        "plan_expected": True,
        "max_seconds": 30,
        "max_iterations": 12,
    }
    rubric = rubric_from_dict(data)
    assert rubric_from_dict(rubric.to_dict()) == rubric


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"required_tool": []}, "unknown key 'required_tool'"),
        (
            {"order": "sorted"},
            "order: 'sorted' is not one of 'strict', 'unordered', 'subset', 'superset'",
        ),
        ({"required_tools": [{"arguments": {}}]}, "required_tools[0]: expected a tool name"),
        (
            {"answer": [{"kind": "regex", "value": "("}]},
            "answer[0].value: not a valid regular expression",
        ),
        ({"max_iterations": "ten"}, "max_iterations: 'ten' has the wrong type"),
        ({"version": 2}, "rubric version 2 is not supported"),
    ],
)
def test_bad_rubrics_name_the_key(data: dict[str, object], message: str) -> None:
    with pytest.raises(RubricError, match=None) as error:
        rubric_from_dict(data, "r.json")
    assert message in str(error.value) and "r.json" in str(error.value)


def test_rubric_files_json_and_toml(tmp_path: Path) -> None:
    (tmp_path / "r.json").write_text(
        '{"default": {"plan_expected": true}, "turns": [{"session_id": "s", "turn_index": 0, "forbidden_tools": ["x"]}]}'
    )
    (tmp_path / "r.toml").write_text(
        '[default]\nplan_expected = true\n[[turns]]\nsession_id = "s"\nturn_index = 0\nforbidden_tools = ["x"]\n'
    )
    for name in ("r.json", "r.toml"):
        rubrics = load_rubrics(tmp_path / name)
        assert rubrics.lookup("s", 0).forbidden_tools == ("x",)  # type: ignore[union-attr]
        assert rubrics.lookup("t", 3).plan_expected is True  # type: ignore[union-attr]
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(RubricError, match="bad.json: not valid JSON"):
        load_rubrics(tmp_path / "bad.json")
    (tmp_path / "noturn.json").write_text('{"turns": [{"session_id": "s"}]}')
    with pytest.raises(
        RubricError, match=r"turns\[0\]: each turn rubric needs 'session_id' and 'turn_index'"
    ):
        load_rubrics(tmp_path / "noturn.json")


def scores_for(outcomes: dict[str, list[bool]]):  # type: ignore[no-untyped-def]
    rows = []
    for task, results in outcomes.items():
        for trial, ok in enumerate(results):
            rows += turn_rows(
                f"{task}-{trial}",
                task_id=task,
                trial=trial,
                reward=1.0 if ok else 0.0,
                stop_reason=None,
            )
    return evaluate(build_table(rows), names=["task_completion"])


def test_pass_hat_k_and_pass_at_k_by_hand() -> None:
    scores = scores_for(
        {"a": [True, True, False, True], "b": [False, False, False, False], "c": [True] * 4}
    )
    results = {r.k: r for r in repeat_scores(scores)}
    assert results[1].pass_hat_k == pytest.approx((3 / 4 + 0 + 1) / 3)
    assert results[2].pass_hat_k == pytest.approx((comb(3, 2) / comb(4, 2) + 0 + 1) / 3)
    assert results[4].pass_hat_k == pytest.approx((0 + 0 + 1) / 3)
    assert results[2].pass_at_k == pytest.approx((1 + 0 + 1) / 3)
    assert all(r.tasks == 3 for r in results.values())


@settings(max_examples=30)
@given(st.lists(st.lists(st.booleans(), min_size=1, max_size=5), min_size=1, max_size=5))
def test_repeat_invariants(trials: list[list[bool]]) -> None:
    scores = scores_for({f"t{i}": t for i, t in enumerate(trials)})
    results = repeat_scores(scores, ks=[1, 2, 3])
    for r in results:
        if r.tasks:
            assert r.pass_hat_k is not None and r.pass_at_k is not None
            assert 0.0 <= r.pass_hat_k <= r.pass_at_k <= 1.0
    first = results[0]
    assert first.pass_at_k == pytest.approx(first.pass_hat_k)  # one try: the same number
    hats = [r.pass_hat_k for r in results if r.tasks == len(trials)]
    assert hats == sorted(hats, reverse=True)  # all-k-pass can only get harder with k


def test_no_judged_try_has_no_default_k_and_no_rate() -> None:
    # Nothing to judge: no rubric, no reward, a stop reason that is not plangate's.
    rows = turn_rows("s", stop_reason="user_stop") + turn_rows("s", 1, stop_reason="user_stop")
    scores = evaluate(build_table(rows), names=["task_completion"])
    assert set(scores.column("outcome").to_pylist()) == {"n/a"}
    assert repeat_scores(scores) == []
    (one,) = repeat_scores(scores, ks=[1])
    assert (one.tasks, one.pass_at_k, one.pass_hat_k) == (0, None, None)
