"""OTLP JSON files: spans in the OTLP/HTTP JSON encoding, from any OpenTelemetry exporter.

A file holds one `ExportTraceServiceRequest` as JSON, or JSON Lines with one request per line
(what the OpenTelemetry collector's file exporter writes). Per the OTLP specification, trace
and span ids are hex and 64-bit integers are strings; ids in base64 (what protobuf's own JSON
mapping, `MessageToDict`, writes) are accepted too, as are enum names for the status code.
Resource attributes (`service.name`, `openinference.project.name`, …) join each span's
attributes, which win on a clash. The OTLP span kind (INTERNAL, SERVER, …) and the
instrumentation scope are not kept: OpenInference's `openinference.span.kind` is the kind, or
the GenAI conventions' `gen_ai.operation.name`. A file with no span in either convention is
refused rather than read as a table of nothing any evaluator could judge.

The model endpoint's OTLP receiver reads requests with the same rules: `spans_of_request` for
the JSON encoding, `spans_of_protobuf` for protobuf (read field by field rather than through
`MessageToDict`, which made a request about four times slower to read; a test holds the two
readers to the same records).
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
from opentelemetry.sdk.trace import ReadableSpan

from plangate.harness import json_problem
from plangate.replay._openinference import span_convention
from plangate.replay._spans import (
    SpanEvent,
    SpanRecord,
    StatusCode,
    time_from_nanos,
    with_dropped,
)
from plangate.replay.importers._registry import span_importer, table_of_spans
from plangate.replay.schema import TraceTableError

SOURCE = "otlp"

_STATUS: dict[Any, StatusCode] = {
    0: "UNSET",
    1: "OK",
    2: "ERROR",
    "STATUS_CODE_UNSET": "UNSET",
    "STATUS_CODE_OK": "OK",
    "STATUS_CODE_ERROR": "ERROR",
}

_ID_FIELDS = ("traceId", "spanId", "parentSpanId")


def read_otlp_json(path: Path) -> pa.Table:
    """Read an OTLP JSON (or JSON Lines) file of spans into a trace table.

    Args:
        path: The file.

    Returns:
        One row per span, with source "otlp".

    Raises:
        TraceTableError: The file is not OTLP JSON, holds no spans, or none in OpenInference or
            the OpenTelemetry GenAI conventions; the message names the file, the line and the
            span.
    """
    return table_of_spans({path: otlp_spans(path)}, SOURCE, _check_conventions)


def _check_conventions(spans: Sequence[SpanRecord], where: str) -> None:
    """Refuse spans that would import as turns nothing could be judged on."""
    if not any(span_convention(span) for span in spans):
        raise TraceTableError(
            f"{where}: none of the {len(spans)} spans is in OpenInference or the OpenTelemetry "
            "GenAI conventions (no openinference.span.kind, gen_ai.operation.name, "
            "gen_ai.tool.name or other attribute either reads); expected an agent's spans"
        )


@span_importer("otlp-json", SOURCE, _check_conventions)
def otlp_spans(path: Path) -> list[SpanRecord]:
    """The spans of an OTLP JSON (or JSON Lines) file; a file without any is refused."""
    spans: list[SpanRecord] = []
    for where, request in _requests(path):
        spans.extend(spans_of_request(request, where))
    if not spans:
        raise TraceTableError(
            f"{path}: no spans (resourceSpans[].scopeSpans[].spans[] are all empty); "
            "expected OTLP JSON with at least one span"
        )
    return spans


def otlp_json_from_spans(spans: Sequence[ReadableSpan]) -> dict[str, Any]:
    """OpenTelemetry SDK spans as one OTLP JSON `ExportTraceServiceRequest`, with hex ids.

    Args:
        spans: Finished spans (e.g. from an `InMemorySpanExporter`).

    Returns:
        The request as a JSON-ready dict: `json.dumps` it to write an `otlp-json` file.
    """
    from google.protobuf.json_format import MessageToDict  # type: ignore[import-untyped]
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    request: dict[str, Any] = MessageToDict(encode_spans(spans), use_integers_for_enums=True)
    # protobuf's JSON mapping writes bytes as base64; OTLP/HTTP JSON wants ids in hex.
    for _, span in _spans(request):
        for item in (span, *span.get("links", ())):
            for key in _ID_FIELDS:
                if item.get(key):
                    item[key] = base64.b64decode(item[key]).hex()
    return request


def _requests(path: Path) -> Iterator[tuple[str, Any]]:
    """The requests in a file, each with where it came from (the file, and the line).

    JSON Lines are parsed one line at a time, as they are read: a collector's file holds a
    request per line, and parsing them all first held every line's objects at once.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise TraceTableError(f"{path}: not UTF-8 text ({exc.reason}); expected OTLP JSON") from exc
    if not text.strip():
        raise TraceTableError(f"{path}: the file is empty; expected OTLP JSON")
    try:
        whole = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as error:
        if not _parses(next(line for line in text.splitlines() if line.strip())):
            raise TraceTableError(
                f"{path}: not JSON ({json_problem(error)}); "
                "expected an OTLP ExportTraceServiceRequest, or one per line"
            ) from error
    else:
        yield str(path), whole
        return
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            request = json.loads(line)
        except (json.JSONDecodeError, RecursionError) as exc:
            raise TraceTableError(
                f"{path}, line {number}: not JSON ({json_problem(exc)}); "
                "expected one OTLP ExportTraceServiceRequest per line"
            ) from exc
        yield f"{path}, line {number}", request


