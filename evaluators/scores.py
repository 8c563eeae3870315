"""The score table: one row per turn and evaluator, the evaluators' output and the gate's input.

Defined here once: the evaluators write it, the gate, the reports and the Phoenix annotations
read it. A turn is keyed as in the trace table (`session_id`, `turn_index`), and carries the
trace table's `task_id` and `trial` where the source has them.
"""

from __future__ import annotations

import pyarrow as pa

from plangate.replay.schema import SESSION_ID, TASK_ID, TRIAL, TURN_INDEX

EVALUATOR = "evaluator"
VERSION = "version"
"""The evaluator's version: scores of different versions are not compared."""
SCORE = "score"
"""0 to 1; null where it does not apply (e.g. no timing)."""
PASSED = "passed"
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
        pa.field(PASSED, pa.bool_(), nullable=False),
        pa.field(LABEL, pa.string(), nullable=False),
        pa.field(EXPLANATION, pa.string(), nullable=False),
        pa.field(DETAILS, pa.string()),
        pa.field(TASK_ID, pa.string()),
        pa.field(TRIAL, pa.int32()),
    ],
    metadata={"plangate.schema": "plangate.scores", "plangate.version": "1"},
)
"""One row per turn and evaluator."""

TURN_KEY = [SESSION_ID, TURN_INDEX]
"""What identifies a turn, in both tables."""

RESULT_COLUMNS = [*TURN_KEY, SCORE, PASSED, LABEL, EXPLANATION, DETAILS]
"""What an evaluator function returns, one row per turn (the registry adds the rest)."""

ANNOTATED_COLUMNS = (*TURN_KEY, EVALUATOR, SCORE, PASSED, LABEL, EXPLANATION)
"""What a score row must have to become an annotation (in Phoenix, say)."""
