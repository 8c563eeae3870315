"""Inside an ATIF trajectory: checked fields, a turn's rows (`Turn`), `extra.plangate` read back.

The names of what the importer keeps in `attributes` are defined here, once, for the export too.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence, Set
from datetime import datetime
from typing import Any

from plangate.harness import canonical_json
from plangate.harness.semconv import AGENT_SPAN_NAME, LLM_SPAN_NAME, TOOL_SPAN_PREFIX
from plangate.replay._attribute_fields import CACHED_TOKENS, COST_TOTAL
from plangate.replay.importers._reading import (
    Row,
    located,
    require,
    span_id_for,
    text_of,
    timestamp,
    trace_id_for,
)
from plangate.replay.schema import (
    ATTRIBUTES,
    END_TIME,
    EVENTS,
    INPUT_VALUE,
    ITERATION,
    MODEL_NAME,
    NAME,
    OUTPUT_VALUE,
    PARENT_SPAN_ID,
    PLAN,
    REWARD,
    SESSION_ID,
    SOURCE,
    SPAN_ID,
    SPAN_KIND,
    START_TIME,
    STATUS_CODE,
    STATUS_CODES,
    STATUS_MESSAGE,
    STOP_REASON,
    TASK_ID,
    TOKENS_COMPLETION,
    TOKENS_PROMPT,
    TOOL_ARGS,
    TOOL_CALL_ID,
    TOOL_NAME,
    TOOL_OUTPUT,
    TRACE_ID,
    TRIAL,
    TURN_INDEX,
    VARIANT,
    TraceTableError,
    canonical_arguments,
)

SOURCE_ATIF = "atif"


AGENT_KEY = "atif.agent"
TRAJECTORY_KEY = "atif.trajectory"
STEP_KEY = "atif.step"
"""In attributes: the rest of a step; also the name of the events that hold a whole step."""
TOOL_CALL_KEY = "atif.tool_call"
RESULT_KEY = "atif.result"
METRICS_KEY = "atif.metrics"
USER_POSITION_KEY = "atif.user_position"
"""On an AGENT row whose user step was not the turn's first: its position (null: none)."""
PLANGATE = "plangate"
"""The key in an ATIF `extra` under which plangate keeps the columns ATIF has no field for."""
MEASURED = ("prompt_tokens", "completion_tokens", "cached_tokens", "cost_usd")
"""The metrics that go to columns and OpenInference attributes; the rest to `atif.metrics`."""

OBJECT = dict
NUMBER = (int, float)
ROOT_FIELDS = {
    "schema_version": str,
    "session_id": str,
    "trajectory_id": str,
    "agent": OBJECT,
    "steps": list,
    "notes": str,
    "final_metrics": OBJECT,
    "continued_trajectory_ref": str,
    "extra": OBJECT,
    "subagent_trajectories": list,
}
AGENT_FIELDS = {
    "name": str,
    "version": str,
    "model_name": str,
    "tool_definitions": list,
    "extra": OBJECT,
}
FINAL_FIELDS = {
    "total_prompt_tokens": int,
    "total_completion_tokens": int,
    "total_cached_tokens": int,
    "total_cost_usd": NUMBER,
    "total_steps": int,
    "extra": OBJECT,
}
STEP_FIELDS = {
    "step_id": int,
    "timestamp": str,
    "source": str,
    "model_name": str,
    "reasoning_effort": (str, int, float),
    "message": (str, list),
    "reasoning_content": str,
    "tool_calls": list,
    "observation": OBJECT,
    "metrics": OBJECT,
    "is_copied_context": bool,
    "llm_call_count": int,
    "extra": OBJECT,
}
CALL_FIELDS = {
    "tool_call_id": str,
    "function_name": str,
    "arguments": (OBJECT, str),
    "extra": OBJECT,
}
RESULT_FIELDS = {
    "source_call_id": str,
    "content": (str, list),
    "subagent_trajectory_ref": list,
    "extra": OBJECT,
}
REF_FIELDS = {"trajectory_id": str, "session_id": str, "trajectory_path": str, "extra": OBJECT}
METRICS_FIELDS = {
    "prompt_tokens": int,
    "completion_tokens": int,
    "cached_tokens": int,
    "cost_usd": NUMBER,
    "prompt_token_ids": list,
    "completion_token_ids": list,
    "logprobs": list,
    "extra": OBJECT,
}
_WORDS = {
    str: "text",
    int: "an integer",
    float: "a number",
    bool: "true or false",
    dict: "an object",
    list: "a list",
}
_SOURCES = ("agent", "system", "user")
_STEP_READ = frozenset({"step_id", "source", "message", "timestamp"})
_LLM_READ = _STEP_READ | {"model_name", "tool_calls", "observation", "metrics"}
_DISPATCH_READ = frozenset({"step_id", "source", "timestamp", "tool_calls", "observation"})


