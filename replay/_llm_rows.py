"""What an LLM row of a trace table says of its model call: the request, the tools, the answer.

`dataset from-traces` rebuilds each model exchange of a cassette from an LLM row, and import
numbers another agent's tool calls by the model call that asked for them. The row may
come from plangate's own spans, from OpenInference's or from the OpenTelemetry GenAI
conventions, so each reader tries them in that order:

- the request (`request_messages`): `input.value` as `{"messages": [...]}` (plangate's spans, an
  OpenAI request body); else OpenInference's `llm.input_messages.N.message.…`; else the GenAI
  `gen_ai.input.messages` after the system instructions. Those are one system message per text
  part of `gen_ai.system_instructions`, or per part of pydantic-ai's
  `model_request_parameters.instruction_parts` where it has them: pydantic-ai joins its parts
  into one text in `gen_ai.system_instructions` but sends each as a system message of its own.
  A GenAI message is one chat message, except that each `tool_call_response` part is a tool
  message. Chat messages then go through plangate's own wire reader, so a request comes out as
  plangate's endpoint read it (tool messages named after their calls, never errors: the chat
  wire has no such flag);
- the offered tools (`offered_tools`): `llm.tools.N.tool.json_schema`, else
  `gen_ai.tool.definitions`;
- the answer (`answer_of`): `llm.output_messages.0.message.…`, else the first message of
  `gen_ai.output.messages` (text parts joined, tool calls with their arguments as JSON text).
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from typing import Any

from plangate.harness import canonical_json, message_to_dict
from plangate.harness import semconv as sc
from plangate.harness.models import WireError, messages_from_wire
from plangate.replay.schema import ATTRIBUTES, INPUT_VALUE, OUTPUT_VALUE

Row = dict[str, Any]

_OUTPUT = f"{sc.LLM_OUTPUT_MESSAGES}.0"
_CONTENT = f"{_OUTPUT}.{sc.MESSAGE_CONTENT}"
_CALL = re.compile(re.escape(f"{_OUTPUT}.{sc.MESSAGE_TOOL_CALLS}.") + r"(\d+)\.(.+)$")
"""A part of a tool call the answer asks for: `….message.tool_calls.N.tool_call.…`."""
_INPUT = re.compile(re.escape(f"{sc.LLM_INPUT_MESSAGES}.") + r"(\d+)\.message\.(.+)$")
"""A field of a request message: `llm.input_messages.N.message.…`."""
_INPUT_CALL = re.compile(r"^tool_calls\.(\d+)\.tool_call\.(.+)$")
_INPUT_TEXT = re.compile(r"^contents\.(\d+)\.message_content\.text$")
_TOOL_SCHEMA = re.compile(rf"^{re.escape(sc.LLM_TOOLS)}\.(\d+)\.{re.escape(sc.TOOL_JSON_SCHEMA)}$")


def row_attributes(row: Row) -> dict[str, Any]:
    """The row's `attributes` JSON as dotted keys (nested objects are also kept whole)."""
    value = _json(row[ATTRIBUTES] or "{}")
    return _flatten(value) if isinstance(value, dict) else {}


