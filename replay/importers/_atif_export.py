"""A trace table as ATIF trajectories (`ATIF_VERSION`), one per session: `atif` the other way.

Each turn is a `user` step (the AGENT row's `input_value`), then an `agent` step per model call:
the LLM row's text, model, tokens, cached tokens and cost, the TOOL rows of its iteration as
`tool_calls` (arguments as an object) and their outputs as its `observation`; TOOL rows without
an LLM row make a step with `llm_call_count` 0. A session whose AGENT row is under a span of
another session (plangate's subagents, a linked import) is embedded in its root's
`subagent_trajectories`, and that call's result references it by `trajectory_id`. What ATIF has
no field for goes in the step's or call's `extra.plangate` (span times, status, stop reason,
reward, task, trial, variant, plan, events, attributes, a missing call id, for which
`plangate-<turn>-<step>-<n>` is written, arguments that are not an object), which the importer
reads back, as it reads the `atif.*` attributes an import kept.
Not written: spans of other kinds (CHAIN, …) and each model call's prompt (an LLM row's
`input_value`): ATIF records the conversation as steps, not prompts.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any, NamedTuple

import pyarrow as pa

from plangate.harness import canonical_json
from plangate.harness.semconv import AGENT_NAME, TOOL_SPAN_PREFIX
from plangate.replay._attribute_fields import CACHED_TOKENS, COST_TOTAL
from plangate.replay.importers._atif_steps import (
    AGENT_FIELDS,
    AGENT_KEY,
    CALL_FIELDS,
    FINAL_FIELDS,
    MEASURED,
    METRICS_FIELDS,
    METRICS_KEY,
    PLANGATE,
    REF_FIELDS,
    RESULT_FIELDS,
    RESULT_KEY,
    ROOT_FIELDS,
    STEP_FIELDS,
    STEP_KEY,
    TOOL_CALL_KEY,
    TRAJECTORY_KEY,
    USER_POSITION_KEY,
    remainder,
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
    validate_table,
)

ATIF_VERSION = "ATIF-v1.8"
"""The ATIF version written: the latest of Harbor's RFC 0001 and its reference models."""
UNKNOWN_VERSION = "unknown"
"""`agent.version` when the table does not say which version of the agent ran."""

Row = dict[str, Any]
Sessions = dict[str, list[Row]]
Parents = dict[str, tuple[str, Row]]
"""A subagent session → its parent session and the row its AGENT row is under."""
Links = dict[tuple[str, str], list[dict[str, Any]]]
"""(trace id, span id) of a call → the references to the subagent trajectories under it."""
_SPAN = (START_TIME, END_TIME, STATUS_CODE, STATUS_MESSAGE)
_AGENT_COLUMNS = (*_SPAN, STOP_REASON, REWARD, TASK_ID, TRIAL, VARIANT, PLAN)
_CHILD_COLUMNS = (*_SPAN, PLAN, EVENTS)
_MAPPED = frozenset({AGENT_NAME, CACHED_TOKENS, COST_TOTAL})
"""Attributes that ATIF fields hold (the rest of a row's attributes go to `extra.plangate`)."""


def trajectories_from_table(
    table: pa.Table, sessions: Sequence[str] | None = None
) -> list[dict[str, Any]]:
    """The table's sessions as ATIF trajectories, subagent sessions embedded in their root's.

    Args:
        table: A trace table (a golden dataset's `spans`, an imported or recorded table).
        sessions: Only these sessions (with their subagents); by default every root session.

    Returns:
        One ATIF trajectory (a JSON-ready dict) per root session, in the table's order.

    Raises:
        TraceTableError: The table is not a trace table, or a session is not in it.
    """
    validate_table(table)
    rows: Sessions = {}
    for row in table.to_pylist():
        rows.setdefault(row[SESSION_ID], []).append(row)
    parents = _parents(rows)
    children: dict[str, list[str]] = {}
    links: Links = {}
    for child, (parent, owner) in parents.items():
        children.setdefault(parent, []).append(child)
        ref = {"trajectory_id": _trajectory_id(child, rows[child])}
        links.setdefault((owner[TRACE_ID], owner[SPAN_ID]), []).append(ref)
    return [_root(root, rows, children, links) for root in _roots(rows, parents, sessions)]