def read_step(step: Any) -> dict[str, Any]:
    """`step`, checked: its fields, metrics, calls and results; the error names the field."""
    if not isinstance(step, dict):
        raise TraceTableError(f"is {show(step)}; expected a step object")
    check(step, STEP_FIELDS)
    source = require(step, "source", str, f"one of {', '.join(_SOURCES)}")
    if source not in _SOURCES:
        raise TraceTableError(f"field 'source' is {show(source)}; expected {', '.join(_SOURCES)}")
    with located("metrics"):
        _check_metrics(step.get("metrics") or {})
    results = _items(step.get("observation") or {}, "results", "observation.results")
    for number, result in enumerate(results):
        with located(f"observation.results[{number}]"):
            check(result, RESULT_FIELDS)
            for ref in _items(result, "subagent_trajectory_ref", "subagent_trajectory_ref"):
                check(ref, REF_FIELDS)
    for number, call in enumerate(_items(step, "tool_calls", "tool_calls")):
        with located(f"tool_calls[{number}]"):
            check(call, CALL_FIELDS)
            require(call, "tool_call_id", str, "the call's id")
            require(call, "function_name", str, "the tool's name")
            require(call, "arguments", (dict, str), "an object of arguments")
    return step


def _check_metrics(metrics: dict[str, Any]) -> None:
    check(metrics, METRICS_FIELDS)
    for name, kinds in (("prompt_token_ids", int), ("completion_token_ids", int)):
        _check_elements(metrics.get(name) or [], name, kinds, "integer token ids")
    _check_elements(metrics.get("logprobs") or [], "logprobs", NUMBER, "numbers")


def _check_elements(values: list[Any], name: str, kinds: Any, expected: str) -> None:
    for index, value in enumerate(values):
        if isinstance(value, bool) or not isinstance(value, kinds):
            raise TraceTableError(f"field '{name}[{index}]' is {show(value)}; expected {expected}")


def _items(record: dict[str, Any], name: str, label: str) -> list[dict[str, Any]]:
    """`record[name]` as a list of objects (none when absent); the error names the element."""
    values = record.get(name)
    if values is None:
        return []
    if not isinstance(values, list):
        raise TraceTableError(f"field {label!r} is {show(values)}; expected a list")
    for index, value in enumerate(values):
        if not isinstance(value, dict):
            raise TraceTableError(f"field '{label}[{index}]' is {show(value)}; expected an object")
    return values


