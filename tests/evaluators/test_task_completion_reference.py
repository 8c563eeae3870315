"""task_completion, column-wise, equals a plain per-turn reference on generated trace tables.

The reference reads one turn's spans as dicts (in turn order) and its rubric, the way the
evaluator was written before it judged every turn at once.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from datetime import datetime
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from plangate.evaluators import Rubric, RubricSet, evaluate, rubric_from_dict
from plangate.replay import build_table
from plangate.replay.schema import ERROR_STOP_REASONS, STOP_REASONS
from tests.evaluators.tables import PLAN_CALLS, WORK_TOOLS, trace_tables
from tests.helpers import turn_rows

TOOLS = (*WORK_TOOLS, *PLAN_CALLS, "finish", "None", "refund")
MARKS = {"pending": "[ ]", "in_progress": "[~]", "completed": "[x]", "blocked": "[!]"}


def reference(spans: list[dict[str, Any]], rubric: Rubric | None) -> dict[str, Any]:
    """One turn's verdict: outcome, score, label, explanation and details."""
    agent = next((s for s in spans if s["span_kind"] == "AGENT"), {})
    stop, reward = agent.get("stop_reason"), agent.get("reward")
    if reward is not None and not math.isnan(reward):
        verdict = _verdict(reward >= 1.0, reward, "success" if reward >= 1.0 else "failure")
        verdict["explanation"] = f"{agent['source']} judged the turn: reward {reward:g}"
        verdict["details"] = {"reward": reward, "source": agent["source"]}
    else:
        verdict = _judged(spans, stop, agent.get("output_value") or "", rubric)
    if stop in ERROR_STOP_REASONS:
        verdict.update(outcome="error", score=None, label="error")
    return verdict


def _judged(
    spans: list[dict[str, Any]], stop: str | None, answer: str, rubric: Rubric | None
) -> dict[str, Any]:
    snapshots = [s["plan"] for s in spans if s["plan"] is not None]
    items = _items(snapshots[-1]) if snapshots else []
    calls = [(s["tool_name"] or "None", s["tool_args"]) for s in spans if s["span_kind"] == "TOOL"]
    failures: list[str] = []
    applied = 0

    def check(ok: bool, failure: str) -> None:
        nonlocal applied
        applied += 1
        failures.extend([] if ok else [failure])

    if stop in STOP_REASONS:
        check(stop == "finished", f"stopped by {stop}, not by finish")
    left = [i for i in items if i.get("status") in ("pending", "in_progress")]
    if items:
        check(not left, f"{len(left)} plan item(s) left open: " + _named(left))
    unexplained = [i for i in items if i.get("status") == "blocked" and not i.get("reason")]
    if any(i.get("status") == "blocked" for i in items):
        check(not unexplained, "blocked without a reason: " + _named(unexplained))
    for ok, failure in _rubric_checks(rubric, items, calls, answer) if rubric else []:
        check(ok, failure)
    note = _note(stop)
    if not applied:
        verdict = _verdict(None, None, "no evidence")
        verdict["explanation"] = "not applicable: no reward, rubric, plan or finish to judge" + note
    else:
        verdict = _verdict(not failures, (applied - len(failures)) / applied, "")
        verdict["label"] = "incomplete" if failures else "complete"
        held = (["ended by finish"] if stop == "finished" else []) + (
            ["every plan item closed"] if items else []
        )
        told = " with ".join(held) or "the rubric holds"
        told += f"; all {applied} checks hold" if applied > 2 else ""
        verdict["explanation"] = ("; ".join(failures) if failures else told) + note
    verdict["details"] = {"checks": applied, "failures": failures, "plan_items": len(items)}
    return verdict


def _rubric_checks(
    rubric: Rubric, items: list[dict[str, Any]], calls: list[tuple[str, str | None]], answer: str
) -> list[tuple[bool, str]]:
    results = []
    if rubric.plan_expected is not None:
        results.append(
            (bool(items), "a plan was expected but none was made")
            if rubric.plan_expected
            else (not items, f"planned a request that needed no plan ({len(items)} items)")
        )
    for tool in rubric.required_tools:
        made = any(tool.matches(name, _arguments(args)) for name, args in calls)
        results.append((made, f"required call {tool.describe()} was never made"))
    for name in rubric.forbidden_tools:
        count = sum(1 for called, _ in calls if called == name)
        results.append((count == 0, f"called forbidden tool {name} ({count} times)"))
    closed = [
        str(i.get("text", "")).lower() for i in items if i.get("status") in ("completed", "blocked")
    ]
    for text in rubric.required_plan_items:
        found = any(text.lower() in c for c in closed)
        results.append((found, f"plan item {text!r} was not completed"))
    for answer_check in rubric.answer:
        problem = answer_check.check(answer)
        results.append((problem is None, problem or ""))
    return results


