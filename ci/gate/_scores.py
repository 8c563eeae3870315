"""Score tables as a gate side: read a stored one, and group any one into outcomes per case.

A side can be a stored score table (one written by an earlier gate run, or by `plangate eval
-o`), so a pull request is compared with what main scored without replaying main again.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from plangate.ci.gate._gate_file import GateFileError
from plangate.evaluators.scores import (
    EVALUATOR,
    EXPLANATION,
    OUTCOME,
    SCORE,
)
from plangate.evaluators.scores import read_scores as stored_scores
from plangate.harness import PlangateError
from plangate.replay.schema import SESSION_ID, SPAN_ID, SPAN_KIND, TRACE_ID, TRIAL, TURN_INDEX


def with_agent_spans(scores: pa.Table, traces: pa.Table) -> pa.Table:
    """Each score row with its turn's AGENT `span_id` and `trace_id`: the way to its trace."""
    agents = traces.filter(pc.equal(traces[SPAN_KIND], "AGENT")).select(
        [SESSION_ID, TURN_INDEX, SPAN_ID, TRACE_ID]
    )
    return scores.join(agents, keys=[SESSION_ID, TURN_INDEX], join_type="left outer")


Case = tuple[str, str, int]
"""(dataset name, session id, turn index)."""


Outcome = tuple[str, str, float | None]
"""One repeat's result: its outcome (`pass`, `fail`, `n/a`, `error`), explanation, score."""


Runs = dict[tuple[Case, str], list[Outcome]]
"""Per (case, evaluator): the outcome of every repeat, in repeat order."""


def read_scores(path: Path, cases: Sequence[Case], names: list[str]) -> pa.Table:
    """A stored score table, checked to hold every case and evaluator in every trial."""
    try:
        table = stored_scores(path)
    except PlangateError as exc:
        raise GateFileError(str(exc)) from exc
    for column, kind in (
        (SCORE, pa.float64()),
        (EXPLANATION, pa.string()),
        (TRIAL, pa.int32()),
    ):
        if column not in table.column_names:
            table = table.append_column(column, pa.nulls(table.num_rows, kind))
    table = table.set_column(
        table.schema.get_field_index(TRIAL),
        TRIAL,
        pc.fill_null(table[TRIAL].cast(pa.int32()), 0),
    )
    present = set(
        zip(
            *(table[c].to_pylist() for c in (SESSION_ID, TURN_INDEX, EVALUATOR, TRIAL)),
            strict=True,
        )
    )
    for trial in sorted({t for *_, t in present}):
        for _, session_id, turn_index in cases:
            for name in names:
                if (session_id, turn_index, name, trial) not in present:
                    raise GateFileError(
                        f"{path}: no {name!r} score for session {session_id!r} turn "
                        f"{turn_index} in trial {trial}; the stored table must cover every "
                        "selected case and evaluator (store it from a gate run with the same "
                        "datasets and evaluators)"
                    )
    return table


def runs_from_scores(scores: pa.Table, cases: Sequence[Case], names: list[str]) -> Runs:
    """Per (case, evaluator): outcomes in trial order, from a score table with `trial`."""
    wanted = {(c[1], c[2]): c for c in cases}
    rows = sorted(
        scores.select(
            [SESSION_ID, TURN_INDEX, EVALUATOR, TRIAL, OUTCOME, EXPLANATION, SCORE]
        ).to_pylist(),
        key=lambda r: r[TRIAL],
    )
    runs: Runs = {}
    for row in rows:
        case = wanted.get((row[SESSION_ID], row[TURN_INDEX]))
        if case is not None and row[EVALUATOR] in names:
            outcome = (row[OUTCOME], row[EXPLANATION] or "", row[SCORE])
            runs.setdefault((case, row[EVALUATOR]), []).append(outcome)
    return runs
