"""The endpoint's OTLP/HTTP receiver, spoken to by the real OpenTelemetry SDK exporters.

Spans in OpenInference and in the GenAI conventions are exported to a route (simple and batch
processors, plain, gzip and deflate, protobuf from the SDK and JSON from `httpx`) and must come
back as the same spans, and as trace rows with the right kinds, tool names and arguments.
"""

from __future__ import annotations

import gzip
import itertools
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest
from google.protobuf.json_format import MessageToDict  # type: ignore[import-untyped]
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SimpleSpanProcessor,
    SpanExporter,
)
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Tracer

from plangate.harness import AssistantMessage, ModelResponse, ScriptedModel, ToolCall
from plangate.replay import SpanRecord, TraceTableError, rows_from_spans
from plangate.replay.endpoint import ModelEndpoint, Route
from plangate.replay.importers import otlp_json_from_spans, spans_of_protobuf, spans_of_request

SEARCH = {"query": "error rate", "limit": 5}
"""The tool call's arguments, keys unsorted: the rows hold them canonical."""
CANONICAL = '{"limit":5,"query":"error rate"}'
PROTOBUF = {"Content-Type": "application/x-protobuf"}
JSON = {"Content-Type": "application/json"}
CLOCK = itertools.count(1_800_000_000_000_000_000, 1_000_000)
"""Span times, one millisecond apart, shared so that no two tests' spans start together."""


@pytest.fixture
def endpoint() -> Iterator[ModelEndpoint]:
    with ModelEndpoint() as running:
        yield running


def open_route(endpoint: ModelEndpoint) -> Route:
    return endpoint.open_route(ScriptedModel([]))


@contextmanager
def provider(*exporters: SpanExporter, batch: bool = False) -> Iterator[TracerProvider]:
    """A tracer provider exporting to `exporters`, shut down on exit (its exporters with it)."""
    made = TracerProvider(
        resource=Resource({"service.name": "receiver-test"}), shutdown_on_exit=False
    )
    for exporter in exporters:
        processor = BatchSpanProcessor if batch else SimpleSpanProcessor
        made.add_span_processor(processor(exporter))
    try:
        yield made
    finally:
        made.shutdown()


def otlp(route: Route, compression: Compression = Compression.NoCompression) -> OTLPSpanExporter:
    return OTLPSpanExporter(endpoint=route.otlp_endpoint + "/v1/traces", compression=compression)


@contextmanager
def span(tracer: Tracer, name: str, attributes: dict[str, Any]) -> Iterator[None]:
    """A span on the shared clock, ended after its body (so a parent ends after its children)."""
    with tracer.start_as_current_span(
        name, attributes=attributes, start_time=next(CLOCK), end_on_exit=False
    ) as made:
        yield
    made.end(end_time=next(CLOCK))


def openinference_turn(tracer: Tracer, session: str) -> None:
    with span(tracer, "turn", {"openinference.span.kind": "AGENT", "session.id": session}):
        with span(tracer, "chat", {"openinference.span.kind": "LLM", "llm.model_name": "m-1"}):
            pass
        tool = {
            "openinference.span.kind": "TOOL",
            "tool.name": "search",
            "tool.id": "call_1",
            "input.value": json.dumps(SEARCH),
            "output.value": "3 hits",
        }
        with span(tracer, "search", tool):
            pass


def genai_turn(tracer: Tracer, session: str) -> None:
    agent = {"gen_ai.operation.name": "invoke_agent", "gen_ai.conversation.id": session}
    with span(tracer, "invoke_agent planner", agent):
        with span(tracer, "chat m-1", {"gen_ai.operation.name": "chat"}):
            pass
        tool = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "search",
            "gen_ai.tool.call.id": "call_1",
            "gen_ai.tool.call.arguments": json.dumps(SEARCH),
        }
        with span(tracer, "execute_tool search", tool):
            pass


TURNS = {"openinference": openinference_turn, "genai": genai_turn}


