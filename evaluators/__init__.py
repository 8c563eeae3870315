"""Evaluators: pure, versioned functions of a trace table that score every turn."""

from plangate.evaluators._frame import TraceFrame, prepare
from plangate.evaluators._registry import (
    SCORE_SCHEMA,
    Evaluator,
    EvaluatorError,
    evaluate,
    evaluator,
    evaluators,
)
from plangate.evaluators._repeats import (
    RepeatScore,
    pass_at_k,
    pass_hat_k,
    repeat_scores,
    task_outcomes,
)
from plangate.evaluators._rubric import (
    RUBRIC_VERSION,
    AnswerCheck,
    Rubric,
    RubricError,
    RubricSet,
    ToolExpectation,
    load_rubrics,
    rubric_from_dict,
    rubrics_from_dict,
)

__all__ = [
    "RUBRIC_VERSION",
    "SCORE_SCHEMA",
    "AnswerCheck",
    "Evaluator",
    "EvaluatorError",
    "RepeatScore",
    "Rubric",
    "RubricError",
    "RubricSet",
    "ToolExpectation",
    "TraceFrame",
    "evaluate",
    "evaluator",
    "evaluators",
    "load_rubrics",
    "pass_at_k",
    "pass_hat_k",
    "prepare",
    "repeat_scores",
    "rubric_from_dict",
    "rubrics_from_dict",
    "task_outcomes",
]