# -- sessions and subagents ---------------------------------------------------------------------


def _parents(rows: Sessions) -> Parents:
    """Each subagent session: the session and the row (in another session) its AGENT is under."""
    spans = {(row[TRACE_ID], row[SPAN_ID]): row for session in rows.values() for row in session}
    parents: Parents = {}
    for session, session_rows in rows.items():
        agents = [row for row in session_rows if row[SPAN_KIND] == "AGENT"]
        owner = spans.get((agents[0][TRACE_ID], agents[0][PARENT_SPAN_ID])) if agents else None
        if owner is not None and session not in _lineage(owner[SESSION_ID], parents):
            parents[session] = (owner[SESSION_ID], owner)  # never one that closes a circle
    return parents


def _lineage(session: str, parents: Parents) -> list[str]:
    """`session`, its parent, its parent's parent, … up to its root."""
    chain = [session]
    while chain[-1] in parents:
        chain.append(parents[chain[-1]][0])
    return chain


def _roots(rows: Sessions, parents: Parents, chosen: Sequence[str] | None) -> list[str]:
    if chosen is None:
        return [session for session in rows if session not in parents]
    for session in chosen:
        if session not in rows:
            some = ", ".join(list(rows)[:8])
            raise TraceTableError(f"no session {session!r} in the table; some: {some}")
    wanted = set(chosen)
    return [s for s in rows if s in wanted and not wanted & set(_lineage(s, parents)[1:])]


def _root(session: str, rows: Sessions, children: dict[str, list[str]], links: Links) -> Any:
    """The trajectory of a root session, its subagents' (and theirs) embedded in it."""
    order = [session]
    for current in order:  # grows as it is walked: each subagent after its parent
        order.extend(child for child in children.get(current, []) if child not in order)
    trajectory = _trajectory(session, rows[session], links, embedded=False)
    embedded = [_trajectory(child, rows[child], links, embedded=True) for child in order[1:]]
    if embedded:
        trajectory["subagent_trajectories"] = embedded
    return trajectory


def _trajectory_id(session: str, rows: list[Row]) -> str:
    return str(_stored(rows, TRAJECTORY_KEY).get("trajectory_id") or session)


def _stored(rows: list[Row], key: str) -> dict[str, Any]:
    """What the importer kept under `key` on a session's first AGENT row."""
    value = _attributes(_first_agent(rows)).get(key)
    return value if isinstance(value, dict) else {}


def _trajectory(session: str, rows: list[Row], links: Links, *, embedded: bool) -> dict[str, Any]:
    stored = _fit(_stored(rows, TRAJECTORY_KEY), ROOT_FIELDS)
    turns: dict[int, list[Row]] = {}
    for row in rows:
        turns.setdefault(row[TURN_INDEX], []).append(row)
    steps = [step for index in sorted(turns) for step in _turn_steps(turns[index], links)]
    steps = [{"step_id": number, **step} for number, step in enumerate(steps, start=1)]
    trajectory: dict[str, Any] = {"schema_version": ATIF_VERSION}
    trajectory.update(remainder(stored, {"schema_version", "subagent_trajectories"}))
    imported = TRAJECTORY_KEY in _attributes(_first_agent(rows))
    session_id = stored.get("session_id") if imported else session
    if session_id is not None or not embedded:  # an embedded one may inherit its root's
        trajectory["session_id"] = session_id or session
    if embedded:
        trajectory["trajectory_id"] = _trajectory_id(session, rows)
    trajectory["agent"] = _agent(rows)
    trajectory["steps"] = steps
    final = _fit(stored.get("final_metrics") or {}, FINAL_FIELDS)
    trajectory["final_metrics"] = final or _final_metrics(steps)
    return trajectory


def _first_agent(rows: list[Row]) -> Row | None:
    return next((row for row in rows if row[SPAN_KIND] == "AGENT"), None)


def _agent(rows: list[Row]) -> dict[str, Any]:
    stored = _stored(rows, AGENT_KEY)
    if stored:
        agent = _fit(stored, AGENT_FIELDS)
        return {**agent, "version": agent.get("version") or UNKNOWN_VERSION}
    name = _attributes(_first_agent(rows)).get(AGENT_NAME) or rows[0][SOURCE]
    agent = {"name": str(name), "version": UNKNOWN_VERSION}
    models = {row[MODEL_NAME] for row in rows if row[SPAN_KIND] == "LLM"}
    if len(models) == 1 and None not in models:
        agent["model_name"] = models.pop()
    return agent


