"""Importer for SWE-agent trajectories (`.traj` files).

One file is one session of one turn. Each step of `trajectory[]` is an LLM row (the model's
response, iteration = step number from 1) and a TOOL row for its action: SWE-agent actions are
command lines, not structured calls, so the tool name is the action's first word (`open`,
`edit`, `submit`, `python`, …) and the arguments are `{"command": <the whole action>}`.

The session id is `swe-agent/<run folder>/<file stem>`: SWE-agent names a trajectory after its
task instance and keeps each run in its own folder, so the stem alone repeats across runs of
the same task (the corpus has seven `marshmallow-code__marshmallow-1867.traj`). The stem is the
`task_id`. A file with only a `history` of messages (newer SWE-agent demonstrations) is read
from the assistant messages that carry an `action`.

Trajectories have no clock times: start and end stay null, and a step's `execution_time` (its
duration in seconds) goes into the TOOL row's attributes. Token counts exist only per run
(`info.model_stats`), so they go into the AGENT row's attributes, not onto the LLM rows.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from plangate.harness import canonical_json
from plangate.harness.semconv import AGENT_SPAN_NAME, LLM_SPAN_NAME, TOOL_SPAN_PREFIX
from plangate.replay.importers._reading import (
    Row,
    load_json,
    located,
    optional,
    require,
    span_id_for,
    text_of,
    trace_id_for,
)
from plangate.replay.importers._registry import importer
from plangate.replay.schema import (
    ATTRIBUTES,
    INPUT_VALUE,
    ITERATION,
    NAME,
    OUTPUT_VALUE,
    PARENT_SPAN_ID,
    SESSION_ID,
    SOURCE,
    SPAN_ID,
    SPAN_KIND,
    STATUS_CODE,
    STOP_REASON,
    TASK_ID,
    TOOL_ARGS,
    TOOL_NAME,
    TOOL_OUTPUT,
    TRACE_ID,
    TURN_INDEX,
    TraceTableError,
    build_table,
    canonical_arguments,
)

SOURCE_SWE_AGENT = "swe-agent"

_EXPECTED = "a SWE-agent trajectory {trajectory: [...], info: {...}} (or {history: [...]})"
_MODEL_STATS = {
    "tokens_sent": "tokens_sent",
    "tokens_received": "tokens_received",
    "instance_cost": "cost",
    "api_calls": "api_calls",
}
"""`info.model_stats` fields kept on the AGENT row, and their attribute names."""


@dataclass(frozen=True, slots=True, kw_only=True)
class _Step:
    """One step of a trajectory: what the model said and the command it ran."""

    action: str
    """The command line the model chose."""
    observation: str | None
    """What the environment answered."""
    response: str | None
    """The model's whole response (thought and action), or its thought alone."""
    execution_time: float | None
    """How long the command ran, in seconds, where the file says."""


@importer(SOURCE_SWE_AGENT)
def import_swe_agent(path: Path) -> pa.Table:
    """Read a SWE-agent `.traj` file as one turn.

    Args:
        path: The `.traj` (JSON) file.

    Returns:
        The trace table: the AGENT row (problem statement in, submission out, `exit_status` as
        the stop reason), then an LLM and a TOOL row per step.

    Raises:
        TraceTableError: The file is not JSON or not a trajectory, or a step lacks its action;
            the message names the file, the step and the field.
    """
    data = load_json(path, _EXPECTED)
    if not isinstance(data, Mapping):
        raise TraceTableError(
            f"{path}: the top level is {type(data).__name__}; expected {_EXPECTED}"
        )
    with located(str(path)):
        info = optional(data, "info", dict) or {}
        history = optional(data, "history", list) or []
        steps = _steps(data, history)
    session_id = f"{SOURCE_SWE_AGENT}/{path.parent.name}/{path.stem}"
    trace = trace_id_for(session_id, 0)
    base: Row = {SESSION_ID: session_id, TURN_INDEX: 0, TRACE_ID: trace, SOURCE: SOURCE_SWE_AGENT}
    agent_span = span_id_for(trace, 0)
    rows = [{**base, **_agent_row(agent_span, info, history, path.stem)}]
    for number, step in enumerate(steps, start=1):
        for offset, row in enumerate(_step_rows(step, number)):
            position = 2 * number - 1 + offset
            rows.append(
                {**base, SPAN_ID: span_id_for(trace, position), PARENT_SPAN_ID: agent_span, **row}
            )
    with located(str(path)):
        return build_table(rows)


