"""Plangate's results in Phoenix: the shared part, and scores as annotations.

`annotate` logs evaluator scores on the turns' spans, traces and sessions; `ci._phoenix_dataset`
mirrors golden datasets as Phoenix datasets and `ci._phoenix_experiment` replays variants as
Phoenix experiments. Everything goes through the Phoenix client (`phoenix.client.Client`,
REST), imported only inside the functions that use it; the server is never imported. Tested
against server 20.26.1.

What this relies on, checked against that server:
- Spans are ingested asynchronously (about 140 spans/s), and an annotation on a span that is not
  stored yet fails with 404: `wait_for_spans` polls until they are queryable.
- Span, trace and session ids are global across projects: spans uploaded by plangate get a
  namespaced `session.id`, `DATASET:VARIANT:RUN:SESSION` (as `ci._phoenix_export` does it),
  with the recorded id in `plangate.session_id`.
- UI routes, from the single-page app's route table and rendered in headless Chromium: a trace
  is `/projects/<project id>/traces/<trace id>`, a session `/projects/<project id>/sessions/
  <session node id>`; `/redirects/traces/<trace id>` and `/redirects/sessions/<session id>`
  look the ids up and land on those pages. Every path answers 200 with the app (an unknown
  trace renders "Something went wrong"), so a link is checked by resolving its ids: GraphQL
  `node(id: <project id>)` → `Project.trace(traceId:)`.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import quote, urlencode

from plangate.ci._phoenix_export import (
    SESSION_ID,
    joined,
    new_run_id,
    poll_spans,
)
from plangate.ci._phoenix_export import namespace as export_namespace
from plangate.harness import PlangateError

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa
    from phoenix.client import Client

ANNOTATOR_KIND = "CODE"
MAX_EXPLANATION = 2_000
SCORE_COLUMNS = ("session_id", "turn_index", "evaluator", "score", "passed", "label", "explanation")
T = TypeVar("T")


class PhoenixRequestError(PlangateError):
    """Phoenix could not be reached, or refused a request; the message names the URL."""


class UnknownProjectError(PhoenixRequestError):
    """No project of that name on the server."""


class IngestTimeoutError(PhoenixRequestError):
    """Spans did not show up in Phoenix before the deadline."""


class AnnotationError(PlangateError):
    """A score or trace table cannot be turned into annotations; the message says why."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AnnotationReport:
    """What `annotate` logged."""

    project: str
    """The Phoenix project of the annotated spans."""
    project_id: str
    """Its id (used in UI links)."""
    span_annotations: int
    """Annotations on AGENT spans: one per score row that has a turn in the traces."""
    trace_annotations: int
    """Annotations on traces (one per trace and evaluator)."""
    session_annotations: int
    """Annotations on sessions (one per session and evaluator)."""
    unmatched: tuple[str, ...] = ()
    """`session:turn` of score rows whose turn has no AGENT span in the traces (not logged)."""
    trace_urls: Mapping[tuple[str, int], str] = field(default_factory=dict)
    """The Phoenix page of every annotated turn's trace, by (session_id, turn_index)."""


# ---------------------------------------------------------------------------------------------
# Links


def base_url(client: Client) -> str:
    """The server URL a client talks to, without a trailing slash."""
    return str(client._client.base_url).rstrip("/")


def project_id(client: Client, project: str) -> str:
    """A project's id (what UI links use) from its name; an id is returned as it is."""
    if _is_node_id(project, "Project"):
        return project
    import httpx

    with phoenix_errors(client, f"looking up project {project!r}"):
        try:
            return str(client.projects.get(project_name=project)["id"])
        except httpx.HTTPStatusError as exc:
            if exc.response.status_code != 404:
                raise
            known = ", ".join(sorted(str(p["name"]) for p in client.projects.list())) or "none"
    raise UnknownProjectError(
        f"no project {project!r} at {base_url(client)}; projects there: {known}"
    )


