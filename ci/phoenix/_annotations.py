"""Scores as Phoenix annotations on the turns' spans, traces and sessions.

`annotate` logs evaluator scores on the turns' spans, traces and sessions. Everything goes
through the Phoenix client (`phoenix.client.Client`, REST), imported only inside the functions
that use it; the server is never imported. Tested against server 20.26.1.

What this relies on, checked against that server:
- Spans are ingested asynchronously (about 140 spans/s), and an annotation on a span that is not
  stored yet fails with 404: `wait_for_spans` polls until they are queryable.
- Span, trace and session ids are global across projects: spans uploaded by plangate get a
  namespaced `session.id`, `DATASET:VARIANT:RUN:SESSION` (as `_export` does it),
  with the recorded id in `plangate.session_id`.
- UI routes, from the single-page app's route table and rendered in headless Chromium: a trace
  is `/projects/<project id>/traces/<trace id>`, a session `/projects/<project id>/sessions/
  <session node id>`; `/redirects/traces/<trace id>` and `/redirects/sessions/<session id>`
  look the ids up and land on those pages. Every path answers 200 with the app (an unknown
  trace renders "Something went wrong"), so a link is checked by resolving its ids: GraphQL
  `node(id: <project id>)` → `Project.trace(traceId:)`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from plangate.ci.phoenix._client import (
    client_url,
    phoenix_errors,
    project_id,
    wait_for_spans,
)
from plangate.ci.phoenix.names import trace_url
from plangate.evaluators.scores import (
    ANNOTATED_COLUMNS,
    APPLICABLE,
    EVALUATOR,
    EXPLANATION,
    FAIL,
    LABEL,
    OUTCOME,
    SCORE,
    passed_of,
    with_outcomes,
)
from plangate.harness import PlangateError, semconv
from plangate.replay.schema import SESSION_ID, SPAN_ID, SPAN_KIND, TRACE_ID, TURN_INDEX

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa
    from phoenix.client import Client

ANNOTATOR_KIND = "CODE"
MAX_EXPLANATION = 2_000


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
    matched = rows[rows[SPAN_ID].notna()].copy()
    unmatched = rows[rows[SPAN_ID].isna()]
    stored = wait_for_spans(client, project, matched[SPAN_ID].tolist(), timeout=timeout)
    matched["phoenix_session_id"] = [
        stored[s].get("attributes", {}).get(semconv.SESSION_ID) for s in matched[SPAN_ID]
    ]
    by_trace = matched.drop_duplicates([TRACE_ID, EVALUATOR], keep="last")
    with phoenix_errors(client, f"logging annotations in project {project!r}"):
        spans = _log(
            client.spans.log_span_annotations_dataframe,
            _annotation_frame(matched, "span_id", matched[SPAN_ID], identifier),
        )
        traces_logged = _log(
            client.traces.log_trace_annotations_dataframe,
            _annotation_frame(by_trace, "trace_id", by_trace[TRACE_ID], identifier),
        )
        sessions = _log(
            client.sessions.log_session_annotations_dataframe,
            _session_frame(matched, identifier),
        )
    pid = project_id(client, project)
    url = client_url(client)
    turns = matched.drop_duplicates([SESSION_ID, TURN_INDEX])
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
    scores = with_outcomes(scores)
    missing = [c for c in ANNOTATED_COLUMNS if c not in scores.column_names]
    if missing:
        raise AnnotationError(
            f"the scores table has no column {missing[0]!r}; expected a score table from "
            "`plangate eval -o` or the gate (columns: " + ", ".join(ANNOTATED_COLUMNS) + ")"
        )
    for column in (SESSION_ID, TURN_INDEX, SPAN_ID, TRACE_ID, SPAN_KIND):
        if column not in traces.column_names:
            raise AnnotationError(
                f"the traces table has no column {column!r}; is it a trace table?"
            )
    frame = scores.to_pandas()
    twice = frame[frame.duplicated([SESSION_ID, TURN_INDEX, EVALUATOR], keep=False)]
    if len(twice):
        first = twice.iloc[0]
        raise AnnotationError(
            f"the scores hold {len(twice)} rows for session {first.session_id!r} turn "
            f"{first.turn_index} evaluator {first.evaluator!r} (several repeats?); annotate "
            "one repeat's scores with that repeat's traces"
        )
    agents = _agent_spans(traces)
    return frame.merge(agents, on=[SESSION_ID, TURN_INDEX], how="left")


def _agent_spans(traces: pa.Table) -> pd.DataFrame:
    import pyarrow.compute as pc

    agents = traces.filter(pc.equal(traces[SPAN_KIND], "AGENT"))
    frame = agents.select([SESSION_ID, TURN_INDEX, SPAN_ID, TRACE_ID]).to_pandas()
    twice = frame[frame.duplicated([SESSION_ID, TURN_INDEX], keep=False)]
    if len(twice):
        first = twice.iloc[0]
        raise AnnotationError(
            f"the traces hold {len(twice)} AGENT spans for session {first.session_id!r} turn "
            f"{first.turn_index} (several runs of one turn?); pass the traces of one run"
        )
    return frame


def _annotation_frame(
    rows: pd.DataFrame, target: str, ids: pd.Series, identifier: str | None
) -> pd.DataFrame:
    """Phoenix's annotation frame for `rows`, on the spans or traces `ids`.

    `target` is Phoenix's column for them: `span_id` or `trace_id`.
    """
    import pandas as pd

    frame = pd.DataFrame(
        {
            target: ids.tolist(),
            "name": rows[EVALUATOR].tolist(),
            "annotator_kind": ANNOTATOR_KIND,
            "score": rows[SCORE].tolist(),
            "label": rows[LABEL].tolist(),
            "explanation": [shorten(str(e)) for e in rows[EXPLANATION]],
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
        "outcome": str(row.outcome),
        "passed": passed_of(str(row.outcome)),
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
        ["phoenix_session_id", EVALUATOR], sort=True
    ):
        ordered = group.sort_values(TURN_INDEX)
        failing = ordered[ordered[OUTCOME] == FAIL]
        judged = int(ordered[OUTCOME].isin(APPLICABLE).sum())
        passed = judged - len(failing)
        listed = "; ".join(f"turn {int(r.turn_index)}: {r.label}" for r in failing.itertuples())
        others = len(ordered) - judged
        records.append(
            {
                "session_id": session,
                "name": evaluator,
                "annotator_kind": ANNOTATOR_KIND,
                "score": passed / judged if judged else None,
                "label": "n/a" if not judged else "pass" if failing.empty else "fail",
                "explanation": shorten(
                    f"{passed} of {judged} judged turns passed"
                    + (f" ({others} not applicable or errored)" if others else "")
                    + (f"; failing: {listed}" if listed else "")
                ),
                "metadata": {
                    "session_id": str(ordered[SESSION_ID].iloc[0]),
                    "turns": len(ordered),
                    "judged": judged,
                    "passed": passed,
                    "failing_turns": [int(k) for k in failing[TURN_INDEX]],
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
