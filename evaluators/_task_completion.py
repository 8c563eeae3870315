"""`task_completion`: did the turn do what was asked, and say so honestly?

Where the source judged the turn itself (a tau-bench or tau2-bench reward), that judgement is
the score. Otherwise the turn passes when it ended by `finish` (not forced, not a limit), no plan
item was left pending or in progress, blocked items carry a reason, and its rubric holds
(required calls, forbidden tools, required plan items, whether a plan was expected, answer
checks). The score is the share of checks that hold; the explanation lists the ones that fail,
with the evidence.

How a turn ended is judged only in plangate's own words (`STOP_REASONS`): another agent's stop
reason ("user_stop", "submitted") says nothing about an explicit finish. A turn with nothing to
judge (no reward, no rubric, no plan, no stop reason of ours) is not applicable: an agent that
said "Sorry, I could not reach the carrier" has not completed its task just because it stopped.

Every turn is judged at once: each check is a column (applies, fails, what failed), the verdict
counts them, and the text is built from templates over columns. Python reads only what is
distinct (stop reasons, plan snapshots, rewards) and what only it can judge (a rubric's call
arguments and answer checks), once per distinct value.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from plangate.evaluators._columns import Floats, TurnScores, overlay, quoted, text
from plangate.evaluators._frame import Ints, TraceFrame
from plangate.evaluators._registry import evaluator, number_param
from plangate.evaluators._rubric import RubricSet
from plangate.evaluators._task_completion_evidence import (
    Check,
    Flags,
    Plans,
    agent_values,
    last_plans,
)
from plangate.evaluators._task_completion_rubric import rubric_checks
from plangate.replay.schema import REWARD, SOURCE, STOP_REASON, STOP_REASONS

NOT_APPLICABLE = "not applicable: no reward, rubric, plan or finish to judge"
LABELS = ("no evidence", "complete", "incomplete")
"""By state: nothing checked, every check holds, a check fails."""
SAID = (
    "the rubric holds",
    "every plan item closed",
    "ended by finish",
    "ended by finish with every plan item closed",
)
"""What a passing turn's explanation says held: by 2 × ended by finish + planned."""


@dataclass(frozen=True, slots=True, eq=False)
class Ending:
    """How each turn ended: its stop reason by code, checked where the reason is plangate's."""

    code: Ints
    """Each turn's stop reason, an index into `notes`."""
    notes: list[str]
    """By stop reason: ` (why the ending was not judged)`, or "" where it is judged."""
    check: Check
    """Ended by `finish`, where the stop reason is plangate's."""


@evaluator("task_completion", version=2)
def task_completion(
    frame: TraceFrame, rubrics: RubricSet, reward_threshold: float = 1.0
) -> TurnScores:
    """Did the turn finish with every plan item closed and its rubric met (or source reward)."""
    reward_threshold = number_param("task_completion", "reward_threshold", reward_threshold)
    reward = np.asarray(agent_values(frame, REWARD).to_numpy(zero_copy_only=False), np.float64)
    reward = np.where(np.isinf(reward), np.nan, reward)  # ±inf: no reward a source gives
    judged = np.isnan(reward)
    plans = last_plans(frame, judged)
    ending = endings(frame, judged)
    checks = [ending.check, *plans.checks(), *rubric_checks(frame, rubrics, plans, judged)]
    scores = verdicts(checks, plans, ending)
    if judged.all():
        return scores
    return with_rewards(scores, frame, reward, reward_threshold)


def endings(frame: TraceFrame, judged: Flags) -> Ending:
    """How each `judged` turn ended: checked where the stop reason is plangate's, else noted."""
    stops = agent_values(frame, STOP_REASON).dictionary_encode()
    reasons: list[str | None] = [*stops.dictionary.to_pylist(), None]
    code = np.asarray(stops.indices.fill_null(len(reasons) - 1).to_numpy(zero_copy_only=False))
    ours = np.array([r in STOP_REASONS for r in reasons], dtype=bool)[code] & judged
    forced = np.array([r != "finished" for r in reasons], dtype=bool)[code] & ours
    failures = pa.array([f"stopped by {r}, not by finish" for r in reasons], pa.string())
    notes = [
        "" if r in STOP_REASONS else f" (the source's stop reason {r!r} is not judged)"
        for r in reasons
    ]
    notes[-1] = " (the source does not say how the turn ended)"
    code = code.astype(np.int64)
    return Ending(code, notes, Check(ours, forced, failures.take(pa.array(code[forced]))))