def trace_url(base: str, project: str | None, trace_id: str) -> str:
    """The Phoenix page of a trace.

    Args:
        base: The server URL.
        project: The project's id (`project_id`); with a name or None the link goes through
            Phoenix's `/redirects/traces/` route, which finds the project itself.
        trace_id: The trace id (32 hex digits).
    """
    root = base.rstrip("/")
    if project is not None and _is_node_id(project, "Project"):
        return f"{root}/projects/{quote(project, safe='=')}/traces/{trace_id}"
    return f"{root}/redirects/traces/{trace_id}"


def session_url(base: str, session_id: str) -> str:
    """The Phoenix page of a session, by the `session.id` its spans carry.

    The session page's own route needs the session's node id
    (`/projects/<project id>/sessions/<node id>`); `/redirects/sessions/` looks it up.
    """
    return f"{base.rstrip('/')}/redirects/sessions/{quote(session_id, safe=':@')}"


def compare_url(base: str, dataset_id: str, experiment_ids: Sequence[str]) -> str:
    """Phoenix's side-by-side view of experiments on one dataset."""
    query = urlencode([("experimentId", e) for e in experiment_ids])
    return f"{base.rstrip('/')}/datasets/{quote(dataset_id, safe='=')}/compare?{query}"


def _is_node_id(value: str, kind: str) -> bool:
    """Whether `value` is a Phoenix (GraphQL) node id of `kind`: base64 of `Kind:number`."""
    try:
        text = base64.b64decode(value, validate=True).decode("ascii")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return False
    prefix, _, number = text.partition(":")
    return prefix == kind and number.isdigit()


# ---------------------------------------------------------------------------------------------
# Namespaced session ids


def namespace(dataset: str, variant: str, run: str | None = None) -> str:
    """`DATASET:VARIANT:RUN`, the prefix of the session ids of one upload or replay run.

    A variant given as a `.toml` path counts by its stem; RUN defaults to a new run id.
    """
    return export_namespace(dataset, variant, run or new_run_id())


def namespaced(prefix: str, session_id: str) -> str:
    """The session id Phoenix shows for `session_id` under a `namespace` prefix."""
    return joined(prefix, session_id)


# ---------------------------------------------------------------------------------------------
# Errors and waiting


@contextmanager
def phoenix_errors(client: Client, doing: str) -> Iterator[None]:
    """Turn the client's HTTP and connection errors into `PhoenixRequestError`s naming the URL."""
    import httpx

    url = base_url(client)
    try:
        yield
    except httpx.HTTPStatusError as exc:
        body = exc.response.text.strip()[:500]
        raise PhoenixRequestError(
            f"Phoenix at {url} answered {exc.response.status_code} while {doing}: {body}"
        ) from exc
    except httpx.TransportError as exc:
        raise PhoenixRequestError(
            f"cannot reach Phoenix at {url} while {doing} ({type(exc).__name__}: {exc}); is a "
            "server running there? (`plangate phoenix up` starts one; --url chooses the server)"
        ) from exc


def wait_for_spans(
    client: Client, project: str, span_ids: Iterable[str], *, timeout: float = 60.0
) -> dict[str, Any]:
    """Poll until every span is stored in `project`; the stored spans (REST form) by span id.

    Raises:
        UnknownProjectError: The project never appeared.
        IngestTimeoutError: Some spans were still missing at the deadline.
    """
    check_project_name(project)
    wanted = list(dict.fromkeys(span_ids))
    with phoenix_errors(client, f"reading spans of project {project!r}"):
        found, seen_project = poll_spans(client, project, wanted, timeout=timeout)
    if len(found) == len(wanted):
        return found
    url = base_url(client)
    if not seen_project:
        raise UnknownProjectError(
            f"project {project!r} does not exist at {url} (waited {timeout:.0f} s for it): "
            "check the project name, and that the spans were exported to this server"
        )
    left = [s for s in wanted if s not in found]
    raise IngestTimeoutError(
        f"{len(left)} of {len(wanted)} spans are not in project {project!r} at {url} after "
        f"{timeout:.0f} s (e.g. span {left[0]!r}): were they exported to this server and "
        "project? A busy server ingests about 140 spans/s; a longer timeout may help"
    )