def _final_metrics(steps: list[dict[str, Any]]) -> dict[str, Any]:
    totals: dict[str, Any] = {}
    for name in MEASURED:
        values = [step["metrics"][name] for step in steps if name in step.get("metrics", {})]
        if values:
            totals[f"total_{name}"] = sum(values)
    return {**totals, "total_steps": len(steps)}


def _turn_steps(rows: list[Row], links: Links) -> list[dict[str, Any]]:
    """A turn's steps: its user step, one per model call, and the steps kept as events."""
    spans = {row[SPAN_ID] for row in rows}
    agents = [row for row in rows if row[SPAN_KIND] == "AGENT"]
    agent = next((row for row in agents if row[PARENT_SPAN_ID] not in spans), None)
    variant = agent[VARIANT] if agent else None
    groups = _groups([row for row in rows if row[SPAN_KIND] in ("LLM", "TOOL")])
    steps = [
        _agent_step(llm, tools, _Place(links, variant, number))
        for number, (llm, tools) in enumerate(groups, start=1)
    ]
    attributes = _attributes(agent)
    events = _event_list(agent[EVENTS]) if agent is not None else []
    placed = [
        (event["attributes"]["position"], _fit(event["attributes"]["step"], STEP_FIELDS))
        for event in (events if isinstance(events, list) else [])
        if _holds_step(event)
    ]
    position = attributes.get(USER_POSITION_KEY, 0)  # null: the turn had no user step
    if position is not None:
        user = _user_step(agent, attributes, _last_message(steps))
        placed.append((position if isinstance(position, int) else 0, user))
    for position, step in sorted(placed, key=lambda item: item[0]):
        steps.insert(min(position, len(steps)), remainder(step, {"step_id"}))
    return steps


class _Place(NamedTuple):
    """Where an agent step sits: the subagent links, its turn's variant, its number in the turn."""

    links: Links
    variant: str | None
    number: int


def _groups(rows: list[Row]) -> list[tuple[Row | None, list[Row]]]:
    """(LLM row, TOOL rows) per model call, in order; TOOL rows without an LLM row alone."""
    groups: dict[Any, tuple[Row | None, list[Row]]] = {}
    for position, row in enumerate(rows):
        key = row[ITERATION] if row[ITERATION] is not None else ("row", position)
        llm, tools = groups.setdefault(key, (None, []))
        if row[SPAN_KIND] == "TOOL":
            tools.append(row)
        elif llm is None:
            groups[key] = (row, tools)
        else:  # a second model call under one iteration: a step of its own
            groups[("row", position)] = (row, [])
    return list(groups.values())


def _last_message(steps: list[dict[str, Any]]) -> Any:
    """What the importer takes as the turn's answer: the last agent step's non-empty text."""
    texts = (step.get("message") for step in reversed(steps))
    return next((text for text in texts if text), None)


def _user_step(agent: Row | None, attributes: dict[str, Any], answer: Any) -> dict[str, Any]:
    if agent is None:
        return {"source": "user", "message": ""}
    step = {**_fit(attributes.get(STEP_KEY), STEP_FIELDS), "source": "user"}
    step["message"] = agent[INPUT_VALUE] or ""
    if agent[START_TIME] is not None:
        step["timestamp"] = _iso(agent[START_TIME])
    values = _columns(agent, _AGENT_COLUMNS, attributes)
    values.update(
        _differing(agent, {INPUT_VALUE: agent[INPUT_VALUE] or None, OUTPUT_VALUE: answer})
    )
    events = _event_list(agent[EVENTS])
    if isinstance(events, list):
        events = [event for event in events if not _holds_step(event)]
    if events:
        values[EVENTS] = events
    return _with_plangate(step, values)