class Turn:
    """The rows of one turn of a session, built step by step."""

    def __init__(
        self, session_id: str, turn_index: int, model: str | None, refs: list[Any]
    ) -> None:
        trace = trace_id_for(session_id, turn_index)
        self.base: Row = {
            SESSION_ID: session_id,
            TURN_INDEX: turn_index,
            TRACE_ID: trace,
            SOURCE: SOURCE_ATIF,
        }
        self.agent: Row = {
            **self.base,
            SPAN_KIND: "AGENT",
            NAME: AGENT_SPAN_NAME,
            STATUS_CODE: "UNSET",
            SPAN_ID: span_id_for(trace, 0),
        }
        self.model = model
        self.refs: list[tuple[Row, dict[str, Any]]] = refs
        """Each subagent reference, with the row whose result holds it (the file links them)."""
        self.children: list[Row] = []
        self.attributes: dict[str, Any] = {}
        """The AGENT row's attributes."""
        self.events: list[dict[str, Any]] = []
        self.restored: Row = {}
        self.times: list[datetime] = []
        self.count = 0
        """Agent steps so far: the iteration of the next one, unless `extra.plangate` says."""
        self.iteration: int | None = None
        self.user_position: int | None = None

    def add(self, position: int, step: dict[str, Any], time: datetime | None, before: Any) -> None:
        """A step (checked by `read_step`) at `position`, with its time and the step before's."""
        if time is not None:
            self.times.append(time)
        calls = step.get("tool_calls") or []
        if step["source"] == "user":
            self.user_position = position
            self.agent[INPUT_VALUE] = text(step.get("message"))
            self.restored, leftover = _split(step, _STEP_READ)
            self.attributes[STEP_KEY] = leftover
        elif step["source"] == "system" or (step.get("llm_call_count") == 0 and not calls):
            event = {"name": STEP_KEY, "attributes": {"position": position, "step": step}}
            self.events.append({**event, "timestamp": time.isoformat()} if time else event)
        else:
            self.count += 1
            self._agent_step(step, time, before)

    def _agent_step(self, step: dict[str, Any], time: datetime | None, before: Any) -> None:
        calls = step.get("tool_calls") or []
        dispatch = step.get("llm_call_count") == 0
        restored, leftover = _split(step, _DISPATCH_READ if dispatch else _LLM_READ)
        self.iteration = restored.get(ITERATION, self.count)
        results, unmatched = _match(calls, (step.get("observation") or {}).get("results") or [])
        if unmatched:
            leftover["observation"] = {"results": unmatched}
        anchor = None if dispatch else self._llm(step, time, before, restored, leftover)
        for number, (call, result) in enumerate(zip(calls, results, strict=True)):
            with located(f"tool_calls[{number}]"):
                row = self._tool(call, result, time, leftover if anchor is None else None)
            anchor = anchor or row
        owner = anchor or self.agent  # never None: a step without either is an event
        for result in unmatched:
            self.refs.extend((owner, ref) for ref in result.get("subagent_trajectory_ref") or [])
        self.agent[OUTPUT_VALUE] = text(step.get("message")) or self.agent.get(OUTPUT_VALUE)

    def _llm(
        self, step: dict[str, Any], time: Any, before: Any, restored: Row, leftover: Any
    ) -> Row:
        metrics = step.get("metrics") or {}
        row: Row = {
            SPAN_KIND: "LLM",
            NAME: LLM_SPAN_NAME,
            STATUS_CODE: "UNSET",
            START_TIME: before if time is not None else None,
            END_TIME: time,
            ITERATION: self.iteration,
            MODEL_NAME: step.get("model_name") or self.model,
            OUTPUT_VALUE: text(step.get("message")),
            TOKENS_PROMPT: metrics.get("prompt_tokens"),
            TOKENS_COMPLETION: metrics.get("completion_tokens"),
        }
        attributes = {
            CACHED_TOKENS: metrics.get("cached_tokens"),
            COST_TOTAL: metrics.get("cost_usd"),
            METRICS_KEY: remainder(metrics, set(MEASURED)),
            STEP_KEY: leftover,
        }
        return self._child(row, attributes, restored)

    def _tool(
        self, call: dict[str, Any], result: dict[str, Any] | None, time: Any, leftover: Any
    ) -> Row:
        name = call["function_name"]
        restored, rest_of_call = _split(call, {"tool_call_id", "function_name", "arguments"})
        row: Row = {
            SPAN_KIND: "TOOL",
            NAME: f"{TOOL_SPAN_PREFIX}{name}",
            STATUS_CODE: "UNSET",
            START_TIME: time,
            ITERATION: self.iteration,
            TOOL_NAME: name,
            TOOL_CALL_ID: call["tool_call_id"],
            TOOL_ARGS: canonical_arguments(call["arguments"]),
        }
        row[INPUT_VALUE] = restored.get(TOOL_ARGS, row[TOOL_ARGS])  # as plangate's TOOL spans
        attributes: dict[str, Any] = {TOOL_CALL_KEY: rest_of_call, STEP_KEY: leftover}
        if result is not None:
            row[TOOL_OUTPUT] = row[OUTPUT_VALUE] = text_of(result.get("content"))
            attributes[RESULT_KEY] = remainder(result, {"source_call_id", "content"})
        child = self._child(row, attributes, restored)
        refs = (result or {}).get("subagent_trajectory_ref") or []
        self.refs.extend((child, ref) for ref in refs)
        return child

    def _child(self, row: Row, attributes: dict[str, Any], restored: Row) -> Row:
        child = _filled({**self.base, **row}, attributes, restored)
        self.children.append(child)
        return child

    def finish(self) -> list[Row]:
        """The AGENT row, then the LLM and TOOL rows, with their ids; the turn's time span."""
        agent = self.agent
        agent[START_TIME] = min(self.times, default=None)
        agent[END_TIME] = max(self.times, default=None)
        if self.user_position != 0:
            self.attributes[USER_POSITION_KEY] = self.user_position
        _filled(agent, self.attributes, self.restored, self.events)
        for position, child in enumerate(self.children, start=1):
            child[SPAN_ID] = span_id_for(agent[TRACE_ID], position)
            child[PARENT_SPAN_ID] = agent[SPAN_ID]
            if VARIANT not in child:  # the turn's, unless `extra.plangate` gave its own
                child[VARIANT] = agent.get(VARIANT)
        return [agent, *self.children]


