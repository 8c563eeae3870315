"""A golden dataset from any trace table: ours, pulled from Phoenix, or imported.

Each turn (an AGENT span and the rows under it) becomes a turn row: the request is the AGENT
span's input, the messages are rebuilt from the LLM spans' output (assistant messages with their
tool calls) and the TOOL spans (tool messages), the steps are computed as `_record.steps` computes
them from a live turn (calls, plan changes, the stop). The model cassette is rebuilt from the LLM
spans that carry their content: the request messages, the offered tools and the answer, in
plangate's, OpenInference's or the GenAI conventions' names (`_llm_rows`). An LLM span
without its request content gets an empty request and the fingerprint `""`; one that does not
name its offered tools keeps the turn's last named ones, or none. Such turns replay only with
`cassette-lenient` (a strict cassette refuses a request that differs). The tool
cassette comes from the TOOL spans. The plan and features before a turn are not in a trace
table, so they stay empty: a later turn replays without its earlier plan.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from plangate.harness import semconv
from plangate.replay._cassette import fingerprint_of
from plangate.replay._dataset import (
    MODEL_CASSETTE,
    SESSIONS,
    TOOL_CASSETTE,
    TURNS,
    DatasetError,
    GoldenDataset,
    table_of,
)
from plangate.replay._llm_rows import (
    answer_of,
    offered_tools,
    request_messages,
    row_attributes,
)
from plangate.replay.schema import (
    EVENTS,
    INPUT_VALUE,
    ITERATION,
    MODEL_NAME,
    NAME,
    OUTPUT_VALUE,
    PLAN,
    SESSION_ID,
    SOURCE,
    SPAN_ID,
    SPAN_KIND,
    START_TIME,
    STATUS_CODE,
    STOP_REASON,
    TOKENS_COMPLETION,
    TOKENS_PROMPT,
    TOOL_ARGS,
    TOOL_CALL_ID,
    TOOL_NAME,
    TOOL_OUTPUT,
    TURN_INDEX,
    VARIANT,
    canonical_arguments,
)

Row = dict[str, Any]
_PLAN_NOTE = re.compile(r"\n\[Plan: [^\n]*\]$")
"""The plan reminder our loop appends to a tool's output; the tool cassette keeps the raw result."""


def dataset_from_traces(
    table: pa.Table,
    *,
    name: str,
    sessions: Sequence[str] | None = None,
    description: str = "",
) -> GoldenDataset:
    """A golden dataset of the chosen sessions (all by default) of a trace table.

    Args:
        table: A trace table (`replay.SCHEMA`).
        name: The dataset's name.
        sessions: Only these sessions; each must be in the table.
        description: What the dataset is for.

    Returns:
        The dataset, not yet written (`write_dataset`).

    Raises:
        DatasetError: A chosen session is not in the table, or the table has no turn.
    """
    present = list(dict.fromkeys(table[SESSION_ID].to_pylist()))
    chosen = list(sessions) if sessions else present
    missing = [s for s in chosen if s not in present]
    if missing:
        raise DatasetError(
            f"session {missing[0]!r} is not in the trace table; some: {', '.join(present[:8])}"
        )
    spans = table.filter(pc.is_in(table[SESSION_ID], value_set=pa.array(chosen, pa.string())))
    turns: dict[tuple[str, int], list[Row]] = defaultdict(list)
    for row in spans.to_pylist():
        turns[(row[SESSION_ID], row[TURN_INDEX])].append(row)
    if not turns:
        raise DatasetError("the trace table has no turn to make a dataset of")
    errors = _call_errors(spans)
    built = [_turn(key, rows, errors) for key, rows in sorted(turns.items())]
    return GoldenDataset(
        name=name,
        description=description,
        sessions=table_of([_session(s, spans) for s in chosen], SESSIONS),
        turns=table_of([b.turn for b in built], TURNS),
        spans=spans,
        model_cassette=table_of([e for b in built for e in b.exchanges], MODEL_CASSETTE),
        tool_cassette=table_of([t for b in built for t in b.tools], TOOL_CASSETTE),
    )


