"""The endpoint's OTLP receiver: spans per second taken in, against reading the same spans' file.

`SPANS` spans (turns of an AGENT span, four LLM and four TOOL spans, with OpenInference
attributes of a few hundred bytes) are made once on a fake clock, then, `ROUNDS` times, each
way takes all of them in (median of the rounds, spans per second):

- through the endpoint, in batches of `BATCH` (what a `BatchSpanProcessor` sends): by the SDK's
  own `OTLPSpanExporter.export` (encoding included), as protobuf bodies over one keep-alive
  `http.client` connection (the receiver's own share), the same gzip-compressed, and as JSON;
- in process, the two ways to read a protobuf request: `spans_of_protobuf` (what the receiver
  does) and `MessageToDict` then `spans_of_request` (the JSON reader, not chosen);
- from a file: `read_otlp_json` on all the spans as one OTLP JSON file, which also builds the
  trace table; and `rows_from_spans` plus `build_table` on the spans the endpoint received, the
  same step, to set the receiver beside it.
"""

from __future__ import annotations

import gzip
import http.client
import itertools
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from google.protobuf.json_format import MessageToDict  # type: ignore[import-untyped]
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from rich.console import Console
from rich.table import Table

from plangate.harness import ScriptedModel
from plangate.replay import build_table, rows_from_spans
from plangate.replay.endpoint import ModelEndpoint, Route
from plangate.replay.importers import otlp_json_from_spans, spans_of_protobuf, spans_of_request
from plangate.replay.importers._otlp import read_otlp_json

SPANS = 10_000
BATCH = 512
ROUNDS = 7
TEXT = "The error rate on checkout rose to 4% after the 14:02 deploy; rolling back. " * 3


@dataclass(frozen=True, slots=True)
class ReceiverTiming:
    """One way of taking the spans in: seconds per round."""

    name: str
    spans: int
    seconds: list[float] = field(repr=False)

    @property
    def per_second(self) -> float:
        return self.spans / statistics.median(self.seconds)

    def as_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "spans": self.spans,
            "median_s": round(statistics.median(self.seconds), 4),
            "min_s": round(min(self.seconds), 4),
            "spans_per_second": round(self.per_second),
        }


def make_spans(count: int = SPANS) -> list[ReadableSpan]:
    """`count` spans: turns of an AGENT, four LLM and four TOOL spans, one µs apart."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(shutdown_on_exit=False)
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer, clock = provider.get_tracer("bench"), itertools.count(1_800_000_000_000_000_000, 1000)

    def span(name: str, **attributes: object) -> None:
        tracer.start_span(name, attributes=attributes, start_time=next(clock)).end(next(clock))  # type: ignore[arg-type]

    for turn in itertools.count():
        if len(memory.get_finished_spans()) >= count:
            break
        span("turn", **{"openinference.span.kind": "AGENT", "session.id": f"s{turn // 10}"})
        for call in range(4):
            span("chat", **{"openinference.span.kind": "LLM", "llm.model_name": "gpt-4o",
                            "llm.token_count.prompt": 812, "llm.token_count.completion": 64,
                            "output.value": TEXT})  # fmt: skip
            span("search", **{"openinference.span.kind": "TOOL", "tool.name": "search",
                              "tool.id": f"call_{call}", "output.value": TEXT,
                              "input.value": json.dumps({"query": "error rate", "limit": call})})  # fmt: skip
    provider.shutdown()
    return list(memory.get_finished_spans()[:count])


def _batches(spans: list[ReadableSpan]) -> list[list[ReadableSpan]]:
    return [spans[at : at + BATCH] for at in range(0, len(spans), BATCH)]


def _poster(
    endpoint: ModelEndpoint, route: Route, headers: dict[str, str]
) -> Callable[[bytes], None]:
    host, port = endpoint.url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port))
    path = f"/r/{route.key}/v1/traces"

    def post(body: bytes) -> None:
        connection.request("POST", path, body, headers)
        reply = connection.getresponse()
        reply.read()
        assert reply.status == 200, reply.status

    return post


def _timed(work: Callable[[], object]) -> float:
    start = time.perf_counter()
    work()
    return time.perf_counter() - start


def run_all(count: int = SPANS, rounds: int = ROUNDS) -> list[ReceiverTiming]:
    """Time every way over `rounds` rounds, each way once a round."""
    spans = make_spans(count)
    batches = _batches(spans)
    protobuf = [encode_spans(batch).SerializeToString() for batch in batches]
    zipped = [gzip.compress(body, compresslevel=6) for body in protobuf]
    as_json = [json.dumps(otlp_json_from_spans(batch)).encode() for batch in batches]
    times: dict[str, list[float]] = {}
    with ModelEndpoint() as endpoint, tempfile.TemporaryDirectory() as folder:
        file = Path(folder) / "spans.json"
        file.write_text(json.dumps(otlp_json_from_spans(spans)), encoding="utf-8")
        received: list[Route] = []

        def through(headers: dict[str, str], bodies: list[bytes]) -> Callable[[], None]:
            def run() -> None:
                route = endpoint.open_route(ScriptedModel([]))
                post = _poster(endpoint, route, headers)
                for body in bodies:
                    post(body)
                assert len(route.spans) == count
                received.append(route)

            return run

        def exporter() -> None:
            route = endpoint.open_route(ScriptedModel([]))
            export = OTLPSpanExporter(endpoint=route.otlp_endpoint + "/v1/traces")
            for batch in batches:
                export.export(batch)
            export.shutdown()  # type: ignore[no-untyped-call]
            assert len(route.spans) == count

        protobuf_type = {"Content-Type": "application/x-protobuf"}
        ways: dict[str, Callable[[], object]] = {
            "endpoint: OTLPSpanExporter.export (encodes too)": exporter,
            "endpoint: protobuf, http.client keep-alive": through(protobuf_type, protobuf),
            "endpoint: protobuf gzip, http.client keep-alive": through(
                {**protobuf_type, "Content-Encoding": "gzip"}, zipped
            ),
            "endpoint: JSON, http.client keep-alive": through(
                {"Content-Type": "application/json"}, as_json
            ),
            "in process: spans_of_protobuf": lambda: [
                spans_of_protobuf(body, "bench") for body in protobuf
            ],
            "in process: MessageToDict + spans_of_request": lambda: [
                spans_of_request(MessageToDict(ExportTraceServiceRequest.FromString(b)), "bench")
                for b in protobuf
            ],
            "read_otlp_json (file to trace table)": lambda: read_otlp_json(file),
            "rows_from_spans + build_table (received spans to trace table)": lambda: build_table(
                rows_from_spans(received[-1].spans, source="otlp")
            ),
        }
        for _ in range(rounds):
            for name, work in ways.items():
                times.setdefault(name, []).append(_timed(work))
    return [ReceiverTiming(name, count, seconds) for name, seconds in times.items()]


def table(results: list[ReceiverTiming]) -> Table:
    """The timings as a table, spans per second."""
    grid = Table(title=f"OTLP receiver: {results[0].spans:,} spans, batches of {BATCH}")
    for column in ("way", "s median", "s min", "spans/s"):
        grid.add_column(column, justify="left" if column == "way" else "right")
    for r in results:
        row = r.as_dict()
        grid.add_row(
            r.name, f"{row['median_s']:.3f}", f"{row['min_s']:.3f}", f"{r.per_second:,.0f}"
        )
    return grid


if __name__ == "__main__":
    Console(width=None if sys.stdout.isatty() else 150).print(table(run_all()))
