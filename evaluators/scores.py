"""The score table: one row per turn and evaluator, the evaluators' output and the gate's input.

Defined here once: the evaluators write it, the gate, the reports and the Phoenix annotations
read it. A turn is keyed as in the trace table (`session_id`, `turn_index`), and carries the
trace table's `task_id` and `trial` where the source has them.

Every row has one of four outcomes: `pass`, `fail`, `n/a` (no evidence for this evaluator on this
turn: no plan to adhere to, no rubric naming tools, no timing) or `error` (the turn ended in an
infrastructure failure, such as a model endpoint that kept failing: not the agent's doing, so
neither a pass nor a fail). Rates count `pass` and `fail` only, and show the rest beside them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal, get_args

import pyarrow as pa

from plangate.harness import PlangateError
from plangate.replay.schema import SESSION_ID, TASK_ID, TRIAL, TURN_INDEX, read_parquet

EVALUATOR = "evaluator"
VERSION = "version"
"""The evaluator's version: scores of different versions are not compared."""
SCORE = "score"
"""0 to 1; null where it does not apply (e.g. no timing)."""
PASSED = "passed"
"""True for `pass`, False for `fail`, null for `n/a` and `error`."""
OUTCOME = "outcome"
"""`pass`, `fail`, `n/a` or `error`."""
LABEL = "label"
EXPLANATION = "explanation"
"""Why it passed or failed, for a person."""
DETAILS = "details"
"""JSON: the evidence, for machines."""

SCORE_SCHEMA = pa.schema(
    [
        pa.field(SESSION_ID, pa.string(), nullable=False),
        pa.field(TURN_INDEX, pa.int32(), nullable=False),
        pa.field(EVALUATOR, pa.string(), nullable=False),
        pa.field(VERSION, pa.int32(), nullable=False),
        pa.field(SCORE, pa.float64()),
        pa.field(PASSED, pa.bool_()),
        pa.field(OUTCOME, pa.string(), nullable=False),
        pa.field(LABEL, pa.string(), nullable=False),
        pa.field(EXPLANATION, pa.string(), nullable=False),
        pa.field(DETAILS, pa.string()),
        pa.field(TASK_ID, pa.string()),
        pa.field(TRIAL, pa.int32()),
    ],
    metadata={"plangate.schema": "plangate.scores", "plangate.version": "2"},
)
"""One row per turn and evaluator."""

TURN_KEY = [SESSION_ID, TURN_INDEX]
"""What identifies a turn, in both tables."""

RESULT_COLUMNS = [*TURN_KEY, SCORE, PASSED, LABEL, EXPLANATION, DETAILS]
"""What an evaluator function returns, one row per turn, `passed` None where it does not apply
(the registry adds the rest, the outcome among them)."""

ANNOTATED_COLUMNS = (*TURN_KEY, EVALUATOR, SCORE, OUTCOME, LABEL, EXPLANATION)
"""What a score row must have to become an annotation (in Phoenix, say)."""

Outcome = Literal["pass", "fail", "n/a", "error"]
"""What one evaluator made of one turn."""

OUTCOMES: tuple[Outcome, ...] = get_args(Outcome)
PASS, FAIL, NOT_APPLICABLE, ERROR = OUTCOMES
APPLICABLE: tuple[Outcome, ...] = (PASS, FAIL)
"""The outcomes that count in a rate."""


def outcome_of(passed: bool | None) -> Outcome:
    """The outcome an evaluator's `passed` stands for: True pass, False fail, None n/a."""
    if passed is None:
        return NOT_APPLICABLE
    return PASS if passed else FAIL


def passed_of(outcome: str) -> bool | None:
    """`passed` for an outcome: True for `pass`, False for `fail`, None for `n/a` and `error`."""
    if outcome in APPLICABLE:
        return outcome == PASS
    return None


def with_outcomes(table: pa.Table) -> pa.Table:
    """A score table with its `outcome`: a table written before outcomes gets it from `passed`."""
    if OUTCOME in table.column_names or PASSED not in table.column_names:
        return table
    passed = [None if p is None else bool(p) for p in table[PASSED].to_pylist()]
    return table.append_column(OUTCOME, pa.array([outcome_of(p) for p in passed], pa.string()))


class ScoreTableError(PlangateError):
    """A file is not a score table; the message names it."""


def read_scores(path: str | Path) -> pa.Table:
    """A stored score table (from `plangate eval -o` or a gate run), with its outcomes.

    `path` is one Parquet file, or a folder of them (`plangate eval FOLDER -o SCORES` writes
    `SCORES/part-00000.parquet`, ...: read in the order of their paths, hidden files skipped).
    """
    source = Path(path)
    if source.is_dir():
        return _read_parts(source)
    table = with_outcomes(read_parquet(path, "a score table", ScoreTableError))
    missing = [c for c in (*TURN_KEY, EVALUATOR, OUTCOME) if c not in table.column_names]
    if missing:
        raise ScoreTableError(
            f"{path}: not a score table: column {missing[0]!r} is missing (write one with "
            "`plangate eval -o` or a gate run's scores/)"
        )
    return table


def _read_parts(folder: Path) -> pa.Table:
    """A score table written as a folder of Parquet parts, one table."""
    parts = sorted(
        p
        for p in folder.rglob("*.parquet")
        if p.is_file() and not any(x.startswith((".", "_")) for x in p.relative_to(folder).parts)
    )
    if not parts:
        raise ScoreTableError(
            f"{folder}: no .parquet file in this folder; expected a score table (write one with "
            "`plangate eval -o`)"
        )
    tables = [read_scores(part) for part in parts]
    try:
        return pa.concat_tables(tables, promote_options="permissive")
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise ScoreTableError(
            f"{folder}: its parts are not one score table ({str(exc).splitlines()[0]})"
        ) from exc
