"""A score table in brief: per evaluator its turns, passes, mean score; failing turns; pass@k.

What `plangate eval` prints (or, with `--json`, writes as JSON).
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from plangate.evaluators import repeat_scores
from plangate.evaluators.scores import EVALUATOR, PASSED, SCORE, VERSION
from plangate.replay.schema import SESSION_ID, TURN_INDEX

MAX_FAILURES = 20
"""Failing turns listed in the summary (all are in the scores table)."""


def summarize(scores: pa.Table) -> dict[str, Any]:
    """Per evaluator: turns, passes, pass rate, mean score; and pass@k / pass^k over repeats."""
    frame = scores.to_pandas()
    rows = []
    for name, group in frame.groupby(EVALUATOR, sort=True):
        mean = group[SCORE].mean()
        rows.append(
            {
                "evaluator": name,
                "version": int(group[VERSION].iloc[0]),
                "turns": len(group),
                "passed": int(group[PASSED].sum()),
                "pass_rate": float(group[PASSED].mean()),
                "mean_score": None if mean != mean else float(mean),
            }
        )
    failed = frame[~frame[PASSED]].sort_values([EVALUATOR, SESSION_ID, TURN_INDEX])
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
    }
    if "task_completion" in set(frame[EVALUATOR]):
        summary["repeats"] = [
            {"k": r.k, "pass_at_k": r.pass_at_k, "pass_hat_k": r.pass_hat_k, "tasks": r.tasks}
            for r in repeat_scores(scores)
        ]
    return summary
