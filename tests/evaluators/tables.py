"""Generated trace tables for property tests: the shapes evaluators must survive.

`trace_tables()` draws sessions of turns whose spans come in any row order, with AGENT, LLM and
TOOL spans; loops (the same call again, same or changed result), A,B,A,B cycles, plans (todo and
dependency, carried across turns, items in every status), calls to plan and control tools,
missing timestamps, missing results, token counts or not, rewards, task ids and repeats, and
stop reasons of plangate's own and of other agents.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pyarrow as pa
from hypothesis import strategies as st

from plangate.replay import SCHEMA

START = datetime(2026, 1, 1, tzinfo=UTC)
WORK_TOOLS = ("search", "open", "sort_spans")
PLAN_CALLS = ("todo_write", "todo_update", "start_step", "mark_step_done", "create_plan")
STATUSES = ("pending", "in_progress", "completed", "blocked", "failed")
STOPS = ("finished", "forced_finish", "max_iterations", "loop_guard", "submitted", None)


@st.composite
def plans(draw: st.DrawFn) -> str:
    """A plan snapshot: todo items, or steps with dependencies; sometimes not JSON at all."""
    if draw(st.integers(0, 30)) == 0:
        return "not a plan"
    size = draw(st.integers(0, 4))
    items: list[dict[str, Any]] = []
    for index in range(size):
        item: dict[str, Any] = {
            "id": str(index + 1),
            "text": draw(st.sampled_from(["sort", "find", "report", "check"])) + str(index),
            "status": draw(st.sampled_from(STATUSES)),
        }
        if index and draw(st.booleans()):
            item["depends_on"] = [str(draw(st.integers(1, index)))]
        if item["status"] in ("blocked", "failed") and draw(st.booleans()):
            item["reason"] = "waiting"
        items.append(item)
    return json.dumps(items)


@st.composite
def calls(draw: st.DrawFn) -> list[tuple[str, str, str | None]]:
    """A turn's tool calls as (tool, canonical arguments, result): runs, cycles, plain calls."""
    made: list[tuple[str, str, str | None]] = []
    for _ in range(draw(st.integers(0, 5))):
        tool = draw(st.sampled_from(WORK_TOOLS + PLAN_CALLS + ("finish",)))
        arguments = json.dumps(
            {"q": draw(st.integers(0, 2))}, sort_keys=True, separators=(",", ":")
        )
        result = draw(st.one_of(st.none(), st.sampled_from(["r0", "r1", "r2"])))
        shape = draw(st.sampled_from(["once", "run", "cycle"]))
        if shape == "once":
            made.append((tool, arguments, result))
        elif shape == "run":
            changing = draw(st.booleans())
            for i in range(draw(st.integers(2, 6))):
                made.append((tool, arguments, f"page {i}" if changing else result))
        else:
            other = (draw(st.sampled_from(WORK_TOOLS)), arguments, result)
            for i in range(draw(st.integers(3, 6))):
                made.append((tool, arguments, result) if i % 2 == 0 else other)
    return made


@st.composite
def trace_tables(draw: st.DrawFn, max_sessions: int = 3, max_turns: int = 3) -> pa.Table:
    """A trace table in the plangate schema, rows in any order."""
    rows: list[dict[str, Any]] = []
    timed = draw(st.sampled_from(["all", "none", "some"]))
    with_tokens = draw(st.booleans())
    for s in range(draw(st.integers(1, max_sessions))):
        session = draw(st.sampled_from(["a", "b", "c", "d"])) + str(s)
        task = draw(st.one_of(st.none(), st.sampled_from(["t1", "t2"])))
        for t in range(draw(st.integers(1, max_turns))):
            rows.extend(draw(_turn(session, t, task, timed, with_tokens)))
    if draw(st.booleans()):
        rows = draw(st.permutations(rows))
    columns = {name: [r.get(name) for r in rows] for name in SCHEMA.names}
    return pa.Table.from_pydict(columns, schema=SCHEMA)


@st.composite
def _turn(
    draw: st.DrawFn, session: str, turn: int, task: str | None, timed: str, with_tokens: bool
) -> list[dict[str, Any]]:
    trace = f"{session}-{turn}"
    clock = START + timedelta(hours=turn)
    base = {"session_id": session, "turn_index": turn, "trace_id": trace, "status_code": "OK",
            "source": "test", "task_id": task}  # fmt: skip

    def times(seconds: float) -> dict[str, Any]:
        nonlocal clock
        begin, clock = clock, clock + timedelta(seconds=seconds)
        if timed == "none" or (timed == "some" and draw(st.integers(0, 4)) == 0):
            return {}
        return {"start_time": begin, "end_time": clock}

    spans: list[dict[str, Any]] = []
    for i, (tool, arguments, result) in enumerate(draw(calls())):
        spans.append({**base, "span_id": f"{trace}-l{i}", "span_kind": "LLM", "name": "llm.call",
                      "iteration": i + 1, **times(draw(st.sampled_from([0.5, 1.25, 2.0]))),
                      "tokens_prompt": 100 if with_tokens else None,
                      "tokens_completion": 10 if with_tokens else None})  # fmt: skip
        plan = draw(plans()) if tool in PLAN_CALLS and draw(st.booleans()) else None
        spans.append({**base, "span_id": f"{trace}-c{i}", "span_kind": "TOOL",
                      "name": f"tool.{tool}", "iteration": i + 1,
                      "tool_name": tool if draw(st.integers(0, 5)) else None,
                      "tool_args": arguments, "tool_output": result, "plan": plan,
                      **times(draw(st.sampled_from([0.25, 1.0, 3.5])))})  # fmt: skip
    if draw(st.integers(0, 5)):
        agent = {**base, "span_id": f"{trace}-a", "span_kind": "AGENT", "name": "agent.turn",
                 "start_time": START + timedelta(hours=turn), "end_time": clock,
                 "stop_reason": draw(st.sampled_from(STOPS)), "trial": draw(st.integers(0, 2)),
                 "reward": draw(st.one_of(st.none(), st.sampled_from([0.0, 1.0]))),
                 "output_value": draw(st.sampled_from(["Done.", "", "Could not finish."]))}  # fmt: skip
        if timed == "none":
            agent.pop("start_time"), agent.pop("end_time")
        spans.insert(0, agent)
    return spans