def assert_one_turn(spans: list[SpanRecord], session: str) -> None:
    """The spans are one turn of `session`: an agent, a model call, a search with its arguments."""
    rows = rows_from_spans(spans, source="otlp")
    assert [row["span_kind"] for row in rows] == ["AGENT", "LLM", "TOOL"]
    assert {row["session_id"] for row in rows} == {session}
    assert {row["turn_index"] for row in rows} == {0}
    assert [(row["tool_name"], row["tool_args"]) for row in rows][2] == ("search", CANONICAL)


def sdk_ids(spans: tuple[ReadableSpan, ...]) -> set[str]:
    return {format(one.context.span_id, "016x") for one in spans if one.context is not None}


def post(url: str, body: bytes, headers: dict[str, str]) -> httpx.Response:
    return httpx.post(url, content=body, headers=headers, timeout=10)


# The SDK's exporter


@pytest.mark.parametrize("batch", [False, True], ids=["simple", "batch"])
@pytest.mark.parametrize(
    "compression", [Compression.NoCompression, Compression.Gzip, Compression.Deflate]
)
@pytest.mark.parametrize("convention", sorted(TURNS))
def test_the_sdk_exporter_delivers_every_span(
    endpoint: ModelEndpoint, batch: bool, compression: Compression, convention: str
) -> None:
    route, memory = open_route(endpoint), InMemorySpanExporter()
    with provider(otlp(route, compression), memory, batch=batch) as made:
        TURNS[convention](made.get_tracer("test"), "session-1")
        assert made.force_flush()
        assert {one.span_id for one in route.spans} == sdk_ids(memory.get_finished_spans())
    assert_one_turn(route.spans, "session-1")
    assert {span.attributes["service.name"] for span in route.spans} == {"receiver-test"}