def check_project_name(project: str) -> None:
    """Raise `UnknownProjectError` for a name Phoenix's REST paths cannot hold."""
    if not project or any(c in project for c in "/?#"):
        raise UnknownProjectError(
            f"project name {project!r}: Phoenix project names used in REST paths cannot be "
            "empty or contain '/', '?' or '#'"
        )


def chunks(items: Sequence[T], size: int) -> Iterator[list[T]]:
    """Consecutive slices of at most `size` items."""
    for start in range(0, len(items), size):
        yield list(items[start : start + size])


# ---------------------------------------------------------------------------------------------
# Scores as annotations


def annotate(
    client: Client,
    scores: pa.Table,
    traces: pa.Table,
    *,
    project: str,
    identifier: str | None = None,
    timeout: float = 60.0,
) -> AnnotationReport:
    """Log evaluator scores as Phoenix annotations on the turns' spans, traces and sessions.

    Each score row (session_id, turn_index, evaluator) is joined to its turn's AGENT span in
    `traces` (the trace table whose spans were exported to `project`) and becomes a span
    annotation and a trace annotation named after the evaluator (annotator kind CODE, with the
    score, label and explanation). Per session (its `session.id` in Phoenix) and evaluator, a
    session annotation gives the share of its turns that passed and lists the failing ones.
    Phoenix keeps one annotation per (name, target, identifier): logging again replaces, and
    a distinct `identifier` (a run id, say) keeps several.

    Raises:
        AnnotationError: The tables do not fit (columns missing, several rows for one turn).
        UnknownProjectError, IngestTimeoutError: The spans are not (yet) in Phoenix.
        PhoenixRequestError: Phoenix could not be reached or refused a request.
    """
    rows = joined_scores(scores, traces)
    matched = rows[rows["span_id"].notna()].copy()
    unmatched = rows[rows["span_id"].isna()]
    stored = wait_for_spans(client, project, matched["span_id"].tolist(), timeout=timeout)
    matched["phoenix_session_id"] = [
        stored[s].get("attributes", {}).get(SESSION_ID) for s in matched["span_id"]
    ]
    by_trace = matched.drop_duplicates(["trace_id", "evaluator"], keep="last")
    with phoenix_errors(client, f"logging annotations in project {project!r}"):
        spans = _log(
            client.spans.log_span_annotations_dataframe,
            _annotation_frame(matched, "span_id", identifier),
        )
        traces_logged = _log(
            client.traces.log_trace_annotations_dataframe,
            _annotation_frame(by_trace, "trace_id", identifier),
        )
        sessions = _log(
            client.sessions.log_session_annotations_dataframe,
            _session_frame(matched, identifier),
        )
    pid = project_id(client, project)
    url = base_url(client)
    turns = matched.drop_duplicates(["session_id", "turn_index"])
    return AnnotationReport(
        project=project,
        project_id=pid,
        span_annotations=spans,
        trace_annotations=traces_logged,
        session_annotations=sessions,
        unmatched=tuple(
            sorted({f"{r.session_id}:{int(r.turn_index)}" for r in unmatched.itertuples()})
        ),
        trace_urls={
            (str(r.session_id), int(r.turn_index)): trace_url(url, pid, str(r.trace_id))
            for r in turns.itertuples()
        },
    )


def joined_scores(scores: pa.Table, traces: pa.Table) -> pd.DataFrame:
    """Score rows with their turn's AGENT `span_id` and `trace_id` (null: no such turn)."""
    missing = [c for c in SCORE_COLUMNS if c not in scores.column_names]
    if missing:
        raise AnnotationError(
            f"the scores table has no column {missing[0]!r}; expected a score table from "
            "`plangate eval -o` or the gate (columns: " + ", ".join(SCORE_COLUMNS) + ")"
        )
    for column in ("session_id", "turn_index", "span_id", "trace_id", "span_kind"):
        if column not in traces.column_names:
            raise AnnotationError(
                f"the traces table has no column {column!r}; is it a trace table?"
            )
    frame = scores.to_pandas()
    twice = frame[frame.duplicated(["session_id", "turn_index", "evaluator"], keep=False)]
    if len(twice):
        first = twice.iloc[0]
        raise AnnotationError(
            f"the scores hold {len(twice)} rows for session {first.session_id!r} turn "
            f"{first.turn_index} evaluator {first.evaluator!r} (several repeats?); annotate "
            "one repeat's scores with that repeat's traces"
        )
    agents = _agent_spans(traces)
    return frame.merge(agents, on=["session_id", "turn_index"], how="left")