def _steps(data: Mapping[str, Any], history: list[Any]) -> list[_Step]:
    if "trajectory" not in data and history:
        return _steps_from_history(history)
    trajectory = require(data, "trajectory", list, "a list of steps {action, observation, ...}")
    steps = []
    for index, step in enumerate(trajectory):
        with located(f"trajectory[{index}]"):
            steps.append(_step(step))
    return steps


def _step(step: Any) -> _Step:
    action = require(step, "action", str, "the command the model ran (text)")
    response = optional(step, "response", str) or optional(step, "thought", str)
    execution_time = optional(step, "execution_time", (int, float))
    return _Step(
        action=action,
        observation=text_of(step.get("observation")),
        response=response,
        execution_time=None if execution_time is None else float(execution_time),
    )


def _steps_from_history(history: list[Any]) -> list[_Step]:
    """Steps from a history-only file: each assistant `action` and the message that answers it."""
    steps = []
    for index, message in enumerate(history):
        if not (isinstance(message, Mapping) and message.get("role") == "assistant"):
            continue
        if "action" not in message:
            continue
        with located(f"history[{index}]"):
            action = require(message, "action", str, "the command the model ran (text)")
            reply = history[index + 1] if index + 1 < len(history) else {}
            response = text_of(message.get("content")) or optional(message, "thought", str)
        observation = reply.get("content") if isinstance(reply, Mapping) else None
        steps.append(
            _Step(
                action=action,
                observation=text_of(observation),
                response=response,
                execution_time=None,
            )
        )
    return steps


def _agent_row(span_id: str, info: Mapping[str, Any], history: list[Any], stem: str) -> Row:
    stats = info.get("model_stats")
    attributes = (
        {name: stats[key] for key, name in _MODEL_STATS.items() if key in stats}
        if isinstance(stats, Mapping)
        else {}
    )
    submission, exit_status = info.get("submission"), info.get("exit_status")
    return {
        SPAN_ID: span_id,
        SPAN_KIND: "AGENT",
        NAME: AGENT_SPAN_NAME,
        STATUS_CODE: "UNSET",
        INPUT_VALUE: _problem_statement(history),
        OUTPUT_VALUE: submission if isinstance(submission, str) else None,
        ATTRIBUTES: canonical_json(attributes) if attributes else None,
        STOP_REASON: exit_status if isinstance(exit_status, str) else None,
        TASK_ID: stem,
    }


def _problem_statement(history: list[Any]) -> str | None:
    """The first user message of the history that is not part of a demonstration."""
    for message in history:
        if (
            isinstance(message, Mapping)
            and message.get("role") == "user"
            and not message.get("is_demo")
        ):
            return text_of(message.get("content"))
    return None


def _step_rows(step: _Step, number: int) -> tuple[Row, Row]:
    command = step.action.strip()
    name = command.split(maxsplit=1)[0] if command else None
    llm: Row = {
        SPAN_KIND: "LLM",
        NAME: LLM_SPAN_NAME,
        STATUS_CODE: "UNSET",
        ITERATION: number,
        OUTPUT_VALUE: step.response,
    }
    tool: Row = {
        SPAN_KIND: "TOOL",
        NAME: f"{TOOL_SPAN_PREFIX}{name or ''}",
        STATUS_CODE: "UNSET",
        ITERATION: number,
        TOOL_NAME: name,
        TOOL_ARGS: canonical_arguments({"command": command}),
        TOOL_OUTPUT: step.observation,
        ATTRIBUTES: (
            None
            if step.execution_time is None
            else canonical_json({"execution_time": step.execution_time})
        ),
    }
    return llm, tool