def test_two_routes_never_mix(endpoint: ModelEndpoint) -> None:
    routes = [open_route(endpoint) for _ in range(2)]

    def agent(route: Route, session: str) -> None:
        with provider(otlp(route)) as made:
            for _ in range(5):
                openinference_turn(made.get_tracer("test"), session)

    threads = [
        threading.Thread(target=agent, args=(route, f"session-{n}"))
        for n, route in enumerate(routes)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    for n, route in enumerate(routes):
        assert len(route.spans) == 15
        assert {
            span.attributes["session.id"] for span in route.spans if span.parent_span_id is None
        } == {f"session-{n}"}


def test_a_process_that_exits_has_delivered_every_span(endpoint: ModelEndpoint) -> None:
    # Only the standard variables: the SDK appends /v1/traces, and flushes at exit.
    route = open_route(endpoint)
    script = """
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
provider = TracerProvider()
provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
trace.set_tracer_provider(provider)
tracer = trace.get_tracer("child")
for turn in range(200):
    with tracer.start_as_current_span("turn", attributes={"openinference.span.kind": "AGENT"}):
        with tracer.start_as_current_span("chat", attributes={"openinference.span.kind": "LLM"}):
            pass
        with tracer.start_as_current_span(
            "search", attributes={"openinference.span.kind": "TOOL", "tool.name": "search"}
        ):
            pass
"""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    environment |= {
        "OTEL_EXPORTER_OTLP_ENDPOINT": route.otlp_endpoint,
        "OTEL_SERVICE_NAME": "child",
    }
    done = subprocess.run(
        [sys.executable, "-c", script], env=environment, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert len(route.spans) == 600  # no wait: each export was answered once its spans were in
    assert {span.attributes["service.name"] for span in route.spans} == {"child"}
    rows = rows_from_spans(route.spans, source="otlp")
    assert sum(row["tool_name"] == "search" for row in rows) == 200


async def test_a_pydantic_ai_agent_records_its_calls_and_spans_on_one_route(
    endpoint: ModelEndpoint,
) -> None:
    # A real framework, unchanged: its model calls and its own instrumentation's spans.
    pydantic_ai = pytest.importorskip("pydantic_ai")
    from openai import AsyncOpenAI
    from pydantic_ai.models.instrumented import InstrumentationSettings
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    call = ToolCall.of("search", "call_1", **SEARCH)
    answers = [AssistantMessage(tool_calls=(call,)), AssistantMessage(content="3 errors.")]
    route = endpoint.open_route(ScriptedModel([ModelResponse(message=m) for m in answers]))
    with provider(otlp(route)) as made:
        async with AsyncOpenAI(base_url=route.base_url, api_key="unused") as client:
            model = OpenAIChatModel("m-1", provider=OpenAIProvider(openai_client=client))
            agent = pydantic_ai.Agent(model)
            agent.instrument = InstrumentationSettings(tracer_provider=made)
            agent.tool_plain(lambda query, limit: "3 hits", name="search")
            assert (await agent.run("How many errors?")).output == "3 errors."
    rows = rows_from_spans(route.spans, source="otlp")
    assert [row["span_kind"] for row in rows] == ["AGENT", "LLM", "TOOL", "LLM"]
    assert (rows[2]["tool_name"], rows[2]["tool_args"]) == ("search", CANONICAL)
    assert len(route.calls) == 2


# JSON, and both readers alike


def test_json_from_httpx_reads_like_protobuf(endpoint: ModelEndpoint) -> None:
    memory = InMemorySpanExporter()
    with provider(memory) as made:
        genai_turn(made.get_tracer("test"), "session-j")
    finished = memory.get_finished_spans()
    as_json, as_protobuf = open_route(endpoint), open_route(endpoint)
    reply = httpx.post(as_json.otlp_endpoint + "/v1/traces", json=otlp_json_from_spans(finished))
    assert (reply.status_code, reply.content) == (200, b"{}")
    assert reply.headers["content-type"] == "application/json"
    body = encode_spans(finished).SerializeToString()
    reply = post(
        as_protobuf.otlp_endpoint + "/v1/traces",
        gzip.compress(body),
        {**PROTOBUF, "Content-Encoding": "gzip"},
    )
    assert (reply.status_code, reply.content) == (200, b"")
    assert reply.headers["content-type"] == "application/x-protobuf"
    assert ExportTraceServiceRequest.FromString(reply.content) == ExportTraceServiceRequest()
    assert as_json.spans == as_protobuf.spans
    assert_one_turn(as_json.spans, "session-j")


def every_kind_of_request() -> ExportTraceServiceRequest:
    """A request with every value type, an event, an error status and a parent, by hand."""
    request = ExportTraceServiceRequest()
    resource_spans = request.resource_spans.add()
    resource_spans.resource.attributes.append(
        KeyValue(key="service.name", value=AnyValue(string_value="svc"))
    )
    resource_spans.resource.attributes.append(
        KeyValue(key="tool.name", value=AnyValue(string_value="lost"))
    )
    span = resource_spans.scope_spans.add().spans.add()
    span.trace_id, span.span_id, span.parent_span_id = bytes(range(1, 17)), b"\x01" * 8, b"\x02" * 8
    span.name, span.start_time_unix_nano, span.end_time_unix_nano = (
        "search",
        1_000_001_234,
        2_000_000_000,
    )
    span.status.code, span.status.message = 2, "it broke"
    span.dropped_attributes_count = 7  # the sender's SDK dropped 7 over its limit
    nested = AnyValue()
    nested.kvlist_value.values.append(KeyValue(key="inner", value=AnyValue(int_value=-3)))
    nested.kvlist_value.values.append(KeyValue(key="empty", value=AnyValue()))
    listed = AnyValue()
    listed.array_value.values.extend(
        [AnyValue(double_value=0.5), AnyValue(bool_value=True), AnyValue()]
    )
    values = {
        "openinference.span.kind": AnyValue(string_value="TOOL"),
        "tool.name": AnyValue(string_value="search"),
        "input.value": AnyValue(string_value=json.dumps(SEARCH)),
        "count": AnyValue(int_value=2**40),
        "blob": AnyValue(bytes_value=b"\x00\xff"),
        "nested": nested,
        "listed": listed,
        "unset": AnyValue(),
    }
    span.attributes.extend(KeyValue(key=key, value=value) for key, value in values.items())
    event = span.events.add()
    event.name, event.time_unix_nano = "retry", 1_500_000_000
    event.attributes.append(KeyValue(key="attempt", value=AnyValue(int_value=2)))
    return request


def test_the_protobuf_and_json_readers_agree() -> None:
    request = every_kind_of_request()
    read = spans_of_protobuf(request.SerializeToString(), "here")
    assert read == spans_of_request(MessageToDict(request), "here")  # base64 ids, enum names
    assert read == spans_of_request(
        json.loads(json.dumps(MessageToDict(request, use_integers_for_enums=True))), "here"
    )
    [record] = read
    assert record.trace_id == bytes(range(1, 17)).hex() and record.parent_span_id == "02" * 8
    assert (record.status_code, record.status_message) == ("ERROR", "it broke")
    assert record.start_time is not None and record.start_time.microsecond == 1
    assert record.attributes["tool.name"] == "search"  # the span's own attribute wins
    assert record.attributes["nested"] == {"inner": -3}
    assert record.attributes["listed"] == [0.5, True, None]
    assert record.attributes["blob"] == "AP8=" and "unset" not in record.attributes
    assert record.attributes["otel.dropped_attributes_count"] == 7
    written = MessageToDict(request)
    written["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["droppedAttributesCount"] = "7"
    assert spans_of_request(written, "here") == read  # a count as text, as proto3 JSON allows
    assert record.events[0].attributes == {"attempt": 2}
    [row] = rows_from_spans(read, source="otlp")
    assert (row["span_kind"], row["tool_name"], row["tool_args"]) == ("TOOL", "search", CANONICAL)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda span: setattr(span, "span_id", b"\x01" * 7),
            "spanId '01010101010101' is 7 bytes, not 8",
        ),
        (lambda span: setattr(span, "trace_id", b""), "no 'traceId'"),
        (lambda span: setattr(span, "trace_id", b"\0" * 16), "traceId is 0"),
        (lambda span: setattr(span.status, "code", 7), "status code 7 is not 0, 1 or 2"),
        (
            lambda span: setattr(span.events[0].attributes[0].value, "string_value_strindex", 1),
            "events[0]: attribute 'attempt' has unknown value type 'string_value_strindex'",
        ),
    ],
)
def test_a_malformed_protobuf_span_is_named(change: Any, message: str) -> None:
    request = every_kind_of_request()
    change(request.resource_spans[0].scope_spans[0].spans[0])
    with pytest.raises(TraceTableError) as raised:
        spans_of_protobuf(request.SerializeToString(), "route 'k'")
    assert str(raised.value) == f"route 'k': resourceSpans[0].scopeSpans[0].spans[0]: {message}"