def _agent_step(llm: Row | None, tools: list[Row], place: _Place) -> dict[str, Any]:
    anchor = llm if llm is not None else tools[0]
    attributes = _attributes(anchor)
    stored = _fit(attributes.get(STEP_KEY), STEP_FIELDS)
    step: dict[str, Any] = {"source": "agent", "message": "", **remainder(stored, {"observation"})}
    time = (anchor[END_TIME] or anchor[START_TIME]) if llm is not None else anchor[START_TIME]
    if time is not None:
        step["timestamp"] = _iso(time)
    values = _differing(anchor, {ITERATION: place.number})
    if llm is None:
        step = {**remainder(step, {"metrics", "reasoning_content"}), "llm_call_count": 0}
    else:
        step.update(_llm_fields(llm, attributes))
        values.update(_child_columns(llm, attributes, place.variant))
        values.update(_differing(llm, {OUTPUT_VALUE: llm[OUTPUT_VALUE] or None}))
    step = _with_plangate(step, values)
    pairs = [_call(tool, place, n) for n, tool in enumerate(tools)]
    ids = {call["tool_call_id"] for call, _ in pairs}
    results = [result for _, result in pairs]
    for result in _fit(stored.get("observation"), {"results": list}).get("results", []):
        results.append(_unmatched(result, ids))
    if pairs:
        step["tool_calls"] = [call for call, _ in pairs]
    if results:
        step["observation"] = {"results": results}
    return step


def _llm_fields(llm: Row, attributes: dict[str, Any]) -> dict[str, Any]:
    fields: dict[str, Any] = {"message": llm[OUTPUT_VALUE] or ""}
    if llm[MODEL_NAME] is not None:
        fields["model_name"] = llm[MODEL_NAME]
    metrics = {
        "prompt_tokens": llm[TOKENS_PROMPT],
        "completion_tokens": llm[TOKENS_COMPLETION],
        "cached_tokens": _number(attributes.get(CACHED_TOKENS), int),
        "cost_usd": _number(attributes.get(COST_TOTAL), (int, float)),
        **_fit(attributes.get(METRICS_KEY), METRICS_FIELDS),
    }
    metrics = {name: value for name, value in metrics.items() if value is not None}
    if metrics:
        fields["metrics"] = metrics
    return fields