def _parses(text: str) -> bool:
    try:
        json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        return False
    return True


def spans_of_request(request: Any, where: str) -> list[SpanRecord]:
    """The spans of one OTLP `ExportTraceServiceRequest` in the JSON encoding.

    Args:
        request: The request as `json.loads` reads it; ids in hex (the OTLP specification) or
            base64 (protobuf's JSON mapping).
        where: What the request is, for error messages (a file and line, a route).

    Returns:
        One record per span, in the request's order; resource attributes join each span's.

    Raises:
        TraceTableError: The request is not OTLP JSON; the message starts with `where` and
            names the span and the field.
    """
    return list(_request_spans(request, where))


def _request_spans(request: Any, where: str) -> Iterator[SpanRecord]:
    if not isinstance(request, dict) or not isinstance(request.get("resourceSpans"), list):
        raise TraceTableError(
            f"{where}: no 'resourceSpans' list; expected an OTLP ExportTraceServiceRequest "
            "in JSON (resourceSpans[].scopeSpans[].spans[])"
        )
    for i, resource_spans in enumerate(request["resourceSpans"]):
        at = f"{where}: resourceSpans[{i}]"
        spans = list(_scope_spans(resource_spans, at))
        resource = _object(resource_spans, "resource", at).get("attributes")
        attributes = _attributes(resource, f"{at}.resource")
        for location, span in spans:
            yield _span(span, attributes, location)


def spans_of_protobuf(body: bytes, where: str) -> list[SpanRecord]:
    """The spans of one OTLP `ExportTraceServiceRequest` in the protobuf encoding.

    The records are those `spans_of_request` gives for the same request in JSON.

    Args:
        body: The serialized request, uncompressed.
        where: What the request is, for error messages (a route, say).

    Returns:
        One record per span, in the request's order; resource attributes join each span's.

    Raises:
        TraceTableError: The body is not a serialized request, or a span is malformed (an id
            of the wrong length, an unknown status code or value type); the message starts with
            `where` and names the span and the field.
    """
    from google.protobuf.message import DecodeError  # type: ignore[import-untyped]
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    try:
        request = ExportTraceServiceRequest.FromString(body)
    except DecodeError as exc:
        raise TraceTableError(
            f"{where}: not an OTLP ExportTraceServiceRequest in protobuf ({exc})"
        ) from None
    spans: list[SpanRecord] = []
    for i, resource_spans in enumerate(request.resource_spans):
        at = f"{where}: resourceSpans[{i}]"
        try:
            resource = _proto_attributes(resource_spans.resource.attributes)
        except _Malformed as bad:
            raise TraceTableError(f"{at}.resource: {bad}") from None
        for j, scope_spans in enumerate(resource_spans.scope_spans):
            spans.extend(_proto_spans(scope_spans.spans, resource, f"{at}.scopeSpans[{j}]"))
    return spans


class _Malformed(Exception):
    """A malformed field of a protobuf span; the caller adds where the span is."""


def _proto_spans(spans: Any, resource: dict[str, Any], at: str) -> Iterator[SpanRecord]:
    for k, span in enumerate(spans):
        try:
            record = _proto_span(span, resource)
        except _Malformed as bad:
            raise TraceTableError(f"{at}.spans[{k}]: {bad}") from None
        yield record