def _match(
    calls: list[dict[str, Any]], results: list[dict[str, Any]]
) -> tuple[list[dict[str, Any] | None], list[dict[str, Any]]]:
    """Each call's result (the first unclaimed one naming it), and the results none claimed."""
    free = list(range(len(results)))
    chosen: list[dict[str, Any] | None] = []
    for call in calls:
        named = (i for i in free if results[i].get("source_call_id") == call["tool_call_id"])
        found = next(named, None)
        if found is not None:
            free.remove(found)
        chosen.append(None if found is None else results[found])
    return chosen, [results[i] for i in free]


# -- plangate's columns back from `extra.plangate` ----------------------------------------------


def _split(record: dict[str, Any], read: Set[str]) -> tuple[Row, dict[str, Any]]:
    """The columns `extra.plangate` restores, and the rest of `record` (without what is read)."""
    leftover = remainder(record, read)
    extra = leftover.get("extra")
    if not isinstance(extra, dict) or not isinstance(extra.get(PLANGATE), dict):
        return {}, leftover
    kept = {k: v for k, v in extra[PLANGATE].items() if k not in _RESTORED}
    extra = {k: v for k, v in extra.items() if k != PLANGATE} | ({PLANGATE: kept} if kept else {})
    leftover = remainder(leftover, {"extra"}) | ({"extra": extra} if extra else {})
    with located(f"extra.{PLANGATE}"):
        restored = {
            column: _RESTORED[column](value, column)
            for column, value in record["extra"][PLANGATE].items()
            if column in _RESTORED
        }
    return restored, leftover


def _filled(
    row: Row, attributes: dict[str, Any], restored: Row, events: Sequence[dict[str, Any]] = ()
) -> Row:
    """`row` with the restored columns, its attributes (restored ones first) and events."""
    restored = dict(restored)
    merged = {**(restored.pop(ATTRIBUTES, None) or {}), **attributes}
    merged = {key: value for key, value in merged.items() if value not in (None, {})}
    kept = restored.pop(EVENTS, None) or []  # a list, or text that is not one (kept as is)
    every = [*kept, *events] if isinstance(kept, list) else kept
    row.update(restored)
    row[ATTRIBUTES] = canonical_json(merged) if merged else None
    row[EVENTS] = canonical_json(every) if isinstance(every, list) and every else every or None
    return row