def _verdict(passed: bool | None, score: float | None, label: str) -> dict[str, Any]:
    outcome = {True: "pass", False: "fail", None: "n/a"}[passed]
    return {"outcome": outcome, "score": score, "label": label}


def _note(stop: str | None) -> str:
    if stop is None:
        return " (the source does not say how the turn ended)"
    return "" if stop in STOP_REASONS else f" (the source's stop reason {stop!r} is not judged)"


def _items(text: str) -> list[dict[str, Any]]:
    try:
        plan = json.loads(text)
    except json.JSONDecodeError:
        return []
    return [i for i in plan if isinstance(i, dict)] if isinstance(plan, list) else []


def _named(items: list[dict[str, Any]]) -> str:
    return ", ".join(
        f"{MARKS.get(str(i.get('status')), '[?]')} {i.get('id', '?')} {i.get('text', '')!r} "
        f"({i.get('status')})"
        for i in items
    )


def _arguments(text: str | None) -> dict[str, Any] | None:
    try:
        value = json.loads(text) if text is not None else None
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def turns_of(table: pa.Table) -> dict[tuple[str, int], list[dict[str, Any]]]:
    """Each turn's spans in turn order: by start time (none last), then row."""
    turns: dict[tuple[str, int], list[tuple[int, dict[str, Any]]]] = {}
    for row, span in enumerate(table.to_pylist()):
        turns.setdefault((span["session_id"], span["turn_index"]), []).append((row, span))

    def order(entry: tuple[int, dict[str, Any]]) -> tuple[bool, datetime | int, int]:
        start = entry[1]["start_time"]
        return start is None, start if start is not None else 0, entry[0]

    return {key: [s for _, s in sorted(spans, key=order)] for key, spans in turns.items()}


def assert_matches_reference(table: pa.Table, rubrics: RubricSet) -> None:
    """Every turn's row equals the reference's verdict."""
    scores = evaluate(table, rubrics, names=["task_completion"]).to_pylist()
    turns = turns_of(table)
    assert sorted((r["session_id"], r["turn_index"]) for r in scores) == sorted(turns)
    for row in scores:
        key = (row["session_id"], row["turn_index"])
        expected = reference(turns[key], rubrics.lookup(*key))
        assert row["outcome"] == expected["outcome"], key
        assert row["label"] == expected["label"], key
        assert row["score"] == expected["score"], key
        assert json.loads(row["details"]) == expected["details"], key
        if row["outcome"] != "error":
            assert row["explanation"] == expected["explanation"], key


@st.composite
def rubric_dicts(draw: st.DrawFn) -> dict[str, Any]:
    """A rubric mapping over the generated tables' tools, plans and answers: each check or not."""
    names = st.one_of(st.sampled_from(WORK_TOOLS), st.sampled_from(TOOLS))  # mostly called ones
    arguments = st.one_of(st.fixed_dictionaries({"q": st.integers(0, 2)}), st.just({}), st.none())
    match = st.sampled_from(["subset", "exact", "ignore"])
    tool = st.one_of(
        st.fixed_dictionaries({"name": names, "arguments": arguments, "match": match}), names
    )
    answer = st.fixed_dictionaries(
        {
            "kind": st.sampled_from(["contains", "not_contains", "regex", "json_path"]),
            "value": st.sampled_from(["done", "Could", "x", r"^\w+\.$", r"^$", "$.a", ""]),
        }
    )
    checks = {
        "plan_expected": st.booleans(),
        "required_tools": st.lists(tool, min_size=1, max_size=3),
        "forbidden_tools": st.lists(names, min_size=1, max_size=2),
        "required_plan_items": st.lists(
            st.sampled_from(["SORT", "find1", "check", "x"]), min_size=1, max_size=2
        ),  # fmt: skip
        "answer": st.lists(answer, min_size=1, max_size=2),
    }
    return {key: draw(values) for key, values in checks.items() if draw(st.booleans())}