def _proto_span(span: Any, resource: dict[str, Any]) -> SpanRecord:
    status = span.status
    if status.code not in _STATUS:
        raise _Malformed(f"status code {status.code!r} is not 0, 1 or 2")
    return SpanRecord(
        trace_id=_proto_required_id(span.trace_id, "traceId", 16),
        span_id=_proto_required_id(span.span_id, "spanId", 8),
        parent_span_id=_proto_id(span.parent_span_id, "parentSpanId", 8),
        name=span.name,
        start_time=_proto_time(span.start_time_unix_nano),
        end_time=_proto_time(span.end_time_unix_nano),
        status_code=_STATUS[status.code],
        status_message=status.message or None,
        attributes=with_dropped(
            {**resource, **_proto_attributes(span.attributes)}, span.dropped_attributes_count
        ),
        events=tuple(_proto_event(event, n) for n, event in enumerate(span.events)),
    )


def _proto_event(event: Any, index: int) -> SpanEvent:
    try:
        attributes = _proto_attributes(event.attributes)
    except _Malformed as bad:
        raise _Malformed(f"events[{index}]: {bad}") from None
    return SpanEvent(name=event.name, time=_proto_time(event.time_unix_nano), attributes=attributes)


def _proto_required_id(raw: bytes, key: str, size: int) -> str:
    identifier = _proto_id(raw, key, size)
    if identifier is None:
        raise _Malformed(f"{key} is 0" if raw else f"no {key!r}")
    return identifier


def _proto_id(raw: bytes, key: str, size: int) -> str | None:
    """An id as lowercase hex; an empty or all-zero id is None (a root span has no parent)."""
    if raw and len(raw) != size:
        raise _Malformed(f"{key} {raw.hex()!r} is {len(raw)} bytes, not {size}")
    return raw.hex() if raw.strip(b"\0") else None


def _proto_time(nanos: int) -> Any:
    return time_from_nanos(nanos) if nanos else None


def _proto_attributes(items: Any) -> dict[str, Any]:
    """Protobuf key-value pairs as a dict; pairs without a value are left out."""
    attributes = {}
    for item in items:
        try:
            value = _proto_value(item.value)
        except _Malformed as bad:
            raise _Malformed(f"attribute {item.key!r} {bad}") from None
        if value is not None:
            attributes[item.key] = value
    return attributes


def _proto_value(value: Any) -> Any:
    """A protobuf AnyValue as `_value` reads its JSON (bytes stay base64 text)."""
    kind = value.WhichOneof("value")
    if kind in _PROTO_SCALARS:
        return getattr(value, kind)
    if kind == "array_value":
        return [_proto_value(item) for item in value.array_value.values]
    if kind == "kvlist_value":
        return _proto_attributes(value.kvlist_value.values)
    if kind == "bytes_value":
        return base64.b64encode(value.bytes_value).decode("ascii")
    if kind is None:
        return None
    raise _Malformed(f"has unknown value type {kind!r}")


_PROTO_SCALARS = frozenset({"string_value", "bool_value", "int_value", "double_value"})


