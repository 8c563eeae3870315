"""Builders for the Phoenix tests: a replayed golden turn sent to Phoenix, waiting for ingestion."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from plangate.ci import telemetry
from plangate.ci.phoenix._server import PhoenixServer
from plangate.replay import ReferenceAgent, ReplayResult, read_dataset, replay_turn
from tests.conftest import REPO

GOLDEN = REPO / "datasets" / "observability-core"
INGEST_TIMEOUT = 180.0
"""Seconds to wait for spans to become queryable (ingest is ~140 spans/s, asynchronous)."""


@dataclass(frozen=True, slots=True)
class SentTurn:
    """A golden turn replayed with its spans sent to Phoenix."""

    result: ReplayResult
    span_ids: frozenset[str]
    """The spans sent, as 16 hex digits."""
    trace_id: str


class Namespacing(SpanProcessor):
    """Stamps a namespaced `session.id` (`PREFIX:SESSION`) and the original in
    `plangate.session_id`, as `plangate.ci.phoenix._export` does to keep runs of one session apart."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        original = (span.attributes or {}).get("session.id")
        if isinstance(original, str):
            span.set_attribute("session.id", f"{self.prefix}:{original}")
            span.set_attribute("plangate.session_id", original)

    def on_end(self, span: ReadableSpan) -> None:
        return None


def send_replayed_turn(
    server: PhoenixServer,
    project: str,
    session: str = "obs-008",
    turn: int = 0,
    *,
    namespace: str | None = None,
    dataset: Path = GOLDEN,
) -> SentTurn:
    """Replay a golden turn with its spans going to `project`; waits until Phoenix has them all."""
    wiring = telemetry("otlp", endpoint=server.traces_url, project=project)
    assert wiring.provider is not None
    if namespace is not None:
        wiring.provider.add_span_processor(Namespacing(namespace))
    memory = InMemorySpanExporter()
    wiring.provider.add_span_processor(SimpleSpanProcessor(memory))
    try:
        result = asyncio.run(
            replay_turn(
                read_dataset(dataset),
                session,
                turn,
                agent=ReferenceAgent(tracer_provider=wiring.provider),
            )  # fmt: skip
        )
    finally:
        wiring.shutdown()
    assert result.error is None and result.divergence is None, result.to_dict()
    spans = memory.get_finished_spans()
    ids = frozenset(f"{s.context.span_id:016x}" for s in spans)
    trace_ids = {f"{s.context.trace_id:032x}" for s in spans}
    assert len(trace_ids) == 1
    wait_for_spans(server, project, ids)
    return SentTurn(result=result, span_ids=ids, trace_id=trace_ids.pop())


def wait_for_spans(server: PhoenixServer, project: str, span_ids: Collection[str]) -> None:
    """Poll Phoenix until every one of `span_ids` is queryable in `project`."""
    import httpx
    from phoenix.client import Client

    client = Client(base_url=server.url)
    deadline = time.monotonic() + INGEST_TIMEOUT
    found: set[str] = set()
    while True:
        try:
            listed = client.spans.get_spans(project_identifier=project, limit=sys.maxsize)
            found = {s["context"]["span_id"] for s in listed}
        except httpx.HTTPStatusError:  # 404 until the project's first span is stored
            found = set()
        if set(span_ids) <= found:
            return
        assert time.monotonic() < deadline, (
            f"{len(set(span_ids) - found)} of {len(span_ids)} spans not in Phoenix project "
            f"{project!r} after {INGEST_TIMEOUT:.0f} s"
        )
        time.sleep(0.5)


def tool_calls(result: ReplayResult) -> list[tuple[str, Any]]:
    """The turn's tool calls as (name, arguments)."""
    assert result.result is not None
    return [(call.name, call.arguments) for call in result.result.tool_calls]