# Errors


@pytest.mark.parametrize(
    ("body", "headers", "says"),
    [
        (b"\xff\xff\xff", PROTOBUF, "not an OTLP ExportTraceServiceRequest in protobuf"),
        (b"not gzip", {**PROTOBUF, "Content-Encoding": "gzip"}, "the body is not gzip data"),
        (gzip.compress(b"{}", mtime=0)[:-4], {**JSON, "Content-Encoding": "gzip"}, "cut short"),
        (b"{not json", JSON, "the body is not JSON"),
        (
            b'{"resourceSpans": 3}',
            {"Content-Type": "application/json; charset=utf-8"},
            "resourceSpans",
        ),
    ],
)
def test_a_body_that_does_not_read_is_a_400_and_the_server_serves_on(
    endpoint: ModelEndpoint, body: bytes, headers: dict[str, str], says: str
) -> None:
    route = open_route(endpoint)
    reply = post(route.otlp_endpoint + "/v1/traces", body, headers)
    assert reply.status_code == 400 and says in reply.text
    assert reply.text.count("\n") == 1 and reply.text.startswith(f"route {route.key!r}: ")
    assert route.spans == []
    with provider(otlp(route)) as made:
        openinference_turn(made.get_tracer("test"), "after")
    assert_one_turn(route.spans, "after")