def _agent_spans(traces: pa.Table) -> pd.DataFrame:
    import pyarrow.compute as pc

    agents = traces.filter(pc.equal(traces["span_kind"], "AGENT"))
    frame = agents.select(["session_id", "turn_index", "span_id", "trace_id"]).to_pandas()
    twice = frame[frame.duplicated(["session_id", "turn_index"], keep=False)]
    if len(twice):
        first = twice.iloc[0]
        raise AnnotationError(
            f"the traces hold {len(twice)} AGENT spans for session {first.session_id!r} turn "
            f"{first.turn_index} (several runs of one turn?); pass the traces of one run"
        )
    return frame


def _annotation_frame(rows: pd.DataFrame, target: str, identifier: str | None) -> pd.DataFrame:
    import pandas as pd

    frame = pd.DataFrame(
        {
            target: rows[target].tolist(),
            "name": rows["evaluator"].tolist(),
            "annotator_kind": ANNOTATOR_KIND,
            "score": rows["score"].tolist(),
            "label": rows["label"].tolist(),
            "explanation": [shorten(str(e)) for e in rows["explanation"]],
            "metadata": [_metadata(r) for r in rows.itertuples()],
        }
    )
    if identifier is not None:
        frame["identifier"] = identifier
    return frame


def _metadata(row: Any) -> dict[str, Any]:
    metadata = {
        "session_id": str(row.session_id),
        "turn_index": int(row.turn_index),
        "passed": bool(row.passed),
    }
    version = getattr(row, "version", None)
    if version is not None and version == version:
        metadata["evaluator_version"] = int(version)
    return metadata


def _session_frame(rows: pd.DataFrame, identifier: str | None) -> pd.DataFrame:
    import pandas as pd

    records = []
    in_session = rows[rows["phoenix_session_id"].notna()]
    for (session, evaluator), group in in_session.groupby(
        ["phoenix_session_id", "evaluator"], sort=True
    ):
        ordered = group.sort_values("turn_index")
        failing = ordered[~ordered["passed"].astype(bool)]
        passed = len(ordered) - len(failing)
        listed = "; ".join(f"turn {int(r.turn_index)}: {r.label}" for r in failing.itertuples())
        records.append(
            {
                "session_id": session,
                "name": evaluator,
                "annotator_kind": ANNOTATOR_KIND,
                "score": passed / len(ordered),
                "label": "pass" if failing.empty else "fail",
                "explanation": shorten(
                    f"{passed} of {len(ordered)} turns passed"
                    + (f"; failing: {listed}" if listed else "")
                ),
                "metadata": {
                    "session_id": str(ordered["session_id"].iloc[0]),
                    "turns": len(ordered),
                    "passed": passed,
                    "failing_turns": [int(k) for k in failing["turn_index"]],
                },
            }
        )
    frame = pd.DataFrame.from_records(records)
    if identifier is not None and len(frame):
        frame["identifier"] = identifier
    return frame


def _log(log: Callable[..., Any], frame: pd.DataFrame) -> int:
    """Log an annotation frame (the client sends it in chunks of 100); how many were stored.

    Rows without a score go in a frame without the score column: under pandas 3 the client's
    `iterrows` turns a missing score into NaN, which is not valid JSON.
    """
    if frame.empty:
        return 0
    has_score = frame["score"].notna()
    logged = 0
    for part in (frame[has_score], frame[~has_score].drop(columns="score")):
        if len(part):
            logged += len(log(dataframe=part.reset_index(drop=True), sync=True) or [])
    return logged


def shorten(text: str, limit: int = MAX_EXPLANATION) -> str:
    """`text`, cut to `limit` characters with an ellipsis."""
    return text if len(text) <= limit else text[: limit - 1] + "…"