class _Built:
    """One turn's rows of the turns table and the two cassettes."""

    def __init__(self, turn: Row, exchanges: list[Row], tools: list[Row]) -> None:
        self.turn, self.exchanges, self.tools = turn, exchanges, tools


def _session(session_id: str, spans: pa.Table) -> Row:
    rows = [r for r in spans.to_pylist() if r[SESSION_ID] == session_id]
    agent = next((r for r in rows if r[SPAN_KIND] == "AGENT"), rows[0])
    attributes = row_attributes(agent)
    metadata = attributes.get(semconv.METADATA)
    meta = metadata if isinstance(metadata, dict) else {}
    models = [r[MODEL_NAME] for r in rows if r[SPAN_KIND] == "LLM" and r[MODEL_NAME]]
    return {
        SESSION_ID: session_id,
        "user_id": str(attributes.get(semconv.USER_ID) or "user"),
        "variant": next((r[VARIANT] for r in rows if r[VARIANT]), "unknown"),
        "model": models[0] if models else "unknown",
        "domain": meta.get("domain"),
        "seed": None,
        "source": agent[SOURCE],
        "metadata": json.dumps(meta, sort_keys=True) if meta else None,
    }


def _call_errors(spans: pa.Table) -> dict[tuple[str, str], bool]:
    """Per (session, tool call id): whether the call's result was an error."""
    return {
        (r[SESSION_ID], r[TOOL_CALL_ID]): r[STATUS_CODE] == "ERROR"
        for r in spans.to_pylist()
        if r[SPAN_KIND] == "TOOL" and r[TOOL_CALL_ID]
    }


def _turn(key: tuple[str, int], rows: list[Row], errors: dict[tuple[str, str], bool]) -> _Built:
    session_id, turn_index = key
    agent = next((r for r in rows if r[SPAN_KIND] == "AGENT"), None)
    request = (agent or {}).get(INPUT_VALUE) or ""
    llms = sorted((r for r in rows if r[SPAN_KIND] == "LLM"), key=_order)
    tools = sorted((r for r in rows if r[SPAN_KIND] == "TOOL"), key=_order)
    exchanges, calls = _exchanges(session_id, turn_index, llms, tools)
    for exchange in exchanges:
        exchange["request"] = [_ours(m, session_id, errors) for m in exchange["request"]]
        if exchange["request"]:
            exchange["fingerprint"] = fingerprint_of(exchange["request"], exchange["tools"])
    messages = [{"role": "user", "content": request}, *_messages(exchanges, calls)]
    stop = (agent or {}).get(STOP_REASON)
    turn = {
        SESSION_ID: session_id,
        TURN_INDEX: turn_index,
        "request": request,
        "rubric": None,
        "plan_before": None,
        "features_before": None,
        "messages": json.dumps(messages, ensure_ascii=False),
        "steps": json.dumps(_steps(calls, _plans(agent, tools), stop), ensure_ascii=False),
        STOP_REASON: stop,
        "answer": (agent or {}).get(OUTPUT_VALUE),
    }
    return _Built(turn, [_exchange_row(e) for e in exchanges], _tool_rows(key, tools))


def _order(row: Row) -> tuple[int, float]:
    start = row[START_TIME]
    return (row[ITERATION] or 0, start.timestamp() if start is not None else 0.0)