@st.composite
def tables_and_rubrics(draw: st.DrawFn) -> tuple[pa.Table, RubricSet]:
    """A generated table, and no rubric, a default, per-turn rubrics (one for no turn), or both."""
    table = draw(trace_tables())
    default = draw(st.one_of(st.none(), rubric_dicts()))
    sessions, turns = table["session_id"].to_pylist(), table["turn_index"].to_pylist()
    keys = sorted(set(zip(sessions, turns, strict=True)))
    chosen = draw(st.lists(st.sampled_from([*keys, ("nowhere", 0)]), unique=True, max_size=4))
    return table, RubricSet(
        default=None if default is None else rubric_from_dict(default),
        turns={key: rubric_from_dict(draw(rubric_dicts())) for key in chosen},
    )


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=tables_and_rubrics())
def test_generated_tables_match_the_reference(case: tuple[pa.Table, RubricSet]) -> None:
    assert_matches_reference(*case)


@settings(max_examples=40, deadline=None)
@given(table=trace_tables(max_sessions=2, max_turns=2))
def test_generated_tables_without_rubrics_match_the_reference(table: pa.Table) -> None:
    assert_matches_reference(table, RubricSet())


@st.composite
def calling_turns(draw: st.DrawFn) -> pa.Table:
    """Turns that call the work tools with arguments, and answer or not: for the rubric checks."""
    rows: list[dict[str, Any]] = []
    arguments = st.fixed_dictionaries({"q": st.integers(0, 2)})
    for n in range(draw(st.integers(1, 4))):
        rows += turn_rows(
            f"s{n}",
            calls=draw(st.lists(st.tuples(st.sampled_from(WORK_TOOLS), arguments), max_size=4)),
            stop_reason=draw(st.sampled_from(["finished", "loop_guard", None])),
            answer=draw(st.sampled_from(["Done.", "", "x", None])),
        )
    return build_table(rows)


def call_rubrics() -> st.SearchStrategy[dict[str, Any]]:
    """Rubrics that require calls with arguments and check the answer."""
    call = st.fixed_dictionaries(
        {
            "name": st.sampled_from(WORK_TOOLS),
            "arguments": st.fixed_dictionaries({"q": st.integers(0, 2)}),
            "match": st.sampled_from(["subset", "exact"]),
        }
    )
    answer = st.fixed_dictionaries(
        {"kind": st.sampled_from(["contains", "regex"]), "value": st.sampled_from(["x", "^$"])}
    )
    return st.fixed_dictionaries(
        {"required_tools": st.lists(call, min_size=1, max_size=2), "answer": st.lists(answer)}
    )


@settings(max_examples=40, deadline=None)
@given(table=calling_turns(), default=st.one_of(call_rubrics(), rubric_dicts()))
def test_rubric_checks_match_the_reference(table: pa.Table, default: dict[str, Any]) -> None:
    assert_matches_reference(table, RubricSet(default=rubric_from_dict(default)))


CHECKED = {"id": "1", "text": "Check", "status": "completed"}
HAND_BUILT: list[tuple[str, Callable[[], list[dict[str, Any]]]]] = [
    (
        "an infrastructure error, a negative zero reward, a forced finish",
        lambda: (
            turn_rows("e", stop_reason="model_error")
            + turn_rows("z", reward=-0.0, stop_reason=None)
            + turn_rows("f", stop_reason="forced_finish", calls=[("refund", {"q": 1})])
        ),
    ),
    (
        "every check holds",
        lambda: turn_rows(
            "ok",
            calls=[("todo_write", {}), ("refund", {"q": 2})],
            plans={1: [CHECKED, {"id": "2", "text": "B", "status": "blocked", "reason": "r"}]},
        ),
    ),
    (
        "the last snapshot counts; an entry that is not an item; blocked without a reason",
        lambda: turn_rows(
            "p",
            calls=[("todo_write", {}), ("todo_write", {}), ("refund", {"q": 2})],
            plans={
                0: [{"id": "1", "text": "A", "status": "pending"}],
                2: [CHECKED, "junk", {"id": "2", "text": "B", "status": "blocked"}],
            },
            start=None,
        ),
    ),
]


@pytest.mark.parametrize(("case", "rows"), HAND_BUILT, ids=[c[0] for c in HAND_BUILT])
def test_hand_built_tables_match_the_reference(
    case: str, rows: Callable[[], list[dict[str, Any]]]
) -> None:
    rubric = rubric_from_dict(
        {"required_tools": [{"name": "refund", "arguments": {"q": 2}}], "plan_expected": True,
         "required_plan_items": ["check"], "answer": [{"kind": "contains", "value": "DONE"}]}
    )  # fmt: skip
    table = build_table(rows())
    assert_matches_reference(table, RubricSet())
    assert_matches_reference(table, RubricSet(default=rubric))
