"""`judge`: an LLM judge answers a rubric's question about each turn, k times, replayable.

A turn whose rubric has a `judge` question is shown to the judge model: the user's request,
the tool calls the agent made, and its final answer, with the question and the scale. The
judge replies with one JSON object (`{"verdict": "pass" | "fail", "reason": …}`, or on a scale
`{"score": N, "reason": …}`). Every reply is kept in the judge cassette (`_judge_cassette`),
so a run without the model gets the same verdicts back.

Asked `samples` times, the judge's agreement with itself is measured, not averaged away: when
its verdicts on a turn differ (a pass and a fail, or scores on both sides of `pass_at`), the
turn is `n/a`, labelled `unstable`, with every verdict and reason in its details. A judge that
did not do its job judged nothing: a reply that cannot be read, or an endpoint that kept
failing (not recorded, so the next run asks again), makes the turn an `error`. Turns without
a question are n/a (`no question`) and cost nothing: no model is built and no cassette read.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from plangate.evaluators._columns import TurnScores
from plangate.evaluators._frame import TraceFrame
from plangate.evaluators._judge_cassette import (
    JUDGE_MODES,
    JudgeCall,
    JudgeCassette,
    JudgeReply,
    redacted,
    replies,
)
from plangate.evaluators._registry import EvaluatorError, evaluator
from plangate.evaluators._rubric import JudgeQuestion, RubricSet
from plangate.replay.schema import INPUT_VALUE, OUTPUT_VALUE, TOOL_ARGS, TOOL_NAME

SYSTEM = (
    "You judge the work of an AI agent for a regression test. You are shown the user's "
    "request, the tool calls the agent made, and the agent's final answer, then asked one "
    "question about them. Judge only what is shown. Reply with one JSON object and nothing "
    "else."
)
_CALLS_SHOWN = 50
"""Tool calls shown to the judge per turn; the rest are counted."""
_TEXT_SHOWN = 4000
"""Characters of a request, an answer or a call's arguments shown to the judge."""


@dataclass(frozen=True, slots=True)
class Verdict:
    """One reply of the judge, read."""

    passed: bool | None
    """None: the reply could not be read."""
    score: float | None
    reason: str


@evaluator("judge", version=1, asks=True)
def judge(
    frame: TraceFrame,
    rubrics: RubricSet,
    mode: str = "replay",
    cassette: str | None = None,
    model: str | None = None,
    samples: int = 1,
    jobs: int = 4,
) -> TurnScores:
    """An LLM judge's verdict on the rubric's question, asked `samples` times; replayable.

    `mode`: `replay` (the cassette's replies only), `record` (ask what it lacks) or `live`
    (ask again). `model` is the judge for questions that name none.
    """
    _check_params(mode, samples, jobs)
    rows = len(frame.turns)
    questions = _questions(frame, rubrics)
    asked = [t for t, q in enumerate(questions) if q is not None]
    passed = np.full(rows, np.nan)
    score = np.full(rows, np.nan)
    label: list[str | None] = ["no question"] * rows
    explanation: list[str | None] = ["no judge question in the turn's rubric"] * rows
    details: list[str | None] = [None] * rows
    errored = np.zeros(rows, dtype=bool)
    if asked:
        calls = _calls(frame, asked, questions, model, samples)
        got = replies(calls, JudgeCassette(cassette), mode, jobs)  # type: ignore[arg-type]
        for number, turn in enumerate(asked):
            question = questions[turn]
            assert question is not None
            mine = slice(number * samples, (number + 1) * samples)
            found = _combine(question, got[mine], calls[mine][0].model)
            passed[turn], score[turn], label[turn], explanation[turn], details[turn] = found
            errored[turn] = label[turn] in ("judge failed", "unreadable")
    return TurnScores(
        passed=passed,
        score=score,
        label=pa.array(label, pa.string()),
        explanation=pa.array(explanation, pa.string()),
        details=pa.array(details, pa.string()),
        errored=errored,
    )


