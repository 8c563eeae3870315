"""OTLP/HTTP to Phoenix that outlasts its back-pressure, and counts what happened to each batch.

Phoenix answers 503 while its ingest queue is over `PHOENIX_MAX_SPANS_QUEUE_SIZE`; the stock
OTLP exporter then retries for about ten seconds and drops the batch. `RetryingExporter` tries
the batch again, with backoff, until a generous deadline, and counts the spans exported and given
up; `HttpOutcomes` notes what every HTTP attempt got. Telemetry never breaks the run: failures
are counted and logged, never raised.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

if TYPE_CHECKING:
    import requests

logger = logging.getLogger("plangate.phoenix")

RETRYABLE = frozenset({429, 502, 503, 504})
"""HTTP answers that mean "not now": Phoenix's queue is full (503) or a proxy is."""


RETRY_DEADLINE = 120.0
"""Seconds a batch is retried for before it is given up (and counted as dropped)."""


OTLP_LOGGER = "opentelemetry.exporter.otlp.proto.http.trace_exporter"


Outcome = int | Exception | None
"""One HTTP attempt: the status code, the error raised instead, or None (nothing was sent)."""


class HttpOutcomes:
    """What the OTLP exporter's HTTP attempts got, in all and per thread (the last one)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._local = threading.local()
        self.statuses: Counter[int] = Counter()
        """Answers by status code."""
        self.errors = 0
        """Attempts that got no answer (connection refused, timeout)."""

    def begin(self) -> None:
        """Forget this thread's last outcome (before an export)."""
        self._local.last = None

    def note(self, outcome: int | Exception) -> None:
        """Count one attempt's outcome."""
        self._local.last = outcome
        with self._lock:
            if isinstance(outcome, int):
                self.statuses[outcome] += 1
            else:
                self.errors += 1

    @property
    def last(self) -> Outcome:
        """This thread's last outcome since `begin`."""
        outcome: Outcome = getattr(self._local, "last", None)
        return outcome

    @property
    def throttled(self) -> int:
        """Answers that meant "not now"."""
        with self._lock:
            return sum(n for code, n in self.statuses.items() if code in RETRYABLE)


def observed_session(outcomes: HttpOutcomes) -> requests.Session:
    """A `requests` session (the OTLP exporter's transport) that notes every attempt's outcome."""
    import requests  # here, not at the top: it costs every `plangate` command 0.2 s to import

    class ObservedSession(requests.Session):
        def send(self, request: requests.PreparedRequest, **kwargs: Any) -> requests.Response:
            try:
                response = super().send(request, **kwargs)
            except requests.RequestException as exc:
                outcomes.note(exc)
                raise
            outcomes.note(response.status_code)
            return response

    return ObservedSession()


def retryable(outcome: Outcome) -> bool:
    """A "not now" answer or no answer at all; not a rejection, not a failure to encode."""
    if isinstance(outcome, int):
        return outcome in RETRYABLE
    import requests

    return isinstance(outcome, requests.RequestException)


class RetryingExporter(SpanExporter):
    """Tries a batch again (backoff up to `deadline` seconds) while Phoenix pushes back or is away.

    Counts the spans exported and given up. Once a batch has been given up after the whole
    deadline, Phoenix is taken to be gone: later batches are given up at once (counted), so a
    dead Phoenix costs the run one deadline, not one per batch.
    """

    def __init__(
        self,
        exporter: SpanExporter,
        outcomes: HttpOutcomes,
        *,
        deadline: float = RETRY_DEADLINE,
        clock: Callable[[], float] = time.monotonic,
        first_delay: float = 0.5,
        longest_delay: float = 8.0,
    ) -> None:
        self._exporter = exporter
        self._outcomes = outcomes
        self._deadline = deadline
        self._clock = clock
        self._delays = (first_delay, longest_delay)
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._exporting = threading.local()
        self._gone = False
        self.exported = 0
        self.given_up = 0
        self.retries = 0
        self.last_done: float | None = None
        """`clock()` when the last batch was exported or given up."""

    @property
    def in_export(self) -> bool:
        """Whether this thread is inside `export` (our retries replace the stock messages)."""
        return bool(getattr(self._exporting, "active", False))

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        """Export, retrying on back-pressure and connection errors until the deadline."""
        if self._gone or self._stopping.is_set():
            return self._give_up(spans, "Phoenix is gone or the export is closing")
        self._exporting.active = True
        try:
            return self._export(spans)
        finally:
            self._exporting.active = False

    def _export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        give_up_at = self._clock() + self._deadline
        delay = self._delays[0]
        while True:
            self._outcomes.begin()
            if self._exporter.export(spans) is SpanExportResult.SUCCESS:
                with self._lock:
                    self.exported += len(spans)
                    self.last_done = self._clock()
                return SpanExportResult.SUCCESS
            outcome = self._outcomes.last
            if not retryable(outcome):
                return self._give_up(spans, f"Phoenix refused the batch ({_describe(outcome)})")
            if self._clock() + delay > give_up_at:
                self._gone = True
                return self._give_up(
                    spans, f"still failing after {self._deadline:.0f} s ({_describe(outcome)})"
                )
            with self._lock:
                self.retries += 1
            if self._stopping.wait(delay):
                return self._give_up(spans, "the export was closed while retrying")
            delay = min(delay * 2, self._delays[1])

    def _give_up(self, spans: Sequence[ReadableSpan], why: str) -> SpanExportResult:
        with self._lock:
            first = self.given_up == 0
            self.given_up += len(spans)
            self.last_done = self._clock()
        log = logger.error if first else logger.debug
        log("gave up on %d spans for Phoenix: %s", len(spans), why)
        return SpanExportResult.FAILURE

    def shutdown(self) -> None:
        """Stop retrying and shut the wrapped exporter down."""
        self._stopping.set()
        self._exporter.shutdown()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        """Nothing is buffered here."""
        return True


def _describe(outcome: Outcome) -> str:
    if isinstance(outcome, int):
        return f"HTTP {outcome}"
    if outcome is None:
        return "nothing was sent: the batch could not be encoded or is too large"
    return type(outcome).__name__


class QuietStockRetries(logging.Filter):
    """Hides the stock exporter's "retrying"/"failed" lines for batches we retry ourselves."""

    def __init__(self, exporter: RetryingExporter) -> None:
        super().__init__()
        self._exporter = exporter

    def filter(self, record: logging.LogRecord) -> bool:
        return not self._exporter.in_export


def otlp_exporter(endpoint: str, outcomes: HttpOutcomes) -> SpanExporter:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter(endpoint=endpoint, session=observed_session(outcomes))
