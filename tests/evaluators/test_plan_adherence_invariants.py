"""plan_adherence's invariants on generated tables of turns and sessions."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from plangate.evaluators import evaluate
from plangate.replay import build_table
from tests.evaluators.test_plan_adherence import Plan, Step, item, rows

# -- invariants --------------------------------------------------------------------------------

STATUSES = ["pending", "in_progress", "completed", "blocked", "failed"]
TOOLS = ["search", "open", "todo_write", "todo_update", "todo_read", "start_step", "finish"]


@st.composite
def plans(draw: st.DrawFn) -> Plan:
    ids = draw(st.lists(st.sampled_from(["1", "2", "3", "a", "b"]), unique=True, max_size=4))
    out = []
    for i in ids:
        data = item(
            i,
            draw(st.sampled_from(STATUSES)),
            deps=draw(st.none() | st.lists(st.sampled_from(["1", "a", "b", "z"]), max_size=2)),
        )
        # Some lists repeat a text, some items have no id.
        data["text"] = draw(st.sampled_from([data["text"], "same"]))
        if draw(st.booleans()):
            del data["id"]
        out.append(data)
    return out


@st.composite
def turns(draw: st.DrawFn) -> list[Step]:
    steps = draw(st.lists(st.tuples(st.sampled_from(TOOLS), st.none() | plans()), max_size=8))
    return [(name, plan) for name, plan in steps]


@st.composite
def tables(draw: st.DrawFn) -> tuple[pa.Table, int]:
    out: list[dict[str, Any]] = []
    count = 0
    for s in range(draw(st.integers(1, 2))):
        for t in range(draw(st.integers(1, 3))):
            out += rows(draw(turns()), session=f"s{s}", turn=t, offset=100 * t)
            count += 1
    return build_table(out), count


def by_turn(scores: pa.Table) -> list[dict[str, Any]]:
    return sorted(scores.to_pylist(), key=lambda r: (r["session_id"], r["turn_index"]))


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tables(), st.randoms(use_true_random=False))
def test_invariants(drawn: tuple[pa.Table, int], random: Any) -> None:
    table, count = drawn
    before = table.to_pylist()
    scores = evaluate(table, names=["plan_adherence"])
    assert table.to_pylist() == before
    assert scores.num_rows == count
    for row in scores.to_pylist():
        assert row["score"] is None or 0.0 <= row["score"] <= 1.0
        assert (row["score"] is None) == (row["label"] == "no plan")
        assert row["explanation"]
    order = list(range(table.num_rows))
    random.shuffle(order)
    shuffled = evaluate(table.take(pa.array(order)), names=["plan_adherence"])
    assert by_turn(shuffled) == by_turn(scores)


def test_a_table_without_tool_calls_scores_every_turn_as_no_plan() -> None:
    only_agents = [r for r in rows([]) + rows([], session="t") if r["span_kind"] == "AGENT"]
    result = evaluate(build_table(only_agents), names=["plan_adherence"]).to_pylist()
    assert [(r["session_id"], r["label"], r["passed"]) for r in result] == [
        ("s", "no plan", None),
        ("t", "no plan", None),
    ]