def test_unknown_routes_and_other_types_are_refused(endpoint: ModelEndpoint) -> None:
    route = open_route(endpoint)
    traces = route.otlp_endpoint + "/v1/traces"
    assert post(f"{endpoint.url}/r/nope/v1/traces", b"", PROTOBUF).status_code == 404
    assert post(traces, b"", {"Content-Type": "text/plain"}).status_code == 415
    assert post(traces, b"", {}).status_code == 415
    assert post(traces, b"", {**PROTOBUF, "Content-Encoding": "br"}).status_code == 415
    assert post(traces + "/", b"", PROTOBUF).status_code == 200  # an empty request is no spans
    endpoint.close_route(route)
    reply = post(traces, b"", PROTOBUF)
    assert reply.status_code == 404 and "no route" in reply.text
    assert route.spans == []


@settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    body=st.one_of(
        st.binary(max_size=600),
        st.tuples(st.integers(0, 10_000), st.binary(min_size=1, max_size=8)),
    )
)
def test_any_bytes_are_a_200_or_a_400_never_a_500(endpoint: ModelEndpoint, body: Any) -> None:
    if isinstance(body, tuple):  # a real request with a few bytes overwritten
        valid = every_kind_of_request().SerializeToString()
        at, patch = body[0] % len(valid), body[1]
        body = valid[:at] + patch + valid[at + len(patch) :]
    route = open_route(endpoint)
    reply = post(route.otlp_endpoint + "/v1/traces", body, PROTOBUF)
    assert reply.status_code in (200, 400), reply.text
    if reply.status_code == 400:
        assert route.spans == []


# Which spans are a turn's


def test_a_turns_spans_are_picked_by_their_start_times_even_when_late(
    endpoint: ModelEndpoint,
) -> None:
    route = open_route(endpoint)
    exporter = otlp(route)
    made = TracerProvider(shutdown_on_exit=False)
    # Nothing leaves before force_flush: both turns arrive together, after both ended.
    made.add_span_processor(
        BatchSpanProcessor(exporter, schedule_delay_millis=600_000, max_export_batch_size=512)
    )
    tracer = made.get_tracer("test")
    first_start = next(CLOCK)
    openinference_turn(tracer, "session-1")
    first_end = second_start = next(CLOCK)
    genai_turn(tracer, "session-1")
    second_end = next(CLOCK)
    try:
        assert not route.wait_for_turn(first_start, first_end, timeout=0.01)
        flusher = threading.Thread(target=made.force_flush)
        flusher.start()
        assert route.wait_for_turn(second_start, second_end, timeout=30)
        assert route.wait_for_spans(6, timeout=30)
        flusher.join(timeout=30)
    finally:
        made.shutdown()
    first, second = (
        route.spans_between(first_start, first_end),
        route.spans_between(second_start, second_end),
    )
    assert [span.name for span in first] == ["chat", "search", "turn"]  # the order they ended
    assert [span.name for span in second] == [
        "chat m-1",
        "execute_tool search",
        "invoke_agent planner",
    ]
    assert route.spans_between(second_end + 1, second_end + 10**9) == []
    assert_one_turn(first, "session-1")


def test_a_root_span_comes_after_its_turns_spans(endpoint: ModelEndpoint) -> None:
    # wait_for_turn's rule, against the real exporter: when the root is in, so is the rest.
    # Exports every millisecond, one span at a time: a turn's spans arrive in three exports.
    route = open_route(endpoint)
    made = TracerProvider(shutdown_on_exit=False)
    made.add_span_processor(
        BatchSpanProcessor(otlp(route), schedule_delay_millis=1, max_export_batch_size=1)
    )
    tracer, seen = made.get_tracer("test"), []
    try:
        for _ in range(20):
            start = next(CLOCK)
            openinference_turn(tracer, "session-r")
            end = next(CLOCK)
            assert route.wait_for_turn(start, end, timeout=30)
            seen.append(len(route.spans_between(start, end)))
    finally:
        made.shutdown()
    assert seen == [3] * 20
    assert not route.wait_for_spans(61, timeout=0)