def _call(tool: Row, place: _Place, n: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """A TOOL row as an ATIF tool call, and its observation result."""
    attributes = _attributes(tool)
    arguments, exact = _arguments(tool[TOOL_ARGS])
    call_id = tool[TOOL_CALL_ID] or f"plangate-{tool[TURN_INDEX]}-{place.number}-{n}"
    name = tool[TOOL_NAME] or str(tool[NAME]).removeprefix(TOOL_SPAN_PREFIX)
    call = {**_fit(attributes.get(TOOL_CALL_KEY), CALL_FIELDS), "tool_call_id": call_id}
    call.update(function_name=name, arguments=arguments)
    values = _child_columns(tool, attributes, place.variant)
    as_imported = {INPUT_VALUE: tool[TOOL_ARGS], OUTPUT_VALUE: tool[TOOL_OUTPUT]}
    values.update(_differing(tool, as_imported))
    if tool[TOOL_CALL_ID] is None:
        values[TOOL_CALL_ID] = None
    if not exact:
        values[TOOL_ARGS] = tool[TOOL_ARGS]
    call = _with_plangate(call, values)
    added = place.links.get((tool[TRACE_ID], tool[SPAN_ID]), [])
    # a result for every call, if empty: calls may share an id, and results go to them in order
    result = {"source_call_id": call_id, **_fit(attributes.get(RESULT_KEY), RESULT_FIELDS)}
    if tool[TOOL_OUTPUT] is not None:
        result["content"] = tool[TOOL_OUTPUT]
    return call, _with_refs(result, added)


def _with_refs(result: dict[str, Any], added: list[dict[str, Any]]) -> dict[str, Any]:
    """`result` with resolvable references: the stored ones, then the linked subagents'."""
    kept = result.get("subagent_trajectory_ref")
    refs = [_fit(ref, REF_FIELDS) for ref in (kept if isinstance(kept, list) else [])]
    unresolved = [
        ref for ref in refs if not (ref.get("trajectory_id") or ref.get("trajectory_path"))
    ]
    refs = [ref for ref in refs if ref not in unresolved]
    known = {ref.get("trajectory_id") for ref in refs}
    refs.extend(ref for ref in added if ref["trajectory_id"] not in known)
    result = remainder(result, {"subagent_trajectory_ref"})
    if refs:
        result["subagent_trajectory_ref"] = refs
    if unresolved:  # ATIF 1.7 on refuses a reference it cannot resolve: kept, but aside
        result["extra"] = {**(result.get("extra") or {}), "subagent_trajectory_ref": unresolved}
    return result


def _unmatched(result: dict[str, Any], ids: set[str]) -> dict[str, Any]:
    """A result no call claimed; a `source_call_id` naming no call of its step is set aside."""
    result = _with_refs(_fit(result, RESULT_FIELDS), [])
    if result.get("source_call_id") in ids or result.get("source_call_id") is None:
        return result
    extra = {**(result.get("extra") or {}), "source_call_id": result["source_call_id"]}
    return {**remainder(result, {"source_call_id", "extra"}), "extra": extra}


def _arguments(text: str | None) -> tuple[dict[str, Any], bool]:
    """The arguments as an object, and whether the importer gets `text` back from it exactly."""
    if text is None:
        return {}, False
    try:
        value = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        return {"input": text}, False
    if isinstance(value, dict):
        return value, canonical_json(value) == text
    return {"input": value}, False


def _columns(row: Row, columns: Sequence[str], attributes: dict[str, Any]) -> dict[str, Any]:
    """The columns ATIF has no field for, JSON-ready: times as ISO text, attributes parsed.

    Times are always given (null too): the importer would otherwise take the steps' times.
    """
    values = {column: row[column] for column in columns if row[column] is not None}
    if values.get(STATUS_CODE) == "UNSET":
        del values[STATUS_CODE]
    for column in (START_TIME, END_TIME):
        values[column] = None if row[column] is None else _iso(row[column])
    if EVENTS in values:
        values[EVENTS] = _event_list(values[EVENTS])
    own = {k: v for k, v in attributes.items() if not k.startswith("atif.") and k not in _MAPPED}
    if own:
        values[ATTRIBUTES] = own
    return values


def _child_columns(row: Row, attributes: dict[str, Any], variant: str | None) -> dict[str, Any]:
    """An LLM or TOOL row's columns; its variant when it is not its turn's."""
    return _columns(row, _CHILD_COLUMNS, attributes) | _differing(row, {VARIANT: variant})


def _differing(row: Row, imported: dict[str, Any]) -> dict[str, Any]:
    """The row's values that differ from what the importer would take from ATIF's fields."""
    return {column: row[column] for column, value in imported.items() if row[column] != value}


def _with_plangate(record: dict[str, Any], values: dict[str, Any]) -> dict[str, Any]:
    if not values:
        return record
    extra = record["extra"] if isinstance(record.get("extra"), dict) else {}
    return {**record, "extra": {**extra, PLANGATE: values}}


def _event_list(text: str | None) -> list[Any] | str:
    """A row's events: the JSON list, or the text as it is when it holds no list."""
    try:
        value = json.loads(text) if text is not None else []
    except (json.JSONDecodeError, RecursionError):
        return str(text)
    return value if isinstance(value, list) else str(text)


def _holds_step(event: Any) -> bool:
    kept = event.get("attributes") if isinstance(event, dict) else None
    step, position = (kept.get("step"), kept.get("position")) if isinstance(kept, dict) else (0, 0)
    return isinstance(step, dict) and isinstance(position, int) and event.get("name") == STEP_KEY


def _attributes(row: Row | None) -> dict[str, Any]:
    if row is None or row[ATTRIBUTES] is None:
        return {}
    try:
        value = json.loads(row[ATTRIBUTES])
    except (json.JSONDecodeError, RecursionError):
        return {}
    return value if isinstance(value, dict) else {}


def _fit(record: Any, fields: dict[str, Any]) -> dict[str, Any]:
    """`record` with the fields ATIF does not define moved into its `extra` (ATIF allows none)."""
    if not isinstance(record, dict):
        return {}
    unknown = {key: value for key, value in record.items() if key not in fields}
    if not unknown:
        return dict(record)
    extra = record["extra"] if isinstance(record.get("extra"), dict) else {}
    return {**remainder(record, set(unknown) | {"extra"}), "extra": {**extra, **unknown}}


def _number(value: Any, kinds: Any) -> Any:
    return value if isinstance(value, kinds) and not isinstance(value, bool) else None


def _iso(time: datetime) -> str:
    return time.isoformat().replace("+00:00", "Z")
