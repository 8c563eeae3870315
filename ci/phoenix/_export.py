"""Export plangate's spans to Phoenix over OTLP/HTTP, and check that every one of them arrived.

Phoenix answers 503 while its ingest queue is over `PHOENIX_MAX_SPANS_QUEUE_SIZE`; the stock
OTLP exporter then retries for about ten seconds and drops the batch. Here the batch is tried
again, with backoff, until a generous deadline, and every span is accounted for: the spans
handed to the export (`sent`), those Phoenix accepted (`exported`), those lost on the way
(`dropped`: queue full, retries exhausted, Phoenix gone) and, after the run, those Phoenix
actually holds (`arrived`, found by span id; ingestion is asynchronous, so this polls).

Phoenix session ids are unique across projects, so the spans sent to Phoenix carry a namespaced
`session.id` (`DATASET:VARIANT:RUN:SESSION`, or `run:RUN:SESSION` for `plangate run`) and the
original id in `plangate.session_id`. The separator is `:`, not `/`: the Phoenix client refuses
a session id holding `/`, `?` or `#` (`sessions.get` raises "Cannot encode string containing
'/' for URL path"), so those are replaced by `_`.
The namespacing is done on copies of the finished spans: the agent, the trace table and the
evaluators keep seeing the original ids.

Like every telemetry path this never breaks the run: failures are counted, logged and reported.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanLimits, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter

from plangate.ci.phoenix._client import check_phoenix, missing_spans
from plangate.ci.phoenix._transport import (
    OTLP_LOGGER,
    RETRY_DEADLINE,
    HttpOutcomes,
    QuietStockRetries,
    RetryingExporter,
    otlp_exporter,
)
from plangate.ci.phoenix.names import (
    DEFAULT_PROJECT,
    SEPARATOR,
    TRACES_PATH,
    joined,
    namespace,
    new_run_id,
    segment,
    server_url,
)
from plangate.harness.semconv import ORIGINAL_SESSION_ID, PROJECT_NAME, SESSION_ID

if TYPE_CHECKING:
    from plangate.replay import Redactor

logger = logging.getLogger("plangate.phoenix")


QUEUE_SIZE = 100_000
"""Spans the batch processor holds before it drops (and we count) one."""
BATCH_SIZE = 512


@dataclass(frozen=True, slots=True, kw_only=True)
class ExportReport:
    """What happened to the spans of one Phoenix export."""

    url: str
    project: str
    run_id: str
    sent: int
    """Spans handed to the export."""
    exported: int
    """Spans Phoenix accepted (HTTP 2xx)."""
    dropped: int
    """Spans that never reached Phoenix: queue full, retries exhausted, or Phoenix gone."""
    throttled: int
    """Phoenix's "not now" answers (503/429): back-pressure, met by retrying."""
    retries: int
    """Batches sent again after a failed attempt."""
    arrived: int | None
    """Spans found in Phoenix after the run (None: not checked)."""
    missing_ids: tuple[str, ...] = ()
    """Span ids (hex) sent but not found in Phoenix."""
    export_seconds: float = 0.0
    """From the export's start to its last span accepted (or given up)."""
    wait_seconds: float = 0.0
    """How long the arrival check waited for Phoenix to ingest."""
    problem: str | None = None
    """Why the arrival check could not finish, if it could not."""

    @property
    def missing(self) -> int:
        """Spans sent but not in Phoenix (the dropped ones included); 0 when not checked."""
        return len(self.missing_ids)

    @property
    def complete(self) -> bool:
        """Every span sent is in Phoenix."""
        return self.arrived == self.sent

    def summary(self) -> str:
        """One line for the command's stderr: the counts, back-pressure, and what arrived."""
        where = f"{self.url} (project {self.project!r}, run {self.run_id})"
        text = f"phoenix: {self.sent} spans sent to {where}, {self.exported} exported"
        if self.dropped:
            text += f", {self.dropped} DROPPED (queue full, or not accepted in time)"
        if self.throttled:
            text += f"; Phoenix pushed back {self.throttled} times (HTTP 503/429), met by retrying"
        if self.arrived is None:
            text += f"; arrival not checked: {self.problem or 'not asked for'}"
        elif self.complete:
            text += f"; {self.arrived} arrived (ingested {self.wait_seconds:.0f} s after the run)"
        else:
            text += f"; {self.arrived} arrived, {self.missing} MISSING"
            text += f" ({self.problem})" if self.problem else ""
        return text