def _exchanges(
    session_id: str, turn_index: int, llms: list[Row], tools: list[Row]
) -> tuple[list[Row], list[Row]]:
    """The turn's model exchanges and its calls (each with its TOOL row, when there is one)."""
    unused = list(tools)
    exchanges: list[Row] = []
    calls: list[Row] = []
    offered: list[str] = []
    for number, llm in enumerate(llms, start=1):
        iteration = llm[ITERATION] or number
        attributes = row_attributes(llm)
        content, asked = answer_of(llm, attributes)
        asked = asked or _calls_of(iteration, unused)
        message: Row = {"role": "assistant", "content": content}
        if asked:
            message["tool_calls"] = asked
        exchange = _exchange((session_id, turn_index, iteration), llm, attributes, message)
        exchange["tools"] = offered = exchange["tools"] or offered  # unchanged unless recorded
        exchanges.append(exchange)
        calls.extend(_attach(asked, iteration, unused))
    for row in list(unused):  # TOOL rows without an LLM span asking for them
        calls.extend(_attach(_calls_of(row[ITERATION] or 0, [row]), row[ITERATION] or 0, unused))
    return exchanges, calls


def _calls_of(iteration: int, tools: list[Row]) -> list[Row]:
    return [
        {
            "id": r[TOOL_CALL_ID] or f"call-{r[SPAN_ID]}",
            "name": r[TOOL_NAME] or r[NAME],
            "arguments": r[TOOL_ARGS] or "{}",
        }
        for r in tools
        if (r[ITERATION] or 0) == iteration
    ]


def _attach(asked: list[Row], iteration: int, unused: list[Row]) -> list[Row]:
    """Each asked call with its TOOL row (by call id, else by name), consuming the row."""
    out = []
    for call in asked:
        row = next((r for r in unused if r[TOOL_CALL_ID] == call["id"]), None)
        if row is None:
            row = next(
                (
                    r
                    for r in unused
                    if (r[TOOL_NAME] or r[NAME]) == call["name"]
                    and (r[ITERATION] or 0) == iteration
                ),
                None,
            )
        if row is not None:
            unused.remove(row)
        out.append({**call, "iteration": iteration, "row": row})
    return out


def _exchange(key: tuple[str, int, int], llm: Row, attributes: dict[str, Any], message: Row) -> Row:
    """One model exchange: the request and offered tools the row says, and `message`."""
    return {
        SESSION_ID: key[0],
        TURN_INDEX: key[1],
        "iteration": key[2],
        "fingerprint": "",
        "request": request_messages(llm, attributes),
        "tools": offered_tools(attributes),
        "response": {
            "message": message,
            "usage": [llm[TOKENS_PROMPT] or 0, llm[TOKENS_COMPLETION] or 0],
            "model_name": llm[MODEL_NAME] or "",
            "finish_reason": attributes.get(semconv.LLM_FINISH_REASON),
        },
    }


def _ours(message: Row, session_id: str, errors: dict[tuple[str, str], bool]) -> Row:
    """A request message in `message_to_dict` form (OpenAI tool calls flattened)."""
    if not isinstance(message, dict):
        return {"role": "user", "content": str(message)}
    out = dict(message)
    if out.get("tool_calls"):
        out["tool_calls"] = [_flat_call(c) for c in out["tool_calls"]]
    if out.get("role") == "tool" and "is_error" not in out:
        out["is_error"] = errors.get((session_id, str(out.get("tool_call_id"))), True)
    return out


def _flat_call(call: Any) -> Row:
    function = call.get("function") if isinstance(call, dict) else None
    if not isinstance(function, dict):
        return dict(call) if isinstance(call, dict) else {}
    return {
        "id": call.get("id"),
        "name": function.get("name"),
        "arguments": function.get("arguments"),
    }


def _messages(exchanges: list[Row], calls: list[Row]) -> list[Row]:
    out: list[Row] = []
    # Some agents reuse one call id for several calls (tau-bench does): match in order.
    pending: dict[str, list[Row]] = {}
    for call in calls:
        pending.setdefault(call["id"], []).append(call)
    for exchange in exchanges:
        message = exchange["response"]["message"]
        out.append(message)
        for requested in message.get("tool_calls", ()):
            queue = pending.get(requested["id"])
            if queue:
                out.append(_tool_message(queue.pop(0)))
    for call in (c for queue in pending.values() for c in queue):  # calls with no LLM span
        out.append({"role": "assistant", "content": "", "tool_calls": [_bare(call)]})
        out.append(_tool_message(call))
    return out


