"""The endpoint's OTLP/HTTP trace receiver: an agent's spans, kept on the route they came to.

`POST /r/{key}/v1/traces` takes an `ExportTraceServiceRequest` in protobuf
(`application/x-protobuf`, what `OTLPSpanExporter` sends) or JSON (`application/json`), plain,
gzip or deflate (`Content-Encoding`). It answers 200 with an empty `ExportTraceServiceResponse`
in the request's encoding once the spans are on the route, so an exporter whose export returned
has delivered. Errors are one line of plain text: 400 for a body that does not read (the
route keeps none of its spans, and the endpoint logs a warning: the agent only logs it), 404 for
an unknown route, 415 for another content type or encoding. The exporters retry none of these.
"""

from __future__ import annotations

import json
import logging
import zlib

from plangate.replay._spans import SpanRecord
from plangate.replay.endpoint._exchange import JSON, Reply
from plangate.replay.endpoint._route import Route
from plangate.replay.importers import spans_of_protobuf, spans_of_request
from plangate.replay.schema import TraceTableError

_log = logging.getLogger("plangate.endpoint")

TRACES_PATH = "v1/traces"
"""A route's OTLP/HTTP trace path, after `/r/{key}/`."""
PROTOBUF = "application/x-protobuf"
_PROTOBUF_TYPES = frozenset({PROTOBUF, "application/protobuf"})
_TEXT = "text/plain; charset=utf-8"
_WBITS = {"gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}
"""zlib's window bits per content coding: a gzip header, or a zlib one (HTTP's deflate)."""
_MAX_SPANS_BODY = 64 * 1024 * 1024
"""The most an uncompressed body may hold, as for a compressed one."""
_MAX_MESSAGE = 300


def traces_reply(
    route: Route | None, key: str, body: bytes, *, content_type: str, encoding: str
) -> Reply:
    """Read an OTLP/HTTP trace export to `route` and answer it.

    Args:
        route: The route the path names; None when no open route has that key.
        key: The key in the path, to name in a 404.
        body: The request's body as sent.
        content_type: The request's `Content-Type` header ("" when absent).
        encoding: The request's `Content-Encoding` header ("" when absent).

    Returns:
        200 with an empty response once the spans are on `route.spans`; 400, 404 or 415 with
        one line of text saying why not.
    """
    if route is None:
        return _error(
            404,
            f"no route {key!r} on this endpoint: it was never opened or is closed "
            f"(OTLP traces go to /r/KEY/{TRACES_PATH})",
        )
    media = content_type.split(";", 1)[0].strip().lower()
    if media != JSON and media not in _PROTOBUF_TYPES:
        return _error(
            415,
            f"Content-Type {content_type!r} is not served: send OTLP traces as {PROTOBUF} "
            f"or {JSON}",
        )
    coding = encoding.strip().lower()
    if coding not in ("", "identity", *_WBITS):
        return _error(
            415, f"Content-Encoding {encoding!r} is not served: use gzip, deflate or none"
        )
    try:
        where = f"route {key!r}"
        spans = _read(_inflate(body, coding, where), media == JSON, where)
    except TraceTableError as bad:
        _log.warning("an OTLP export to route %r was refused: %s", key, bad)
        return _error(400, str(bad))
    route._receive(spans)
    return Reply(200, b"{}", JSON) if media == JSON else Reply(200, b"", PROTOBUF)


def _inflate(body: bytes, coding: str, where: str) -> bytes:
    """The body without its content coding, at most `_MAX_SPANS_BODY` bytes of it."""
    if coding not in _WBITS:
        return body
    inflater = zlib.decompressobj(_WBITS[coding])
    try:
        data = inflater.decompress(body, _MAX_SPANS_BODY)
    except zlib.error as exc:
        raise TraceTableError(f"{where}: the body is not {coding} data ({exc})") from None
    if inflater.unconsumed_tail:
        raise TraceTableError(f"{where}: the body inflates to over {_MAX_SPANS_BODY} bytes")
    if not inflater.eof:
        raise TraceTableError(f"{where}: the {coding} body is cut short")
    return data


def _read(data: bytes, is_json: bool, where: str) -> list[SpanRecord]:
    if not is_json:
        return spans_of_protobuf(data, where)
    try:
        request = json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise TraceTableError(f"{where}: the body is not JSON ({exc})") from None
    return spans_of_request(request, where)


def _error(status: int, message: str) -> Reply:
    line = " ".join(message.split())
    if len(line) > _MAX_MESSAGE:
        line = line[:_MAX_MESSAGE] + "…"
    return Reply(status, line.encode() + b"\n", _TEXT)
