"""A route of the model endpoint: the exchanges it saw and the spans the agent sent it."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from plangate.harness import Message, ModelResponse, ToolDefinition
from plangate.replay._spans import SpanRecord

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


@dataclass(frozen=True, slots=True, kw_only=True)
class ObservedCall:
    """One model exchange on a route (chat completions or Responses): what was sent and said."""

    messages: tuple[Message, ...]
    """The request's messages, read from the wire."""
    tools: tuple[ToolDefinition, ...]
    """The tools the request offered."""
    response: ModelResponse | None
    """The model's answer; None when the model failed."""
    error: str | None
    """Why the model failed, as the agent was told (HTTP 500); None when it answered."""
    stream: bool
    """Whether the agent asked for a streamed answer."""
    start_ns: int
    """When the model was called, in nanoseconds since the epoch."""
    end_ns: int
    """When the model answered or failed, in nanoseconds since the epoch."""
    model_name: str
    """The model the request asked for (its `model` field; empty when absent)."""


@dataclass(slots=True, eq=False)
class Route:
    """One model behind the endpoint, at its own base URL; open one per agent run.

    Requests are told apart by the route's key in the URL, never by timing: two agents on two
    routes can call at once and each route's `calls` hold only its own exchanges, and its
    `spans` only the spans exported to its `otlp_endpoint`.

    When an agent's spans are all in: an OpenTelemetry SDK exports a span when it ends, and the
    route answers an export only once its spans are in `spans`. So every span has arrived once
    the agent's process has exited (the SDK flushes at shutdown), or once an in-process agent's
    `provider.force_flush()` has returned. While the agent runs on, `wait_for_turn` waits for
    the turn's root span: a parent ends after its children, and one SDK processor exports its
    spans in the order they ended (`BatchSpanProcessor` from one thread, batch after batch;
    `SimpleSpanProcessor` before `end()` returns), so the root comes last.
    """

    key: str
    """A random URL-safe token naming the route in its URL."""
    base_url: str
    """`{endpoint url}/r/{key}/v1`: what the agent's `OPENAI_BASE_URL` is set to."""
    calls: list[ObservedCall] = field(default_factory=list)
    """Every exchange seen on this route, in the order the model answered."""
    failure: str | None = None
    """The first model error seen on this route (None if none)."""
    spans: list[SpanRecord] = field(default_factory=list)
    """Every span exported to this route, in the order the exports arrived."""
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    _arrived: threading.Condition = field(
        default_factory=threading.Condition, init=False, repr=False
    )

    @property
    def otlp_endpoint(self) -> str:
        """`{endpoint url}/r/{key}`: what the agent's `OTEL_EXPORTER_OTLP_ENDPOINT` is set to.

        The OTLP/HTTP exporters (Python, Node, Go) append `/v1/traces` to it; an exporter given
        a full URL (`OTLPSpanExporter(endpoint=...)`) needs `otlp_endpoint + "/v1/traces"`.
        """
        return self.base_url.removesuffix("/v1")

    @property
    def tools_url(self) -> str:
        """`{endpoint url}/r/{key}/tools`: where wrapped tools ask (`PLANGATE_TOOLS_URL`).

        A call is `POST {tools_url}/NAME` with its arguments; a result to record is posted to
        `{tools_url}/NAME/result` (see `plangate.replay.agents.hermetic`).
        """
        return f"{self.otlp_endpoint}/tools"

    def spans_between(self, start_ns: int, end_ns: int) -> list[SpanRecord]:
        """The spans that started in [start_ns, end_ns], whenever they arrived.

        A slot runs one turn at a time, so a turn's spans are those that started during it;
        their own start times say so, not their arrival (a `BatchSpanProcessor` may export
        them after the turn). Times compare to the microsecond, the records' precision.

        Args:
            start_ns: The window's start, in nanoseconds since the epoch.
            end_ns: Its end, included.

        Returns:
            The spans in the order they arrived.
        """
        low, high = start_ns // 1000, end_ns // 1000
        with self._arrived:
            spans = list(self.spans)
        return [span for span in spans if low <= _micros(span) <= high]

    def wait_for_spans(self, count_at_least: int = 1, *, timeout: float) -> bool:
        """Wait until the route holds at least `count_at_least` spans.

        Args:
            count_at_least: How many spans to wait for, counting those already in.
            timeout: The most seconds to wait.

        Returns:
            Whether that many arrived in time.
        """
        with self._arrived:
            return self._arrived.wait_for(lambda: len(self.spans) >= count_at_least, timeout)

    def wait_for_turn(self, start_ns: int, end_ns: int, *, timeout: float) -> bool:
        """Wait until a root span (one with no parent) that started in the window arrived.

        Then the turn's spans are in (see the class's notes): every span of the root's tree
        ended before it and was exported first. Spans still running after their root ended,
        and spans a full `BatchSpanProcessor` queue dropped, are not waited for.

        Args:
            start_ns: The turn's start, in nanoseconds since the epoch.
            end_ns: Its end.
            timeout: The most seconds to wait (a `BatchSpanProcessor` exports every 5 s unless
                `OTEL_BSP_SCHEDULE_DELAY` says otherwise, in milliseconds).

        Returns:
            Whether such a root span arrived in time.
        """
        low, high = start_ns // 1000, end_ns // 1000

        def arrived() -> bool:
            return any(
                span.parent_span_id is None and low <= _micros(span) <= high for span in self.spans
            )

        with self._arrived:
            return self._arrived.wait_for(arrived, timeout)

    def _receive(self, spans: Sequence[SpanRecord]) -> None:
        """Append an export's spans and wake whoever waits for them."""
        with self._arrived:
            self.spans.extend(spans)
            self._arrived.notify_all()

    def _observe(self, call: ObservedCall) -> None:
        """Append `call`; a failed call sets `failure` unless an earlier one did."""
        with self._lock:
            self.calls.append(call)
            if call.error is not None and self.failure is None:
                self.failure = call.error


def _micros(span: SpanRecord) -> int:
    """A span's start in microseconds since the epoch; -1 (before any window) when unknown."""
    if span.start_time is None:
        return -1
    return (span.start_time - _EPOCH) // _MICROSECOND
