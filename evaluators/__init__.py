"""Evaluators: pure, versioned functions of a trace table that score every turn.

- one module per evaluator: `_task_completion`, `_plan_adherence` (with `_plan_components`),
  `_loops` (`tool_call_loops`), `_latency`, `_trajectory` (`trajectory_match`), `_tokens`
  (`tokens` and `cost`, with `_tokens_text`), `_judge` (an LLM judge, with its cassette in
  `_judge_cassette`); each registers itself when imported, which this package does;
- `_registry`: the registry and `evaluate`; `_frame`: the trace table prepared once for all;
- `_rubric`: the golden rubric (what a turn must do); `_repeats`: pass@k and pass^k;
- `_stream`: scoring sources larger than memory in batches of whole sessions
  (`session_batches`, `score_batches`); `_source`: their files (a file, a folder, a glob);
- `scores`: the score table they all return (its columns, defined once).

Evaluators import from `plangate.replay` only its trace-table schema (`plangate.replay.schema`)
and the redactor (the judge cassette is an output), and from `plangate.harness` the run
detector (`call_runs`), the base errors, and the OpenAI-compatible model the judge asks.
"""

from plangate.evaluators import (  # noqa: F401 - importing an evaluator registers it
    _judge,
    _latency,
    _loops,
    _plan_adherence,
    _task_completion,
    _tokens,
    _trajectory,
)
from plangate.evaluators._frame import TraceFrame, prepare
from plangate.evaluators._object_store import object_uri
from plangate.evaluators._registry import (
    Evaluator,
    EvaluatorError,
    evaluate,
    evaluator,
    evaluators,
)
from plangate.evaluators._repeats import (
    RepeatScore,
    outcome_repeats,
    pass_at_k,
    pass_hat_k,
    repeat_scores,
    task_outcomes,
)
from plangate.evaluators._rubric import (
    RUBRIC_VERSION,
    AnswerCheck,
    JudgeQuestion,
    Rubric,
    RubricError,
    RubricSet,
    ToolExpectation,
    load_rubrics,
    rubric_from_dict,
    rubrics_from_dict,
)
from plangate.evaluators._source import (
    TraceSource,
    agent_spans,
    checked_chunks,
    text_located,
    trace_source,
    would_read,
)
from plangate.evaluators._stream import (
    DEFAULT_BATCH_ROWS,
    Engine,
    contiguous_sessions,
    score_batches,
    session_batches,
)
from plangate.evaluators.scores import SCORE_SCHEMA

__all__ = [
    "DEFAULT_BATCH_ROWS",
    "RUBRIC_VERSION",
    "SCORE_SCHEMA",
    "AnswerCheck",
    "Engine",
    "Evaluator",
    "EvaluatorError",
    "JudgeQuestion",
    "RepeatScore",
    "Rubric",
    "RubricError",
    "RubricSet",
    "ToolExpectation",
    "TraceFrame",
    "TraceSource",
    "agent_spans",
    "checked_chunks",
    "contiguous_sessions",
    "evaluate",
    "evaluator",
    "evaluators",
    "load_rubrics",
    "object_uri",
    "outcome_repeats",
    "pass_at_k",
    "pass_hat_k",
    "prepare",
    "repeat_scores",
    "rubric_from_dict",
    "rubrics_from_dict",
    "score_batches",
    "session_batches",
    "task_outcomes",
    "text_located",
    "trace_source",
    "would_read",
]
