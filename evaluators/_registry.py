"""The evaluator registry, and `evaluate`: run the named evaluators over a trace table.

Evaluators register themselves with `@evaluator(name, version)` when their modules are imported,
which the package's `__init__` does.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from plangate.evaluators._columns import TurnScores, dumps, overlay, strings
from plangate.evaluators._frame import TraceFrame, prepare
from plangate.evaluators._rubric import RubricSet
from plangate.evaluators._threads import started, two_threads
from plangate.evaluators.scores import (
    DETAILS,
    ERROR,
    EVALUATOR,
    EXPLANATION,
    FAIL,
    LABEL,
    NOT_APPLICABLE,
    OUTCOME,
    PASS,
    PASSED,
    RESULT_COLUMNS,
    SCORE,
    SCORE_SCHEMA,
    VERSION,
)
from plangate.harness import PlangateError
from plangate.replay.schema import (
    ERROR_STOP_REASONS,
    SESSION_ID,
    STATUS_MESSAGE,
    STOP_REASON,
    TASK_ID,
    TRACE_ID,
    TRIAL,
    TURN_INDEX,
)

_CONTINUED = pa.array(sorted({"awaiting_approval", *ERROR_STOP_REASONS}), pa.string())
"""Stop reasons of an AGENT span whose turn goes on in another (approved, or resumed)."""

EvaluatorFunction = Callable[..., "TurnScores | pd.DataFrame"]
"""`fn(frame: TraceFrame, rubrics: RubricSet, **params) -> TurnScores`, aligned with
`frame.turns` (or, for an evaluator written turn by turn, a DataFrame[RESULT_COLUMNS] in the same
order)."""


class EvaluatorError(PlangateError):
    """An unknown evaluator or a bad parameter."""


def number_param(
    evaluator_name: str, name: str, value: Any, low: float = -math.inf, high: float = math.inf
) -> float:
    """A parameter that must be a finite number in [low, high] (not NaN, nor true/false)."""
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or not low <= value <= high
    ):
        bounds = " and ".join(
            [f">= {low:g}"] * math.isfinite(low) + [f"<= {high:g}"] * math.isfinite(high)
        )
        raise EvaluatorError(
            f"evaluator {evaluator_name!r}: {name!r} must be a finite number"
            f"{f' {bounds}' if bounds else ''}, not {value!r}"
        )
    return float(value)


@dataclass(frozen=True, slots=True)
class Evaluator:
    """A registered evaluator."""

    name: str
    version: int
    function: EvaluatorFunction
    description: str
    asks: bool = False
    """It asks a model (the judge): `evaluate` runs it in the calling thread, where Ctrl-C
    reaches it."""


_EVALUATORS: dict[str, Evaluator] = {}
_OUTCOMES = pa.array([PASS, FAIL, NOT_APPLICABLE, ERROR], pa.string())
"""The outcomes, by the codes `_table` gives them."""


def evaluator(
    name: str, version: int, asks: bool = False
) -> Callable[[EvaluatorFunction], EvaluatorFunction]:
    """Register a function as the evaluator `name` at `version` (`asks`: it asks a model)."""

    def add(function: EvaluatorFunction) -> EvaluatorFunction:
        doc = (function.__doc__ or "").strip().splitlines()
        _EVALUATORS[name] = Evaluator(name, version, function, doc[0] if doc else "", asks)
        return function

    return add


def evaluators() -> dict[str, Evaluator]:
    """The registered evaluators by name."""
    return dict(_EVALUATORS)


def evaluate(
    table: pa.Table,
    rubrics: RubricSet | None = None,
    names: Sequence[str] | None = None,
    params: dict[str, dict[str, Any]] | None = None,
) -> pa.Table:
    """Score every turn of a trace table with the named evaluators (default: all).

    `params` maps an evaluator name to keyword parameters (thresholds). Returns a table in
    `SCORE_SCHEMA`; the input is not modified. A turn that ended in an infrastructure failure
    (`ERROR_STOP_REASONS`) is an `error` under every evaluator, whatever the evaluator saw.
    """
    registry = evaluators()
    chosen = list(names) if names else sorted(registry)
    unknown = [n for n in chosen if n not in registry]
    if unknown:
        raise EvaluatorError(
            f"unknown evaluator {unknown[0]!r}; choose from: {', '.join(sorted(registry))}"
        )
    frame = prepare(table)

    def run(name: str) -> pa.Table:
        return _run(registry[name], frame, rubrics or RubricSet(), (params or {}).get(name, {}))

    if len(chosen) < 2 or not two_threads(len(frame)):
        parts = [run(name) for name in chosen]
    else:
        parts = _two_at_a_time([registry[name] for name in chosen], run)
    return pa.concat_tables(parts) if parts else SCORE_SCHEMA.empty_table()


def _two_at_a_time(chosen: list[Evaluator], run: Callable[[str], pa.Table]) -> list[pa.Table]:
    """Each evaluator's table, in order, two evaluators at a time (`_threads`).

    What one at a time would do, sooner: the first error in the evaluators' order is raised,
    and one that asks a model runs in this thread (Ctrl-C stops it at once) only after every
    evaluator before it has succeeded, so a run that fails early asks nothing.
    """
    computed = [i for i, e in enumerate(chosen) if not e.asks]
    tasks = [partial(run, chosen[i].name) for i in computed]
    futures = dict(zip(computed, started(tasks), strict=True))
    try:
        return [futures[i].result() if i in futures else run(e.name) for i, e in enumerate(chosen)]
    finally:
        for future in futures.values():
            future.cancel()  # not started yet: skipped (after an error or Ctrl-C)
        del futures  # the error's traceback keeps this frame: not the futures and the scores


def _run(
    spec: Evaluator, frame: TraceFrame, rubrics: RubricSet, params: dict[str, Any]
) -> pa.Table:
    try:
        result = spec.function(frame, rubrics, **params)
    except TypeError as exc:
        raise EvaluatorError(
            f"evaluator {spec.name!r}: bad parameters {sorted(params)}: {exc}"
        ) from exc
    scores = result if isinstance(result, TurnScores) else _from_rows(result)
    return _table(spec, frame, scores)


def _table(spec: Evaluator, frame: TraceFrame, scores: TurnScores) -> pa.Table:
    """The score table of one evaluator: its verdicts, the turn keys and ids, errors marked."""
    turns = len(frame.turns)
    passed = np.asarray(scores.passed, dtype=np.float64)
    outcome = np.where(np.isnan(passed), 2, np.where(passed > 0, 0, 1))  # into _OUTCOMES
    score = np.asarray(scores.score, dtype=np.float64).copy()
    label = strings(scores.label, turns)
    explanation = strings(scores.explanation, turns)
    if scores.errored is not None and scores.errored.any():  # the evaluator's own: its text
        own = np.flatnonzero(scores.errored)
        outcome[own], passed[own], score[own] = 3, np.nan, np.nan
        label = overlay(label, own, [ERROR] * len(own))
    failed, messages = frame.kept("registry.failures", lambda: _failures(frame))
    if len(failed):
        outcome[failed] = 3
        passed[failed] = np.nan
        score[failed] = np.nan
        label = overlay(label, failed, [ERROR] * len(failed))
        explanation = overlay(explanation, failed, messages)
    columns = frame.kept("registry.turn_columns", lambda: _turn_columns(frame)) | {
        EVALUATOR: strings(spec.name, turns),
        VERSION: pa.array(np.full(turns, spec.version, dtype=np.int32)),
        SCORE: pa.array(score, pa.float64(), mask=np.isnan(score)),
        PASSED: pa.array(passed > 0, pa.bool_(), mask=np.isnan(passed)),
        OUTCOME: _OUTCOMES.take(pa.array(outcome)),
        LABEL: label,
        EXPLANATION: explanation,
        DETAILS: scores.details,
    }
    return pa.Table.from_pydict(columns, schema=SCORE_SCHEMA)


def _turn_columns(frame: TraceFrame) -> dict[str, pa.Array]:
    """The columns of a score table that name the turns: the same under every evaluator."""
    agent = frame.turns.agent
    return {
        SESSION_ID: frame.turns.session_id,
        TURN_INDEX: pa.array(frame.turns.turn_index, pa.int32()),
        TASK_ID: frame.values(TASK_ID, agent),
        TRIAL: frame.values(TRIAL, agent).cast(pa.int32()),
    }


def _failures(frame: TraceFrame) -> tuple[npt.NDArray[np.int64], list[str]]:
    """Turns no evaluator may judge, and why: an infrastructure failure, or two runs in one."""
    why = dict(zip(*_merged(frame), strict=True))
    why.update(zip(*_infrastructure(frame), strict=True))
    rows = sorted(why)
    return np.asarray(rows, dtype=np.int64), [why[row] for row in rows]


def _infrastructure(frame: TraceFrame) -> tuple[list[int], list[str]]:
    """Turns that ended in an infrastructure failure, and the failure's message for each."""
    reasons = frame.values(STOP_REASON, frame.turns.agent)
    failed = pc.is_in(reasons, value_set=pa.array(sorted(ERROR_STOP_REASONS), pa.string()))
    rows = np.flatnonzero(np.asarray(failed.fill_null(False).to_numpy(zero_copy_only=False)))
    if not len(rows):
        return [], []
    status = frame.values(STATUS_MESSAGE, frame.turns.agent[rows]).to_pylist()
    reason = reasons.take(pa.array(rows)).to_pylist()
    details = [
        f"{r}: {m}" if isinstance(m, str) else str(r) for r, m in zip(reason, status, strict=True)
    ]
    return rows.tolist(), [
        f"not judged: the turn ended in an infrastructure error ({d})" for d in details
    ]


