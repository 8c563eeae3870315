"""Span handles: the ways the harness makes a span, each guarded so that tracing never breaks a run.

`CurrentSpan` is current while its block runs (spans started inside nest in it); `LateSpan` is
made in one call when its block ends, dated from its start (the cheapest); `NO_SPAN` records
nothing. Strings are bounded to `MAX_CHARS`; every call into OpenTelemetry is guarded: a failure
is logged, never raised.
"""

from __future__ import annotations

import logging
import time
import weakref
from collections.abc import Mapping
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, Status, StatusCode, Tracer, TracerProvider

logger = logging.getLogger("plangate.tracing")

MAX_CHARS = 16_000
"""Longest string put in an attribute; longer ones are cut with a note of how much was cut."""

_INTERNAL = trace.SpanKind.INTERNAL


def bounded(text: str) -> str:
    """`text`, cut to `MAX_CHARS` with a note when longer."""
    if len(text) <= MAX_CHARS:
        return text
    return f"{text[:MAX_CHARS]}…[{len(text) - MAX_CHARS} more characters]"


class SpanHandle:
    """A span the loop may add to, used as a context manager; this one does nothing (no tracing).

    Entering starts the span and exiting ends it, however the block ends.
    """

    __slots__ = ()

    recording = False
    """Whether anything is recorded: callers skip building attributes when not."""

    def __enter__(self) -> SpanHandle:
        return self

    def __exit__(self, *exc_info: object) -> None:
        return None

    def set(self, attributes: Mapping[str, Any]) -> None:
        """Add attributes."""

    def event(self, name: str, attributes: Mapping[str, Any]) -> None:
        """Add an event."""

    def error(self, description: str) -> None:
        """Mark the span as failed."""


NO_SPAN = SpanHandle()


class CurrentSpan(SpanHandle):
    """A span started on entry and current until exit, so that spans started inside nest in it."""

    __slots__ = ("_attributes", "_name", "_token", "_tracer", "span")

    recording = True

    def __init__(self, tracer: Tracer, name: str, attributes: Mapping[str, Any]) -> None:
        self._tracer = tracer
        self._name = name
        self._attributes = attributes
        self._token: object = None
        self.span: Span | None = None

    def __enter__(self) -> CurrentSpan:
        try:
            self.span = self._tracer.start_span(self._name, None, _INTERNAL, self._attributes)
            self._token = otel_context.attach(trace.set_span_in_context(self.span))
        except Exception:  # telemetry must never break a run
            _log_failure("starting span", self._name)
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._token is not None:
            _guard(otel_context.detach, self._token)
        if self.span is not None:
            _guard(self.span.end)

    def set(self, attributes: Mapping[str, Any]) -> None:
        """Add attributes."""
        if self.span is not None:
            _guard(self.span.set_attributes, attributes)

    def event(self, name: str, attributes: Mapping[str, Any]) -> None:
        """Add an event."""
        if self.span is not None:
            _guard(self.span.add_event, name, attributes)

    def error(self, description: str) -> None:
        """Mark the span as failed."""
        if self.span is not None:
            _guard(self.span.set_status, Status(StatusCode.ERROR, bounded(description)))


class LateSpan(SpanHandle):
    """A span made when its block ends, dated from when the block began.

    Its attributes, events and status are kept until then and handed to OpenTelemetry in one
    `start_span` call, with no context switch: the cheapest span to make, but no span started
    inside the block can nest in it. For blocks that start no spans (a model call, a tool that
    starts none).
    """

    __slots__ = ("_attributes", "_error", "_events", "_name", "_parent", "_start", "_tracer")

    recording = True

    def __init__(self, tracer: Tracer, name: str, attributes: dict[str, Any]) -> None:
        self._tracer = tracer
        self._name = name
        self._attributes = attributes
        self._events: list[tuple[str, dict[str, Any], int]] = []
        self._error: str | None = None
        self._start = 0
        self._parent: otel_context.Context | None = None

    def __enter__(self) -> LateSpan:
        self._start = time.time_ns()
        self._parent = otel_context.get_current()  # the parent is what is current at the start
        return self

    def __exit__(self, *exc_info: object) -> None:
        end = time.time_ns()
        try:
            span = self._tracer.start_span(
                self._name, self._parent, _INTERNAL, self._attributes, start_time=self._start
            )
            for name, attributes, timestamp in self._events:
                span.add_event(name, attributes, timestamp)
            if self._error is not None:
                span.set_status(Status(StatusCode.ERROR, bounded(self._error)))
            span.end(end)
        except Exception:  # telemetry must never break a run
            _log_failure("recording span", self._name)

    def set(self, attributes: Mapping[str, Any]) -> None:
        """Add attributes."""
        self._attributes.update(attributes)

    def event(self, name: str, attributes: Mapping[str, Any]) -> None:
        """Add an event."""
        self._events.append((name, dict(attributes), time.time_ns()))

    def error(self, description: str) -> None:
        """Mark the span as failed."""
        self._error = description


_TRACERS: weakref.WeakKeyDictionary[TracerProvider, Tracer] = weakref.WeakKeyDictionary()


def tracer_of(provider: TracerProvider) -> Tracer:
    """The harness's tracer from `provider`, asked for once per provider.

    Asking the SDK's provider for a tracer costs more than the rest of a session's set-up (it
    builds a scope and resets the process's warning filters on every call).
    """
    try:
        return _TRACERS[provider]
    except KeyError:
        tracer = _TRACERS[provider] = provider.get_tracer("plangate.harness")
        return tracer
    except TypeError:  # a provider that cannot be weakly referenced: ask every time
        return provider.get_tracer("plangate.harness")


def _guard(function: Any, *args: Any) -> Any:
    try:
        return function(*args)
    except Exception:  # telemetry must never break a run
        _log_failure("calling", getattr(function, "__name__", "?"))
        return None


def _log_failure(doing: str, what: str) -> None:
    logger.exception("tracing failed %s %s; the run goes on", doing, what)
