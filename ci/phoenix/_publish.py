"""The gate's scores back into Phoenix, and a Phoenix link for every case of the verdict.

After `plangate gate --phoenix-url URL`, every replayed repeat of every side is a run of its own in
Phoenix (namespaced session ids, see `names`). Each repeat's scores are logged as
annotations on its turns' AGENT spans, traces and sessions (`_annotations.annotate`), so that
Phoenix's filters such as `annotations['task_completion'].score < 1` find the failing turns; and
each case of the verdict links to the candidate's trace of that case (its first failing repeat),
so a reader of the reports goes from a regression straight to its trace.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from plangate.ci.gate import Verdict
from plangate.ci.phoenix._annotations import AnnotationReport, annotate
from plangate.ci.phoenix._client import project_id
from plangate.ci.phoenix._export import PhoenixExport
from plangate.ci.phoenix.names import trace_url
from plangate.evaluators.scores import ANNOTATED_COLUMNS, EVALUATOR, FAIL, OUTCOME
from plangate.replay.schema import SESSION_ID, SPAN_ID, SPAN_KIND, TRACE_ID, TRIAL, TURN_INDEX


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Publication:
    """What `publish_verdict` did."""

    verdict: Verdict
    """The verdict, each case with its candidate's trace in Phoenix."""
    problems: list[str]
    """Why some repeats' scores were not logged (empty: all were)."""
    span_annotations: int
    """Span annotations logged, over every repeat."""
    runs: int
    """Repeats annotated."""


def publish_verdict(export: PhoenixExport, verdict: Verdict) -> Publication:
    """Annotate every replayed repeat in Phoenix; the verdict with trace links, and problems."""
    from phoenix.client import Client  # here: `import plangate.ci` never loads the client

    client = Client(base_url=export.url)
    problems: list[str] = []
    reports: list[AnnotationReport] = []
    for side, scores in verdict.scores.items():
        if TRACE_ID not in scores.column_names:
            continue  # a stored side: its traces are not this run's
        for trial in sorted(set(scores[TRIAL].to_pylist())):
            rows = scores.filter(pc.equal(scores[TRIAL], trial))
            try:
                reports.append(
                    annotate(
                        client,
                        rows.select(list(ANNOTATED_COLUMNS)),
                        _agent_rows(rows),
                        project=export.project,
                        identifier=export.run_id,
                    )  # fmt: skip
                )
            except Exception as exc:  # the verdict stands whatever Phoenix does
                problems.append(f"{side} repeat {trial}: {exc}")
    annotated = sum(r.span_annotations for r in reports)
    if TRACE_ID not in verdict.scores.get("candidate", pa.table({})).column_names:
        return Publication(
            verdict=verdict, problems=problems, span_annotations=annotated, runs=len(reports)
        )
    base = export.url
    project = project_id(client, export.project)
    first = _first_failing_traces(verdict.scores["candidate"])
    cases = [
        dataclasses.replace(
            case,
            trace_url=trace_url(base, project, trace)
            if (trace := first.get((case.session_id, case.turn_index, case.evaluator)))
            else None,
        )
        for case in verdict.cases
    ]
    return Publication(
        verdict=dataclasses.replace(verdict, cases=cases),
        problems=problems,
        span_annotations=annotated,
        runs=len(reports),
    )


def _agent_rows(scores: pa.Table) -> pa.Table:
    """A minimal trace table of the turns' AGENT spans, from the score rows that carry them."""
    rows = {
        (r[SESSION_ID], r[TURN_INDEX]): r
        for r in scores.select([SESSION_ID, TURN_INDEX, SPAN_ID, TRACE_ID]).to_pylist()
        if r[SPAN_ID] is not None
    }
    return pa.table(
        {
            SESSION_ID: [k[0] for k in rows],
            TURN_INDEX: pa.array([k[1] for k in rows], pa.int32()),
            SPAN_ID: [r[SPAN_ID] for r in rows.values()],
            TRACE_ID: [r[TRACE_ID] for r in rows.values()],
            SPAN_KIND: ["AGENT"] * len(rows),
        }
    )


def _first_failing_traces(scores: pa.Table) -> dict[tuple[str, int, str], Any]:
    """Per (session, turn, evaluator): the trace of the first failing repeat, else the first."""
    chosen: dict[tuple[str, int, str], tuple[bool, int, Any]] = {}
    columns = [SESSION_ID, TURN_INDEX, EVALUATOR, TRIAL, OUTCOME, TRACE_ID]
    for row in scores.select(columns).to_pylist():
        key = (row[SESSION_ID], row[TURN_INDEX], row[EVALUATOR])
        rank = (row[OUTCOME] != FAIL, row[TRIAL], row[TRACE_ID])
        if key not in chosen or rank[:2] < chosen[key][:2]:
            chosen[key] = rank
    return {key: rank[2] for key, rank in chosen.items()}