def _text_value(value: Any, field_name: str) -> str | None:
    if value is not None and not isinstance(value, str):
        raise TraceTableError(f"field {field_name!r} is {show(value)}; expected text or null")
    return value


def _time_value(value: Any, field_name: str) -> datetime | None:
    return timestamp(_text_value(value, field_name), field_name)


def _status_value(value: Any, field_name: str) -> str:
    if value not in STATUS_CODES:
        choices = ", ".join(sorted(STATUS_CODES))
        raise TraceTableError(f"field {field_name!r} is {show(value)}; expected one of {choices}")
    return str(value)


def _typed(
    kinds: Any, expected: str, low: float = -math.inf, high: float = math.inf
) -> Callable[[Any, str], Any]:
    def checked(value: Any, field_name: str) -> Any:
        bad = isinstance(value, bool) or not isinstance(value, kinds)
        if not bad and isinstance(value, int | float):
            bad = not low <= value <= high
        if value is not None and bad:
            raise TraceTableError(f"field {field_name!r} is {show(value)}; expected {expected}")
        return value

    return checked


_RESTORED: dict[str, Callable[[Any, str], Any]] = {
    START_TIME: _time_value,
    END_TIME: _time_value,
    STATUS_CODE: _status_value,
    **dict.fromkeys(
        (
            STATUS_MESSAGE,
            INPUT_VALUE,
            OUTPUT_VALUE,
            MODEL_NAME,
            STOP_REASON,
            TASK_ID,
            VARIANT,
            PLAN,
            TOOL_CALL_ID,
            TOOL_ARGS,
        ),
        _text_value,
    ),
    REWARD: _typed(NUMBER, "a number or null", -1e308, 1e308),
    ITERATION: _typed(int, "an integer or null", -(2**31), 2**31 - 1),
    TRIAL: _typed(int, "an integer or null", -(2**31), 2**31 - 1),
    EVENTS: _typed((list, str), "a list of events, text or null"),
    ATTRIBUTES: _typed(dict, "an object or null"),
}
"""The columns `extra.plangate` may hold, each with its check."""


# -- small readers --------------------------------------------------------------------------


def check(record: dict[str, Any], fields: dict[str, Any]) -> None:
    """The type of each known field present and not null; the error names the field."""
    for name, kinds in fields.items():
        value = record.get(name)
        if value is None:
            continue
        allowed = kinds if isinstance(kinds, tuple) else (kinds,)
        if isinstance(value, bool) and bool not in allowed or not isinstance(value, allowed):
            words = " or ".join(_WORDS[kind] for kind in allowed)
            raise TraceTableError(f"field {name!r} is {show(value)}; expected {words}")
        if isinstance(value, float) and not math.isfinite(value):
            raise TraceTableError(f"field {name!r} is {value!r}; expected a finite number")
        if isinstance(value, int) and not -(2**63) <= value < 2**63:
            raise TraceTableError(f"field {name!r} is {value}; expected a 64-bit integer")


def remainder(record: dict[str, Any], read: Set[str]) -> dict[str, Any]:
    """`record` without the fields in `read`."""
    return {key: value for key, value in record.items() if key not in read}


def text(message: Any) -> str | None:
    """A message as text; an empty message is no text."""
    return text_of(message) or None


def show(value: Any) -> str:
    """A value for an error message: its repr, shortened; a container by its type."""
    if isinstance(value, dict | list):
        return "an object" if isinstance(value, dict) else "a list"
    shown = repr(value)
    return shown if len(shown) <= 60 else f"{shown[:57]}..."