class _Namespaced(SpanProcessor):
    """Hands copies of finished spans to the export, their session ids in one namespace."""

    def __init__(self, export: PhoenixExport, namespace: str) -> None:
        self._export = export
        self._namespace = namespace

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        """Nothing: the span is shared with the other processors until it ends."""

    def on_end(self, span: ReadableSpan) -> None:
        """Export a namespaced copy; a finished trace (a turn) is flushed at once."""
        try:
            self._export.accept(span, self._namespace)
            if span.parent is None:
                self._export.flush()
        except Exception:  # telemetry must never break the traced program
            logger.exception("could not hand span %r to the Phoenix export", span.name)

    def shutdown(self) -> None:
        """Nothing: the export outlives the tracer providers it is attached to."""

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        """Flush the export."""
        return self._export.flush()


class PhoenixExport:
    """Spans to one Phoenix project, counted; `close()` checks that they all arrived.

    Attach it with `provider` (a tracer provider of its own, for `plangate run`) or
    `processor(...)` (an extra span processor for another provider, e.g. the trace table's).

    Args:
        url: Phoenix's base URL (`http://127.0.0.1:6006`); a `/v1/traces` suffix is dropped.
        project: The Phoenix project (resource attribute `openinference.project.name`).
        run_id: Names this run in the session ids (default: the time and a random suffix).
        retry_deadline: Seconds a batch is retried for while Phoenix pushes back or is away.
        queue_size: Spans held before one is dropped (and counted).
        batch_delay: Seconds before a partial batch is sent (a finished trace is sent at once).
        exporter: Instead of OTLP/HTTP to `url` (tests); Phoenix's health is then not checked.
        clock: Seconds, monotonic.
        redact: The user's own secret patterns, besides the built-in ones.

    Raises:
        PhoenixError: Phoenix does not answer at `url`; the message says how to start one.
    """

    def __init__(
        self,
        url: str,
        *,
        project: str = DEFAULT_PROJECT,
        run_id: str | None = None,
        retry_deadline: float = RETRY_DEADLINE,
        queue_size: int = QUEUE_SIZE,
        batch_delay: float = 0.5,
        exporter: SpanExporter | None = None,
        clock: Callable[[], float] = time.monotonic,
        redact: Sequence[str] = (),
    ) -> None:
        from plangate.replay import redactor_for  # here: `run` without an export never loads it

        self.url = server_url(url)
        self.redactor = redactor_for(redact)
        """Redacts every span before it is queued (plus the user's own `redact` patterns)."""
        self.project = project
        self.run_id = run_id or new_run_id()
        self._clock = clock
        self._started = clock()
        self.outcomes = HttpOutcomes()
        if exporter is None:
            check_phoenix(self.url)
            exporter = otlp_exporter(self.url + TRACES_PATH, self.outcomes)
        self._exporter = RetryingExporter(
            exporter, self.outcomes, deadline=retry_deadline, clock=clock
        )
        self._batches = BatchSpanProcessor(
            self._exporter,
            max_queue_size=queue_size,
            max_export_batch_size=min(BATCH_SIZE, queue_size),
            schedule_delay_millis=batch_delay * 1000,
        )
        self._quiet = QuietStockRetries(self._exporter)
        logging.getLogger(OTLP_LOGGER).addFilter(self._quiet)
        self._lock = threading.Lock()
        self._sent: list[str] = []
        self._resources: dict[int, tuple[Resource, Resource]] = {}
        self._provider: TracerProvider | None = None
        self._report: ExportReport | None = None

    @property
    def provider(self) -> TracerProvider:
        """A tracer provider whose spans go (only) here, namespaced `run:RUN:SESSION`."""
        if self._provider is None:
            self._provider = TracerProvider(
                resource=Resource.create({PROJECT_NAME: self.project}),
                span_limits=SpanLimits(max_span_attributes=10_000),
            )
            self._provider.add_span_processor(self.processor())
        return self._provider

    def namespace(
        self, *, dataset: str | None = None, variant: str | None = None, run: str | None = None
    ) -> str:
        """`DATASET:VARIANT:RUN` (RUN is the run id, then `-run` if given), or `run:RUN`."""
        run_part = self.run_id if run is None else f"{self.run_id}-{segment(run)}"
        if dataset is None:
            return f"run{SEPARATOR}{run_part}"
        return namespace(dataset, variant or "recorded", run_part)

    def session_id(
        self,
        session_id: str,
        *,
        dataset: str | None = None,
        variant: str | None = None,
        run: str | None = None,
    ) -> str:
        """The session id Phoenix shows for `session_id` in this namespace."""
        return joined(self.namespace(dataset=dataset, variant=variant, run=run), session_id)

    def processor(
        self, *, dataset: str | None = None, variant: str | None = None, run: str | None = None
    ) -> SpanProcessor:
        """A span processor for any tracer provider: its spans come here, namespaced."""
        return _Namespaced(self, self.namespace(dataset=dataset, variant=variant, run=run))

    def accept(self, span: ReadableSpan, namespace: str) -> None:
        """Queue a copy of a finished span, its session id in `namespace`."""
        if span.context is None:
            return
        with self._lock:
            if self._report is not None:
                logger.warning("span %r ended after the Phoenix export closed", span.name)
                return
            self._sent.append(format(span.context.span_id, "016x"))
            resource = self._resource(span.resource)
        self._batches.on_end(namespaced_span(span, namespace, resource, self.redactor))

    def _resource(self, original: Resource) -> Resource:
        kept = self._resources.get(id(original))
        if kept is None:  # the original stays referenced, so its id is not reused
            kept = (original, original.merge(Resource({PROJECT_NAME: self.project})))
            self._resources[id(original)] = kept
        return kept[1]

    def flush(self) -> bool:
        """Export every queued span now (retrying as needed); False after `close`."""
        return self._batches.force_flush()

    def close(self, *, verify: bool = True, timeout: float | None = None) -> ExportReport:
        """Flush, stop, and (with `verify`) wait until every span is found in Phoenix.

        Args:
            verify: Query Phoenix for the spans sent.
            timeout: Seconds to wait for them (default: 30 + one second per 50 spans).

        Returns:
            The report; a second call returns the same one.
        """
        with self._lock:
            if self._report is not None:
                return self._report
        if self._provider is not None:
            self._provider.force_flush()
        self._batches.force_flush()
        self._batches.shutdown()  # type: ignore[no-untyped-call]
        logging.getLogger(OTLP_LOGGER).removeFilter(self._quiet)
        with self._lock:
            sent = list(self._sent)
        report = self._counts(len(sent))
        if verify:
            report = self._verify(report, sent, timeout)
        with self._lock:
            self._report = report
        return report

    def _counts(self, sent: int) -> ExportReport:
        exporter = self._exporter
        done = exporter.last_done if exporter.last_done is not None else self._started
        return ExportReport(
            url=self.url,
            project=self.project,
            run_id=self.run_id,
            sent=sent,
            exported=exporter.exported,
            # Given up after retrying, or dropped from a full queue: never accepted either way.
            dropped=sent - exporter.exported,
            throttled=self.outcomes.throttled,
            retries=exporter.retries,
            arrived=None,
            export_seconds=done - self._started,
        )

    def _verify(self, report: ExportReport, sent: list[str], timeout: float | None) -> ExportReport:
        limit = timeout if timeout is not None else 30.0 + len(sent) / 50
        start = self._clock()
        try:
            missing = missing_spans(self.url, self.project, sent, timeout=limit, clock=self._clock)
            problem = None if not missing else f"not in Phoenix after {limit:.0f} s"
        except Exception as exc:  # a failed check is reported, never raised into the run
            return replace(report, problem=f"could not query Phoenix: {exc}")
        return replace(
            report,
            arrived=len(sent) - len(missing),
            missing_ids=tuple(missing),
            wait_seconds=self._clock() - start,
            problem=problem,
        )