def _flatten(value: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, item in value.items():
        name = f"{prefix}{key}"
        out[name] = item
        if isinstance(item, dict) and name != "metadata":
            out.update(_flatten(item, f"{name}."))
        elif isinstance(item, list):
            out.update(_flatten({str(i): v for i, v in enumerate(item)}, f"{name}."))
    return out


def _json(value: Any) -> Any:
    """A JSON text parsed (None if it does not parse); anything else as it is."""
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except (json.JSONDecodeError, RecursionError):
        return None


# -- the request --------------------------------------------------------------------------------


def request_messages(llm: Row, attributes: dict[str, Any]) -> list[Row]:
    """The request's messages as plangate's dicts (chat messages read as the endpoint would)."""
    value = _json(llm[INPUT_VALUE] or "")
    if isinstance(value, dict) and isinstance(value.get("messages"), list):
        return list(value["messages"])
    wire = _openinference_request(attributes)
    if not wire and isinstance(value, list):
        wire = [*_instructions(attributes), *_genai_chat(value)]
    try:
        return [message_to_dict(m) for m in messages_from_wire(wire)]
    except WireError:
        return []


def _openinference_request(attributes: dict[str, Any]) -> list[Row]:
    fields: dict[int, dict[str, Any]] = defaultdict(dict)
    for key, value in attributes.items():
        match = _INPUT.match(key)
        if match:
            fields[int(match.group(1))][match.group(2)] = value
    return [_openinference_message(fields[i]) for i in sorted(fields)]


def _openinference_message(fields: dict[str, Any]) -> Row:
    """One `llm.input_messages.N.message.…` as a chat message."""
    texts = {int(m.group(1)): str(v) for k, v in fields.items() if (m := _INPUT_TEXT.match(k))}
    calls: dict[int, dict[str, Any]] = defaultdict(dict)
    for key, value in fields.items():
        match = _INPUT_CALL.match(key)
        if match:
            calls[int(match.group(1))][match.group(2)] = value
    content = fields.get("content", "\n".join(texts[i] for i in sorted(texts)))
    message: Row = {"role": fields.get("role"), "content": str(content or "")}
    if fields.get("tool_call_id") is not None:
        message["tool_call_id"] = fields["tool_call_id"]
    if calls:
        message["tool_calls"] = [_wire_call(calls[i]) for i in sorted(calls)]
    return message


def _wire_call(call: dict[str, Any]) -> Row:
    name, arguments = call.get("function.name"), call.get("function.arguments")
    return {"id": call.get("id"), "type": "function",
            "function": {"name": name, "arguments": arguments or "{}"}}  # fmt: skip


def _instructions(attributes: dict[str, Any]) -> list[Row]:
    """The system messages before a GenAI request's history."""
    parameters = _json(attributes.get(sc.PydanticAI.REQUEST_PARAMETERS))
    parts = parameters.get("instruction_parts") if isinstance(parameters, dict) else None
    if not isinstance(parts, list):
        parts = _json(attributes.get(sc.GenAI.SYSTEM_INSTRUCTIONS)) or []
    texts = [_text(p) for p in parts if isinstance(p, dict)] if isinstance(parts, list) else []
    return [{"role": "system", "content": text} for text in texts if text is not None]


def _genai_chat(messages: list[Any]) -> list[Row]:
    """GenAI messages (`{role, parts}`) as chat messages."""
    chat: list[Row] = []
    for message in messages:
        if not isinstance(message, dict):
            continue
        parts = [p for p in message.get("parts") or () if isinstance(p, dict)]
        chat.extend(_tool_result(p) for p in parts if p.get("type") == "tool_call_response")
        texts = [t for t in (_text(p) for p in parts) if t is not None]
        calls = [_genai_call(p) for p in parts if p.get("type") == "tool_call"]
        if texts or calls:
            said: Row = {"role": message.get("role"), "content": "\n".join(texts)}
            chat.append({**said, "tool_calls": calls} if calls else said)
    return chat


def _text(part: dict[str, Any]) -> str | None:
    """A text part's text (`{"type": "text", "content"}`, or an instruction part's content)."""
    if part.get("type", "text") != "text" or not isinstance(part.get("content"), str):
        return None
    return str(part["content"])


def _tool_result(part: dict[str, Any]) -> Row:
    result = part.get("result", part.get("response"))
    text = result if isinstance(result, str) else canonical_json(result)
    return {"role": "tool", "tool_call_id": part.get("id"), "content": text}


def _genai_call(part: dict[str, Any]) -> Row:
    return _wire_call(
        {"id": part.get("id"), "function.name": part.get("name"),
         "function.arguments": _arguments_text(part.get("arguments"))}
    )  # fmt: skip


def _arguments_text(arguments: Any) -> str:
    return arguments if isinstance(arguments, str) else canonical_json(arguments or {})


# -- the offered tools and the answer -----------------------------------------------------------


def offered_tools(attributes: dict[str, Any]) -> list[str]:
    """The names of the tools offered, in order; empty when the row does not say."""
    found: dict[int, str] = {}
    for key, value in attributes.items():
        match = _TOOL_SCHEMA.match(key)
        schema = _json(value) if match else None
        if match and isinstance(schema, dict):
            found[int(match.group(1))] = _tool_name(schema)
    if found:
        return [found[i] for i in sorted(found)]
    definitions = _json(attributes.get(sc.GenAI.TOOL_DEFINITIONS))
    if not isinstance(definitions, list):
        return []
    return [_tool_name(d) for d in definitions if isinstance(d, dict)]


def _tool_name(definition: dict[str, Any]) -> str:
    """A tool definition's name: `{"function": {"name"}}` (OpenAI's) or `{"name"}` (GenAI's)."""
    function = definition.get("function")
    return str((function if isinstance(function, dict) else definition).get("name", ""))


def answer_of(llm: Row, attributes: dict[str, Any]) -> tuple[str, list[Row]]:
    """The answer's text and the tool calls it asks for (`{id, name, arguments}`).

    A call the trace gives no id is `call-N`, N its place in the answer.
    """
    content, calls = _answer(llm, attributes)
    return content, [{**c, "id": c["id"] or f"call-{n}"} for n, c in enumerate(calls)]


def asked_ids(llm: Row) -> list[str]:
    """The ids of the tool calls an LLM row's answer asks for, those the trace gives."""
    return [c["id"] for c in _answer(llm, row_attributes(llm))[1] if c["id"]]


def _answer(llm: Row, attributes: dict[str, Any]) -> tuple[str, list[Row]]:
    """`answer_of`, a call's id None where the trace gives none."""
    calls = _openinference_calls(attributes)
    if _CONTENT in attributes or calls:
        return str(attributes.get(_CONTENT) or ""), calls
    output = _json(llm[OUTPUT_VALUE]) if llm[OUTPUT_VALUE] else None
    first = output[0] if isinstance(output, list) and output else None
    if not (isinstance(first, dict) and isinstance(first.get("parts"), list)):
        return str(llm[OUTPUT_VALUE] or ""), []
    chat = _genai_chat([first])
    said: Row = chat[-1] if chat else {"content": ""}
    asked = [
        {"id": str(c["id"]) if c["id"] else None, "name": str(c["function"]["name"] or ""),
         "arguments": c["function"]["arguments"]}
        for c in said.get("tool_calls") or ()
    ]  # fmt: skip
    return str(said["content"]), asked


def _openinference_calls(attributes: dict[str, Any]) -> list[Row]:
    found: dict[int, Row] = defaultdict(dict)
    for key, value in attributes.items():
        match = _CALL.match(key)
        if match:
            found[int(match.group(1))][match.group(2)] = value
    return [
        {
            "id": str(c[sc.TOOL_CALL_ID]) if c.get(sc.TOOL_CALL_ID) else None,
            "name": str(c.get(sc.TOOL_CALL_FUNCTION_NAME) or ""),
            "arguments": str(c.get(sc.TOOL_CALL_FUNCTION_ARGUMENTS) or "{}"),
        }
        for _, c in sorted(found.items())
    ]
