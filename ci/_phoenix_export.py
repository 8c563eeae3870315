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

import argparse
import logging
import os
import secrets
import sys
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanLimits, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from plangate.ci._phoenix_server import PhoenixError

if TYPE_CHECKING:
    import requests

logger = logging.getLogger("plangate.phoenix")

URL_ENV = "PLANGATE_PHOENIX_URL"
PROJECT_ENV = "PLANGATE_PHOENIX_PROJECT"
DEFAULT_PROJECT = "plangate"
PROJECT_NAME = "openinference.project.name"
SESSION_ID = "session.id"
ORIGINAL_SESSION_ID = "plangate.session_id"
TRACES_PATH = "/v1/traces"
SEPARATOR = ":"
"""Between the parts of a namespaced session id."""
UNSAFE = str.maketrans({"/": "_", "?": "_", "#": "_"})

RETRYABLE = frozenset({429, 502, 503, 504})
"""HTTP answers that mean "not now": Phoenix's queue is full (503) or a proxy is."""
QUEUE_SIZE = 100_000
"""Spans the batch processor holds before it drops (and we count) one."""
BATCH_SIZE = 512
RETRY_DEADLINE = 120.0
"""Seconds a batch is retried for before it is given up (and counted as dropped)."""
CHUNK = 100
"""Span ids per arrival query (Phoenix's own limit per request)."""
OTLP_LOGGER = "opentelemetry.exporter.otlp.proto.http.trace_exporter"

Outcome = int | Exception | None
"""One HTTP attempt: the status code, the error raised instead, or None (nothing was sent)."""


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


class _QuietStockRetries(logging.Filter):
    """Hides the stock exporter's "retrying"/"failed" lines for batches we retry ourselves."""

    def __init__(self, exporter: RetryingExporter) -> None:
        super().__init__()
        self._exporter = exporter

    def filter(self, record: logging.LogRecord) -> bool:
        return not self._exporter.in_export


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
    ) -> None:
        self.url = base_url(url)
        self.project = project
        self.run_id = run_id or new_run_id()
        self._clock = clock
        self._started = clock()
        self.outcomes = HttpOutcomes()
        if exporter is None:
            check_phoenix(self.url)
            exporter = _otlp_exporter(self.url + TRACES_PATH, self.outcomes)
        self._exporter = RetryingExporter(
            exporter, self.outcomes, deadline=retry_deadline, clock=clock
        )
        self._batches = BatchSpanProcessor(
            self._exporter,
            max_queue_size=queue_size,
            max_export_batch_size=min(BATCH_SIZE, queue_size),
            schedule_delay_millis=batch_delay * 1000,
        )
        self._quiet = _QuietStockRetries(self._exporter)
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
        run_part = self.run_id if run is None else f"{self.run_id}-{_segment(run)}"
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
        self._batches.on_end(namespaced_span(span, namespace, resource))

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
            missing = wait_for_spans(self.url, self.project, sent, timeout=limit, clock=self._clock)
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


def namespaced_span(span: ReadableSpan, namespace: str, resource: Resource) -> ReadableSpan:
    """A copy of `span` for Phoenix: `session.id` namespaced, the original kept, the project."""
    attributes = dict(span.attributes or {})
    original = attributes.get(SESSION_ID)
    if isinstance(original, str):
        attributes[SESSION_ID] = joined(namespace, original)
        attributes[ORIGINAL_SESSION_ID] = original
    return ReadableSpan(
        name=span.name,
        context=span.context,
        parent=span.parent,
        resource=resource,
        attributes=attributes,
        events=span.events,
        links=span.links,
        kind=span.kind,
        status=span.status,
        start_time=span.start_time,
        end_time=span.end_time,
        instrumentation_scope=span.instrumentation_scope,
    )


def _otlp_exporter(endpoint: str, outcomes: HttpOutcomes) -> SpanExporter:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter(endpoint=endpoint, session=observed_session(outcomes))


def namespace(dataset: str, variant: str, run: str) -> str:
    """`DATASET:VARIANT:RUN`, the prefix of the session ids of one upload or replay run."""
    return SEPARATOR.join(_segment(part) for part in (dataset, variant, run))


def _segment(text: str) -> str:
    """One part of a namespace: a variant file's stem; no separator, no `/?#`."""
    name = Path(text).stem if text.endswith(".toml") else text
    return safe(name.replace(SEPARATOR, "_"))


def joined(namespace: str, session_id: str) -> str:
    """`NAMESPACE:SESSION`, safe for the Phoenix client's URL paths."""
    return safe(f"{namespace}{SEPARATOR}{session_id}")


def safe(text: str) -> str:
    """Without the characters the Phoenix client cannot put in a URL path."""
    return text.translate(UNSAFE)


def base_url(url: str) -> str:
    """`url` without a trailing slash or `/v1/traces`."""
    url = url.rstrip("/")
    return url[: -len(TRACES_PATH)] if url.endswith(TRACES_PATH) else url


def new_run_id() -> str:
    """A short run id: UTC time and a random suffix, e.g. `20250301T101502-3fa9`."""
    return f"{datetime.now(UTC):%Y%m%dT%H%M%S}-{secrets.token_hex(2)}"