def namespaced_span(
    span: ReadableSpan, namespace: str, resource: Resource, redactor: Redactor | None = None
) -> ReadableSpan:
    """A copy of `span` for Phoenix: `session.id` namespaced, the project, secrets redacted.

    The original session id is kept in `plangate.session_id`; nothing reaches Phoenix
    unredacted.
    """
    from plangate.replay import default_redactor, redacted_span

    attributes = dict(span.attributes or {})
    original = attributes.get(SESSION_ID)
    if isinstance(original, str):
        attributes[SESSION_ID] = joined(namespace, original)
        attributes[ORIGINAL_SESSION_ID] = original
    return redacted_span(
        span, redactor or default_redactor(), attributes=attributes, resource=resource
    )


def with_export(
    provider: TracerProvider | None, export: PhoenixExport | None
) -> TracerProvider | None:
    """`provider` with the export attached; the export's own provider when there is none."""
    if export is None:
        return provider
    if provider is None:
        return export.provider
    provider.add_span_processor(export.processor())
    return provider


def replay_processor(
    export: PhoenixExport | None,
    dataset: Any,
    session_id: str,
    variant: str | None,
    run: str | None = None,
) -> SpanProcessor | None:
    """The span processor of one replayed turn of `dataset` (a `GoldenDataset`), if exporting.

    The namespace is the dataset's name and the variant replayed (default: the session's
    recording variant).
    """
    if export is None:
        return None
    chosen = variant or dataset.session(session_id)["variant"]
    return export.processor(dataset=dataset.name, variant=chosen, run=run)
