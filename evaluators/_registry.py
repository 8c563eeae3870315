"""The evaluator registry, and `evaluate`: run the named evaluators over a trace table.

Evaluators register themselves with `@evaluator(name, version)` when their modules are imported,
which the package's `__init__` does.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd
import pyarrow as pa

from plangate.evaluators._frame import TraceFrame, prepare
from plangate.evaluators._rubric import RubricSet
from plangate.evaluators.scores import (
    DETAILS,
    ERROR,
    EVALUATOR,
    EXPLANATION,
    LABEL,
    OUTCOME,
    PASSED,
    RESULT_COLUMNS,
    SCORE,
    SCORE_SCHEMA,
    TURN_KEY,
    VERSION,
    outcome_of,
    passed_of,
)
from plangate.harness import PlangateError
from plangate.replay.schema import (
    ERROR_STOP_REASONS,
    STATUS_MESSAGE,
    STOP_REASON,
    TASK_ID,
    TRIAL,
    TURN_INDEX,
)

EvaluatorFunction = Callable[..., pd.DataFrame]
"""`fn(frame: TraceFrame, rubrics: RubricSet, **params) -> DataFrame[RESULT_COLUMNS]`."""


class EvaluatorError(PlangateError):
    """An unknown evaluator or a bad parameter."""


@dataclass(frozen=True, slots=True)
class Evaluator:
    """A registered evaluator."""

    name: str
    version: int
    function: EvaluatorFunction
    description: str


_EVALUATORS: dict[str, Evaluator] = {}


def evaluator(name: str, version: int) -> Callable[[EvaluatorFunction], EvaluatorFunction]:
    """Register a function as the evaluator `name` at `version`."""

    def add(function: EvaluatorFunction) -> EvaluatorFunction:
        doc = (function.__doc__ or "").strip().splitlines()
        _EVALUATORS[name] = Evaluator(name, version, function, doc[0] if doc else "")
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
    parts = [
        _run(registry[name], frame, rubrics or RubricSet(), (params or {}).get(name, {}))
        for name in chosen
    ]
    return pa.concat_tables(parts) if parts else SCORE_SCHEMA.empty_table()


def _run(
    spec: Evaluator, frame: TraceFrame, rubrics: RubricSet, params: dict[str, Any]
) -> pa.Table:
    try:
        result = spec.function(frame, rubrics, **params)
    except TypeError as exc:
        raise EvaluatorError(
            f"evaluator {spec.name!r}: bad parameters {sorted(params)}: {exc}"
        ) from exc
    result = result[RESULT_COLUMNS].copy()
    result[OUTCOME] = [outcome_of(None if _missing(p) else bool(p)) for p in result[PASSED]]
    result[PASSED] = pd.Series(
        [passed_of(o) for o in result[OUTCOME]],
        index=result.index,
        dtype=object,
    )
    result[SCORE] = result[SCORE].astype("float64")
    _mark_errors(result, frame)
    result[DETAILS] = [
        json.dumps(d, sort_keys=True, default=str) if d is not None else None
        for d in result[DETAILS]
    ]
    result[EVALUATOR] = spec.name
    result[VERSION] = spec.version
    ids = frame.turns[[*TURN_KEY, TASK_ID, TRIAL]]
    result = result.merge(ids, on=TURN_KEY, how="left")
    result = result.astype({TURN_INDEX: "int64"})
    columns = {
        name: _column(result[name], SCORE_SCHEMA.field(name).type) for name in SCORE_SCHEMA.names
    }
    return pa.Table.from_pydict(columns, schema=SCORE_SCHEMA)


def _mark_errors(result: pd.DataFrame, frame: TraceFrame) -> None:
    """Turns that ended in an infrastructure failure become errors, with the failure's message."""
    turns = frame.turns
    failed = turns[turns[STOP_REASON].isin(ERROR_STOP_REASONS)]
    if failed.empty:
        return
    messages = {
        (str(s), int(t)): f"{reason}: {message}" if isinstance(message, str) else str(reason)
        for s, t, reason, message in zip(
            failed[TURN_KEY[0]], failed[TURN_KEY[1]], failed[STOP_REASON],
            failed[STATUS_MESSAGE], strict=True,
        )
    }  # fmt: skip
    keys = list(zip(result[TURN_KEY[0]], result[TURN_KEY[1]].astype(int), strict=True))
    errored = [k in messages for k in keys]
    if not any(errored):
        return
    rows = result.index[errored]
    result.loc[rows, OUTCOME] = ERROR
    result.loc[rows, PASSED] = None
    result.loc[rows, SCORE] = None
    result.loc[rows, LABEL] = ERROR
    result.loc[rows, EXPLANATION] = [
        f"not judged: the turn ended in an infrastructure error ({messages[k]})"
        for k, e in zip(keys, errored, strict=True)
        if e
    ]


def _column(series: pd.Series, kind: pa.DataType) -> pa.Array:
    values = [None if _missing(v) else v for v in series.tolist()]
    return pa.array(values, type=kind)


def _missing(value: Any) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and value != value)