def _spans(request: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every span of a well-formed request."""
    for resource_spans in request.get("resourceSpans", ()):
        yield from _scope_spans(resource_spans, "resourceSpans")


def _scope_spans(resource_spans: Any, at: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """The spans of one `resourceSpans` entry, with their location (`…scopeSpans[1].spans[2]`)."""
    for j, scope_spans in enumerate(_list(resource_spans, "scopeSpans", at)):
        at_scope = f"{at}.scopeSpans[{j}]"
        for k, span in enumerate(_list(scope_spans, "spans", at_scope)):
            if not isinstance(span, dict):
                raise TraceTableError(f"{at_scope}.spans[{k}]: not a JSON object")
            yield f"{at_scope}.spans[{k}]", span


def _list(data: Any, key: str, where: str) -> list[Any]:
    if not isinstance(data, dict):
        raise TraceTableError(f"{where}: not a JSON object")
    value = data.get(key, [])
    if not isinstance(value, list):
        raise TraceTableError(f"{where}: {key!r} is not a list")
    return value


def _object(data: dict[str, Any], key: str, where: str) -> dict[str, Any]:
    value = data.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise TraceTableError(f"{where}: {key!r} is not a JSON object")
    return value


def _span(data: dict[str, Any], resource: dict[str, Any], where: str) -> SpanRecord:
    status = _object(data, "status", where)
    code = status.get("code", 0)
    if isinstance(code, bool) or not isinstance(code, int | str) or code not in _STATUS:
        raise TraceTableError(f"{where}: status code {code!r} is not 0, 1, 2 or a STATUS_CODE_*")
    return SpanRecord(
        trace_id=_required_id(data, "traceId", 16, where),
        span_id=_required_id(data, "spanId", 8, where),
        parent_span_id=_id(data, "parentSpanId", 8, where),
        name=str(data.get("name", "")),
        start_time=_time(data, "startTimeUnixNano", where),
        end_time=_time(data, "endTimeUnixNano", where),
        status_code=_STATUS[code],
        status_message=status.get("message") or None,
        attributes=with_dropped(
            {**resource, **_attributes(data.get("attributes"), where)},
            data.get("droppedAttributesCount"),
        ),
        events=tuple(
            _event(event, f"{where}.events[{n}]")
            for n, event in enumerate(_list(data, "events", where))
        ),
    )


def _event(data: Any, where: str) -> SpanEvent:
    if not isinstance(data, dict):
        raise TraceTableError(f"{where}: not a JSON object")
    return SpanEvent(
        name=str(data.get("name", "")),
        time=_time(data, "timeUnixNano", where),
        attributes=_attributes(data.get("attributes"), where),
    )


def _required_id(data: dict[str, Any], key: str, size: int, where: str) -> str:
    identifier = _id(data, key, size, where)
    if identifier is None:
        raise TraceTableError(
            f"{where}: no {key!r}" if not data.get(key) else f"{where}: {key} is 0"
        )
    return identifier


def _id(data: dict[str, Any], key: str, size: int, where: str) -> str | None:
    """An id as lowercase hex, from hex (the OTLP spec) or base64 (protobuf's JSON mapping).

    A missing, empty or all-zero id is None: a root span has no parent.
    """
    value = data.get(key)
    raw = _id_bytes(str(value), size) if value else b""
    if value and len(raw) != size:
        raise TraceTableError(
            f"{where}: {key} {value!r} is neither {2 * size} hex digits nor base64 of {size} bytes"
        )
    return raw.hex() if raw.strip(b"\0") else None


def _id_bytes(text: str, size: int) -> bytes:
    if len(text) == 2 * size:
        try:
            return bytes.fromhex(text)
        except ValueError:
            pass
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return b""


def _time(data: dict[str, Any], key: str, where: str) -> Any:
    value = data.get(key)
    try:
        nanos = int(value) if value is not None else 0
        return time_from_nanos(nanos) if nanos else None
    except (TypeError, ValueError, OverflowError):  # 1e400 is JSON, read as infinity
        raise TraceTableError(f"{where}: {key} {value!r} is not a time in nanoseconds") from None


def _attributes(items: Any, where: str) -> dict[str, Any]:
    """OTLP key-value pairs as a dict; pairs without a value are left out."""
    if items is None:
        return {}
    if not isinstance(items, list):
        raise TraceTableError(f"{where}: 'attributes' is not a list")
    attributes = {}
    for item in items:
        if not isinstance(item, dict) or "key" not in item:
            raise TraceTableError(f"{where}: attribute {item!r} has no 'key'")
        value = _value(item.get("value"), f"{where}: attribute {item['key']!r}")
        if value is not None:
            attributes[str(item["key"])] = value
    return attributes


def _value(data: Any, where: str) -> Any:
    """An OTLP AnyValue as a Python value (None for an empty one)."""
    if not isinstance(data, dict) or not data:
        return None
    kind, value = next(iter(data.items()))
    decode = _DECODERS.get(kind)
    if decode is None:
        raise TraceTableError(f"{where} has unknown value type {kind!r}")
    try:
        return decode(value, where)
    except (TypeError, ValueError, AttributeError, OverflowError):  # `key = value`: redactable
        raise TraceTableError(f"{where} = {value!r} is not a valid {kind}") from None


def _array(value: Any, where: str) -> list[Any]:
    return [_value(item, where) for item in value.get("values", [])]


def _kvlist(value: Any, where: str) -> dict[str, Any]:
    return _attributes(value.get("values", []), where)


_DECODERS: dict[str, Callable[[Any, str], Any]] = {
    "stringValue": lambda value, _: str(value),
    "boolValue": lambda value, _: bool(value),
    "intValue": lambda value, _: int(value),
    "doubleValue": lambda value, _: float(value),
    "bytesValue": lambda value, _: str(value),
    "arrayValue": _array,
    "kvlistValue": _kvlist,
}
