"""A score table in brief: per evaluator its turns, passes, mean score; failing turns; pass@k.

What `plangate eval` prints (or, with `--json`, writes as JSON). A pass rate counts the turns
that passed or failed; the ones that were not applicable and the errored ones are counted beside
it, never in it (no applicable turn: no rate).
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from plangate.evaluators import repeat_scores
from plangate.evaluators.scores import (
    ERROR,
    EVALUATOR,
    FAIL,
    NOT_APPLICABLE,
    OUTCOME,
    PASS,
    SCORE,
    VERSION,
)
from plangate.replay.schema import SESSION_ID, TURN_INDEX

MAX_FAILURES = 20
"""Failing turns listed in the summary (all are in the scores table)."""


def summarize(scores: pa.Table) -> dict[str, Any]:
    """Per evaluator: turns, passes, pass rate, mean score; and pass@k / pass^k over repeats."""
    frame = scores.to_pandas()
    rows = []
    for name, group in frame.groupby(EVALUATOR, sort=True):
        mean = group[SCORE].mean()
        counts = group[OUTCOME].value_counts()
        passed, failed = int(counts.get(PASS, 0)), int(counts.get(FAIL, 0))
        rows.append(
            {
                "evaluator": name,
                "version": int(group[VERSION].iloc[0]),
                "turns": len(group),
                "passed": passed,
                "failed": failed,
                "not_applicable": int(counts.get(NOT_APPLICABLE, 0)),
                "errors": int(counts.get(ERROR, 0)),
                "pass_rate": passed / (passed + failed) if passed + failed else None,
                "mean_score": None if mean != mean else float(mean),
            }
        )
    failed = frame[frame[OUTCOME] == FAIL].sort_values([EVALUATOR, SESSION_ID, TURN_INDEX])
    errored = frame[frame[OUTCOME] == ERROR].drop_duplicates([SESSION_ID, TURN_INDEX])
    summary: dict[str, Any] = {
        "evaluators": rows,
        "failures": [
            {
                "session_id": r.session_id,
                "turn_index": int(r.turn_index),
                "evaluator": r.evaluator,
                "label": r.label,
                "explanation": r.explanation,
            }
            for r in failed.head(MAX_FAILURES).itertuples(index=False)
        ],
        "failures_total": len(failed),
        "errors": [
            {"session_id": r.session_id, "turn_index": int(r.turn_index), "error": r.explanation}
            for r in errored.head(MAX_FAILURES).itertuples(index=False)
        ],
        "errors_total": len(errored),
    }
    if "task_completion" in set(frame[EVALUATOR]):
        summary["repeats"] = [
            {"k": r.k, "pass_at_k": r.pass_at_k, "pass_hat_k": r.pass_hat_k, "tasks": r.tasks}
            for r in repeat_scores(scores)
        ]
    return summary