def check_phoenix(url: str, timeout: float = 5.0) -> None:
    """Raise a `PhoenixError` naming `url` unless Phoenix answers `/healthz`."""
    try:
        with urllib.request.urlopen(f"{url}/healthz", timeout=timeout) as response:
            if response.status == 200:
                return
            reason = f"HTTP {response.status}"
    except urllib.error.HTTPError as exc:
        reason = f"HTTP {exc.code}"
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = str(getattr(exc, "reason", exc))
    raise PhoenixError(
        f"Phoenix is not reachable at {url} ({reason}): start one with `plangate phoenix up` "
        f"or pass the URL of a running one with --phoenix (or {URL_ENV})"
    )


def wait_for_spans(
    url: str,
    project: str,
    span_ids: Sequence[str],
    *,
    timeout: float,
    clock: Callable[[], float] = time.monotonic,
) -> list[str]:
    """Poll Phoenix until it holds every span id or `timeout` passes; the ids still missing."""
    from phoenix.client import Client

    found, _ = poll_spans(Client(base_url=url), project, span_ids, timeout=timeout, clock=clock)
    return [span_id for span_id in dict.fromkeys(span_ids) if span_id not in found]


def poll_spans(
    client: Any,
    project: str,
    span_ids: Iterable[str],
    *,
    timeout: float,
    clock: Callable[[], float] = time.monotonic,
) -> tuple[dict[str, Any], bool]:
    """Poll until Phoenix holds every span id or `timeout` passes.

    Returns the stored spans (REST form) by span id, and whether the project exists: a project
    none of whose spans are stored yet answers 404. Ingestion is asynchronous, so the pauses
    between polls grow from a quarter of a second to two.
    """
    import httpx

    wanted = list(dict.fromkeys(span_ids))
    found: dict[str, Any] = {}
    project_seen = False
    deadline = clock() + timeout
    pause = 0.25
    while True:
        missing = [span_id for span_id in wanted if span_id not in found]
        for start in range(0, len(missing), CHUNK):
            chunk = missing[start : start + CHUNK]
            try:
                spans = client.spans.get_spans(
                    project_identifier=project, span_ids=chunk, limit=len(chunk), timeout=30
                )
            except httpx.HTTPStatusError as exc:
                if exc.response.status_code == 404:
                    break
                raise
            project_seen = True
            found.update((span["context"]["span_id"], span) for span in spans)
        if len(found) == len(wanted) or clock() + pause > deadline:
            return found, project_seen
        time.sleep(pause)
        pause = min(pause * 1.5, 2.0)


def add_phoenix_options(parser: argparse.ArgumentParser) -> None:
    """`--phoenix URL` and `--phoenix-project NAME`."""
    parser.add_argument(
        "--phoenix",
        metavar="URL",
        default=None,
        help=f"also export spans to this Phoenix and check they all arrived (default: ${URL_ENV})",
    )
    parser.add_argument(
        "--phoenix-project",
        metavar="NAME",
        default=None,
        help=f"Phoenix project (default: ${PROJECT_ENV} or {DEFAULT_PROJECT})",
    )


@contextmanager
def exporting(args: argparse.Namespace) -> Iterator[PhoenixExport | None]:
    """The export `--phoenix` asks for (None without one), for the length of the block.

    Closed and reported when the block ends, however it ends; closing waits until every
    exported span has arrived.
    """
    export = open_export(args)
    try:
        yield export
    finally:
        close_export(export)


def open_export(args: argparse.Namespace) -> PhoenixExport | None:
    """The export `--phoenix` (or its variable) asks for; None when none is, or Phoenix is down.

    A Phoenix that does not answer is reported on stderr and the command goes on without it.
    """
    url = getattr(args, "phoenix", None) or os.environ.get(URL_ENV)
    if not url:
        return None
    project = getattr(args, "phoenix_project", None) or os.environ.get(PROJECT_ENV)
    try:
        export = PhoenixExport(url, project=project or DEFAULT_PROJECT)
    except PhoenixError as exc:
        print(f"plangate: error: {exc}; going on without the Phoenix export", file=sys.stderr)
        return None
    print(
        f"phoenix: exporting spans to {export.url}, project {export.project!r}, "
        f"run {export.run_id}",
        file=sys.stderr,
    )
    return export


def close_export(export: PhoenixExport | None) -> ExportReport | None:
    """Close the export and print its report on stderr (the exit code does not change)."""
    if export is None:
        return None
    try:
        report = export.close()
    except Exception as exc:  # the run is done: its outcome stands whatever tracing did
        logger.exception("closing the Phoenix export failed")
        print(f"plangate: phoenix: closing the export failed: {exc}", file=sys.stderr)
        return None
    print(report.summary(), file=sys.stderr)
    if report.missing:
        shown = ", ".join(report.missing_ids[:5])
        more = f" and {report.missing - 5} more" if report.missing > 5 else ""
        print(f"phoenix: missing span ids: {shown}{more}", file=sys.stderr)
    return report


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