def _bare(call: Row) -> Row:
    return {"id": call["id"], "name": call["name"], "arguments": call["arguments"]}


def _tool_message(call: Row) -> Row:
    row = call["row"]
    return {
        "role": "tool",
        "content": (row[TOOL_OUTPUT] or "") if row else "",
        "tool_call_id": call["id"],
        "name": call["name"],
        "is_error": _status(row) == "error",
    }


def _status(row: Row | None) -> str:
    """A call's status as `steps` writes it; a call without a TOOL span was refused."""
    return "error" if row is None or row[STATUS_CODE] == "ERROR" else "ok"


def _plans(agent: Row | None, tools: list[Row]) -> list[tuple[int, str]]:
    """Plan snapshots by iteration: the AGENT span's `plan_updated` events, else the plan column."""
    events = _events(agent)
    found = [
        (int(e["attributes"].get(semconv.ITERATION, 0)), str(e["attributes"][semconv.DETAIL]))
        for e in events
        if e.get("name") == "plan_updated" and semconv.DETAIL in e.get("attributes", {})
    ]
    if found:
        return found
    out, last = [], None
    for row in tools:
        if row[PLAN] and row[PLAN] != last:
            out.append((row[ITERATION] or 0, row[PLAN]))
            last = row[PLAN]
    return out


def _events(agent: Row | None) -> list[dict[str, Any]]:
    if agent is None or not agent[EVENTS]:
        return []
    try:
        events = json.loads(agent[EVENTS])
    except (json.JSONDecodeError, RecursionError):
        return []
    return [e for e in events if isinstance(e, dict)] if isinstance(events, list) else []


def _steps(calls: list[Row], plans: list[tuple[int, str]], stop: str | None) -> list[str]:
    """Like `_record.steps`: per iteration, its calls then its plan changes; then the stop."""
    last = max([c["iteration"] for c in calls] + [i for i, _ in plans] + [0])
    out: list[str] = []
    for iteration in range(0, last + 1):
        out.extend(
            f"call {c['name']} {canonical_arguments(c['arguments'])} -> {_status(c['row'])}"
            for c in calls
            if c["iteration"] == iteration
        )
        out.extend(f"plan {detail}" for i, detail in plans if i == iteration)
    out.append(f"stop {stop or 'unknown'}")
    return out


def _exchange_row(exchange: Row) -> Row:
    return {
        **exchange,
        "request": json.dumps(exchange["request"], ensure_ascii=False),
        "tools": json.dumps(exchange["tools"]),
        "response": json.dumps(exchange["response"], ensure_ascii=False),
    }


def _tool_rows(key: tuple[str, int], tools: list[Row]) -> list[Row]:
    return [
        {
            SESSION_ID: key[0],
            TURN_INDEX: key[1],
            "position": position,
            TOOL_NAME: row[TOOL_NAME] or row[NAME],
            TOOL_ARGS: canonical_arguments(row[TOOL_ARGS] or "{}"),
            "status": "error" if row[STATUS_CODE] == "ERROR" else "ok",
            "result": _PLAN_NOTE.sub("", row[TOOL_OUTPUT] or ""),
            "error_type": _error_type(row),
        }
        for position, row in enumerate(tools)
    ]


def _error_type(row: Row) -> str:
    if row[STATUS_CODE] != "ERROR" or not row[EVENTS]:
        return ""
    try:
        events = json.loads(row["events"])
    except (json.JSONDecodeError, RecursionError):
        return ""
    for event in events if isinstance(events, list) else []:
        if isinstance(event, dict) and event.get("name") == "exception":
            return str(event.get("attributes", {}).get("exception.type", ""))
    return ""