def verdicts(checks: list[Check], plans: Plans, ending: Ending) -> TurnScores:
    """Each turn's verdict from its checks: the share that holds, what failed or what held.

    A turn where nothing failed is told by a template over small codes (each distinct
    combination written once); a failing turn's text joins its checks' messages.
    """
    applied = np.asarray(np.sum([c.applied for c in checks], axis=0), dtype=np.int64)
    failures = np.asarray(np.sum([c.failed for c in checks], axis=0), dtype=np.int64)
    state = np.where(applied == 0, 0, np.where(failures > 0, 2, 1))
    items = plans.items[plans.code]
    with np.errstate(divide="ignore", invalid="ignore"):
        score = np.where(applied > 0, (applied - failures) / applied, np.nan)

    def told(state: int, stop: int, ended: int, planned: int, applied: int) -> str:
        said = NOT_APPLICABLE if state == 0 else SAID[2 * ended + planned]
        tally = f"; all {applied} checks hold" if state == 1 and applied > 2 else ""
        return said + tally + ending.notes[stop]

    ended = ending.check.applied.astype(np.int64)
    explanation = _rendered(told, state, ending.code, ended, (items > 0).astype(np.int64), applied)
    details = _rendered(_details, applied, items)
    failing = np.flatnonzero(state == 2)
    if len(failing):
        why, written = _failures(checks, failing, applied[failing], items[failing])
        notes = pa.array(ending.notes, pa.string()).take(pa.array(ending.code[failing]))
        explanation = overlay(explanation, failing, text(why, notes, rows=len(failing)))
        details = overlay(details, failing, written)
    return TurnScores(
        passed=np.where(state > 0, (state == 1).astype(np.float64), np.nan),
        score=score,
        label=pa.array(LABELS).take(pa.array(state)),
        explanation=explanation,
        details=details,
    )


def with_rewards(
    scores: TurnScores, frame: TraceFrame, reward: Floats, threshold: float
) -> TurnScores:
    """The verdicts, with the source's own where it rewarded the turn (a reward is not NaN)."""
    rewarded = ~np.isnan(reward)
    _, first, value = np.unique(reward.view(np.int64), return_index=True, return_inverse=True)
    distinct = [float(r) for r in reward[first]]  # by bits: -0.0 is written as itself
    encoded = agent_values(frame, SOURCE).dictionary_encode()
    sources = [*encoded.dictionary.to_pylist(), None]
    source = np.asarray(encoded.indices.fill_null(len(sources) - 1), dtype=np.int64)

    def told(source: int, value: int) -> str:
        return f"{sources[source]} judged the turn: reward {distinct[value]:g}"

    def details(source: int, value: int) -> str:
        return json.dumps({"reward": distinct[value], "source": sources[source]}, sort_keys=True)

    passed = reward >= threshold
    mask = pa.array(rewarded)
    return TurnScores(
        passed=np.where(rewarded, passed.astype(np.float64), scores.passed),
        score=np.where(rewarded, reward, scores.score),
        label=pc.if_else(mask, pc.if_else(pa.array(passed), "success", "failure"), scores.label),
        explanation=pc.if_else(mask, _rendered(told, source, value), scores.explanation),
        details=pc.if_else(mask, _rendered(details, source, value), scores.details),
    )


def _details(applied: int, items: int) -> str:
    return f'{{"checks": {applied}, "failures": [], "plan_items": {items}}}'


def _failures(
    checks: list[Check], rows: Ints, applied: Ints, items: Ints
) -> tuple[pa.Array, pa.Array]:
    """The explanation (without its note) and the details of the turns at `rows`.

    Those are the turns where a check failed; each one's failures are told in check order.
    """
    failed = [(np.flatnonzero(c.failed), c.message) for c in checks if c.failed.any()]
    turn = np.concatenate([at for at, _ in failed])
    check = np.repeat(np.arange(len(failed)), [len(at) for at, _ in failed])
    order = pa.array(np.lexsort((check, turn)))
    messages = pa.concat_arrays([told for _, told in failed]).take(order)
    counts = np.bincount(turn, minlength=len(checks[0].failed))[rows]
    offsets = pa.array(np.concatenate([[0], np.cumsum(counts)]), pa.int32())
    told = pc.binary_join(pa.ListArray.from_arrays(offsets, messages), "; ")
    listed = pc.binary_join(pa.ListArray.from_arrays(offsets, quoted(messages)), ", ")
    details = text(
        '{"checks": ', applied, ', "failures": [', listed, '], "plan_items": ', items, "}",
        rows=len(rows),
    )  # fmt: skip
    return told, details


def _rendered(render: Callable[..., str], *codes: Ints) -> pa.Array:
    """`render(*codes of the row)` for every row, written once per distinct combination.

    The codes are small non-negative whole numbers (a count, an index into a short list).
    """
    key = np.zeros(len(codes[0]), dtype=np.int64)
    for code in codes:
        key = key * (int(code.max()) + 1 if len(code) else 1) + code
    _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    texts = [render(*(int(code[row]) for code in codes)) for row in first]
    return pa.array(texts, pa.string()).take(pa.array(inverse))