def _merged(frame: TraceFrame) -> tuple[list[int], list[str]]:
    """Turns that hold two runs: AGENT spans of several traces, each ending the turn.

    A turn paused for approval, or cut short by an error, is continued in a new trace: its
    earlier AGENT spans did not end it. Two that did are two runs under one key (a table
    imported twice, or in parts whose turn numbers restart), and scoring them as one would
    mix their evidence.
    """
    agents = frame.agents
    several = agents.counts(len(frame.turns))[agents.turn] >= 2  # most turns have one
    if not several.any():
        return [], []
    position, turn = agents.position[several], agents.turn[several]
    reasons = frame.values(STOP_REASON, position)
    ended = ~np.asarray(pc.is_in(reasons, value_set=_CONTINUED).fill_null(False), dtype=bool)
    position, turn = position[ended], turn[ended]
    traces = frame.values(TRACE_ID, position)
    trace = np.asarray(traces.dictionary_encode().indices, np.int64)
    first = np.ones(len(turn), dtype=bool)
    first[1:] = turn[1:] != turn[:-1]
    runs = np.diff(np.append(np.flatnonzero(first), len(turn)))
    rows = np.unique(turn[trace != np.repeat(trace[first], runs)])
    flagged = np.isin(turn, rows)
    held: dict[int, dict[str, None]] = {int(row): {} for row in rows}
    named = traces.filter(pa.array(flagged)).to_pylist()
    for row, trace_id in zip(turn[flagged].tolist(), named, strict=True):
        held[row][trace_id] = None
    return rows.tolist(), [_two_runs(list(traces)) for traces in held.values()]


def _two_runs(traces: list[str]) -> str:
    shown = ", ".join(traces[:3]) + (", …" if len(traces) > 3 else "")
    return (
        f"not judged: the turn holds {len(traces)} runs, each ending it (AGENT spans of traces "
        f"{shown}); a table imported twice, or in parts whose turn numbers restart, puts two "
        "runs under one key: give each run its own session_id or turn_index"
    )


def _from_rows(result: pd.DataFrame) -> TurnScores:
    """Scores an evaluator wrote as rows (one per turn, in turn order) as columns."""
    rows = result[RESULT_COLUMNS]
    passed = [np.nan if _missing(p) else float(bool(p)) for p in rows[PASSED]]
    return TurnScores(
        passed=np.asarray(passed, dtype=np.float64),
        score=np.asarray(
            [np.nan if _missing(v) else float(v) for v in rows[SCORE]], dtype=np.float64
        ),
        label=pa.array(rows[LABEL].tolist(), pa.string()),
        explanation=pa.array(rows[EXPLANATION].tolist(), pa.string()),
        details=pa.array(dumps([None if _missing(d) else d for d in rows[DETAILS]]), pa.string()),
    )


def _missing(value: Any) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and value != value)