def _check_params(mode: Any, samples: Any, jobs: Any) -> None:
    if mode not in JUDGE_MODES:
        raise EvaluatorError(
            f"evaluator 'judge': 'mode' must be one of {', '.join(JUDGE_MODES)}, not {mode!r}"
        )
    for name, value in (("samples", samples), ("jobs", jobs)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise EvaluatorError(
                f"evaluator 'judge': {name!r} must be a whole number >= 1, not {value!r}"
            )


def _questions(frame: TraceFrame, rubrics: RubricSet) -> list[JudgeQuestion | None]:
    """Each turn's judge question (None: its rubric asks none)."""
    if not rubrics.uses("judge"):
        return [None] * len(frame.turns)
    keys = zip(frame.turns.session_id.to_pylist(), frame.turns.turn_index.tolist(), strict=True)
    return [
        rubric.judge if (rubric := rubrics.lookup(s, int(t))) is not None else None for s, t in keys
    ]


def _calls(
    frame: TraceFrame,
    asked: list[int],
    questions: Sequence[JudgeQuestion | None],
    default_model: str | None,
    samples: int,
) -> list[JudgeCall]:
    """`samples` calls for each asked turn, in turn order."""
    turns = np.asarray(asked, dtype=np.int64)
    agents = frame.turns.agent[turns]
    requests = frame.values(INPUT_VALUE, agents).to_pylist()
    answers = frame.values(OUTPUT_VALUE, agents).to_pylist()
    shown = _tool_calls(frame, turns)
    sessions = frame.turns.session_id.take(pa.array(turns)).to_pylist()
    calls = []
    for number, turn in enumerate(asked):
        question = questions[turn]
        assert question is not None
        spec = question.model or default_model
        if spec is None:
            raise EvaluatorError(
                f"judge: no judge model for session {sessions[number]!r} turn "
                f"{int(frame.turns.turn_index[turn])}: set judge.model in the rubric, or "
                "--judge-model openai:NAME"
            )
        prompt = redacted(_prompt(question, requests[number], shown[number], answers[number]))
        calls += [
            JudgeCall(
                model=spec,
                session_id=sessions[number],
                turn_index=int(frame.turns.turn_index[turn]),
                sample=sample,
                system=SYSTEM,
                prompt=prompt,
            )  # fmt: skip
            for sample in range(samples)
        ]
    return calls


def _tool_calls(frame: TraceFrame, turns: np.ndarray[Any, Any]) -> list[list[str]]:
    """Each turn's tool calls as `name(arguments)` lines, in order (at most `_CALLS_SHOWN`)."""
    tools = frame.tools
    chosen = np.flatnonzero(np.isin(tools.turn, turns))
    names = frame.values(TOOL_NAME, tools.position[chosen]).to_pylist()
    arguments = frame.values(TOOL_ARGS, tools.position[chosen]).to_pylist()
    where = {int(t): i for i, t in enumerate(turns)}
    shown: list[list[str]] = [[] for _ in turns]
    for turn, name, args in zip(tools.turn[chosen].tolist(), names, arguments, strict=True):
        shown[where[turn]].append(f"{name}({_cut(args or '')})")
    return shown


def _prompt(
    question: JudgeQuestion, request: str | None, calls: list[str], answer: str | None
) -> str:
    """What the judge is shown and asked."""
    listed = "\n".join(f"{i}. {c}" for i, c in enumerate(calls[:_CALLS_SHOWN], start=1))
    if len(calls) > _CALLS_SHOWN:
        listed += f"\n… and {len(calls) - _CALLS_SHOWN} more"
    if question.scale is None:
        reply = '{"verdict": "pass" or "fail", "reason": "<one sentence>"}'
    else:
        low, high = question.scale
        reply = f'{{"score": <a whole number from {low} to {high}>, "reason": "<one sentence>"}}'
    return (
        f"The user's request:\n{_cut(request or '(none recorded)')}\n\n"
        f"The agent's tool calls ({len(calls)}):\n{listed or '(none)'}\n\n"
        f"The agent's final answer:\n{_cut(answer or '(none)')}\n\n"
        f"Question: {question.question}\n\nReply with exactly: {reply}"
    )


def _cut(text: str) -> str:
    return text if len(text) <= _TEXT_SHOWN else text[:_TEXT_SHOWN] + "…"


def read_verdict(question: JudgeQuestion, text: str) -> Verdict:
    """A reply as a verdict: the first JSON object in it (code fences and prose around it ok)."""
    data = _first_object(text)
    if data is None:
        return Verdict(None, None, "the reply holds no JSON object")
    reason = str(data.get("reason", ""))
    if question.scale is None:
        verdict = str(data.get("verdict", "")).strip().lower()
        if verdict not in ("pass", "fail"):
            return Verdict(None, None, f"verdict {data.get('verdict')!r} is not pass or fail")
        return Verdict(verdict == "pass", 1.0 if verdict == "pass" else 0.0, reason)
    low, high = question.scale
    value = data.get("score")
    if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
        return Verdict(None, None, f"score {value!r} is not a number from {low} to {high}")
    assert question.pass_at is not None
    return Verdict(value >= question.pass_at, float(value), reason)


def _first_object(text: str) -> dict[str, Any] | None:
    """The first JSON object in `text` (from the first `{` where one parses), or None."""
    decoder = json.JSONDecoder()
    start = text.find("{")
    while start >= 0:
        try:
            data, _ = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            data = None
        if isinstance(data, dict):
            return data
        start = text.find("{", start + 1)
    return None


def _combine(
    question: JudgeQuestion, got: Sequence[JudgeReply], model: str
) -> tuple[float, float, str, str, str]:
    """One turn's samples as passed, score, label, explanation and details."""
    verdicts = [
        read_verdict(question, r.text) if r.text is not None else Verdict(None, None, "")
        for r in got
    ]
    failed = next((r.failure for r in got if r.failure is not None), None)
    read = [v for v in verdicts if v.passed is not None]
    passes = sum(bool(v.passed) for v in read)
    details = {
        "model": model, "question": question.question, "samples": len(verdicts),
        "scale": "pass_fail" if question.scale is None else list(question.scale),
        "pass_at": question.pass_at, "agreement": _agreement(verdicts),
        "verdicts": [{"passed": v.passed, "score": v.score, "reason": v.reason} for v in verdicts],
    }  # fmt: skip
    text = json.dumps(details, sort_keys=True, ensure_ascii=False)
    score = float(np.mean([v.score for v in read])) if read else np.nan
    if failed is not None:
        return np.nan, np.nan, "judge failed", f"the judge model failed: {failed}", text
    if len(read) < len(verdicts):
        bad = next(v.reason for v in verdicts if v.passed is None)
        return np.nan, score, "unreadable", f"the judge's reply could not be read: {bad}", text
    if 0 < passes < len(read):
        return np.nan, score, "unstable", _unstable(verdicts, question), text
    verdict = read[0]
    on = "" if question.scale is None else f" (score {_number(score)}, pass at {question.pass_at})"
    times = f"; the same {len(read)} times of {len(read)}" if len(read) > 1 else ""
    word = "pass" if passes else "fail"
    return float(passes > 0), score, word, f"judge: {word}{on}{times}: {verdict.reason}", text


def _agreement(verdicts: Sequence[Verdict]) -> float | None:
    """The share of samples whose pass/fail is the most common one (None: none was read)."""
    read = [v.passed for v in verdicts if v.passed is not None]
    if not read:
        return None
    passes = sum(read)
    return max(passes, len(read) - passes) / len(read)


def _unstable(verdicts: Sequence[Verdict], question: JudgeQuestion) -> str:
    said = ", ".join(
        ("pass" if v.passed else "fail")
        + ("" if question.scale is None or v.score is None else f" ({_number(v.score)})")
        for v in verdicts
    )
    passes = sum(bool(v.passed) for v in verdicts)
    return (
        f"unstable: the judge passed the turn {passes} times of {len(verdicts)} ({said}); "
        "no verdict is given"
    )


def _number(value: float) -> str:
    return f"{value:g}"
