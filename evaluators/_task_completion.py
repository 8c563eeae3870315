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
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from plangate.evaluators._frame import TraceFrame
from plangate.evaluators._registry import evaluator
from plangate.evaluators._rubric import Rubric, RubricSet
from plangate.evaluators.scores import (
    DETAILS,
    EXPLANATION,
    LABEL,
    PASSED,
    RESULT_COLUMNS,
    SCORE,
    TURN_KEY,
)
from plangate.replay.schema import SESSION_ID, STOP_REASONS, TOOL_ARGS, TOOL_NAME, TURN_INDEX

OPEN = ("pending", "in_progress")
_MARK = {
    "pending": "[ ]",
    "in_progress": "[~]",
    "completed": "[x]",
    "blocked": "[!]",
    "failed": "[!]",
}


@dataclass(slots=True)
class Checks:
    """The checks of one turn: how many were applied, and what failed."""

    applied: int = 0
    failures: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    ending_judged: bool = False
    """Whether how the turn ended was checked (only in plangate's own stop reasons)."""

    def check(self, ok: bool, failure: str) -> None:
        """Apply one check."""
        self.applied += 1
        if not ok:
            self.failures.append(failure)


@evaluator("task_completion", version=2)
def task_completion(
    frame: TraceFrame, rubrics: RubricSet, reward_threshold: float = 1.0
) -> pd.DataFrame:
    """Did the turn finish with every plan item closed and its rubric met (or source reward)."""
    last = (
        frame.span_frame[frame.span_frame["plan"].notna()]
        .groupby(TURN_KEY, sort=False)["plan"]
        .last()
    )
    plans = {(str(s), int(t)): p for (s, t), p in last.items()}
    needs_calls = rubrics.uses("required_tools") or rubrics.uses("forbidden_tools")
    calls = _calls_by_turn(frame) if needs_calls else {}
    rows = []
    for turn in frame.turn_frame.itertuples(index=False):
        key = (turn.session_id, int(turn.turn_index))
        if not _missing(turn.reward):
            rows.append(_from_reward(key, float(turn.reward), str(turn.source), reward_threshold))
            continue
        plan = json.loads(plans[key]) if key in plans else None
        checks = _judge(turn, plan, calls.get(key, []), rubrics.lookup(*key))
        rows.append(_row(key, checks, plan))
    return pd.DataFrame(
        rows,
        columns=RESULT_COLUMNS,
    )


def _from_reward(
    key: tuple[str, int], reward: float, source: str, threshold: float
) -> dict[str, Any]:
    passed = reward >= threshold
    return {
        SESSION_ID: key[0],
        TURN_INDEX: key[1],
        SCORE: reward,
        PASSED: passed,
        LABEL: "success" if passed else "failure",
        EXPLANATION: f"{source} judged the turn: reward {reward:g}",
        DETAILS: {"reward": reward, "source": source},
    }


def _judge(
    turn: Any,
    plan: list[dict[str, Any]] | None,
    calls: list[tuple[str, Any]],
    rubric: Rubric | None,
) -> Checks:
    checks = Checks()
    stop = None if _missing(turn.stop_reason) else str(turn.stop_reason)
    if stop is None:
        checks.notes.append("the source does not say how the turn ended")
    elif stop not in STOP_REASONS:
        checks.notes.append(f"the source's stop reason {stop!r} is not judged")
    else:
        checks.ending_judged = True
        checks.check(stop == "finished", f"stopped by {stop}, not by finish")
    items = plan or []
    open_items = [i for i in items if i.get("status") in OPEN]
    if items:
        checks.check(
            not open_items,
            f"{len(open_items)} plan item(s) left open: " + ", ".join(_item(i) for i in open_items),
        )
    unexplained = [i for i in items if i.get("status") == "blocked" and not i.get("reason")]
    if any(i.get("status") == "blocked" for i in items):
        checks.check(
            not unexplained, "blocked without a reason: " + ", ".join(_item(i) for i in unexplained)
        )
    if rubric is not None:
        answer = "" if _missing(turn.output_value) else str(turn.output_value)
        _apply_rubric(checks, rubric, items, plan is not None, calls, answer)
    return checks


def _apply_rubric(
    checks: Checks,
    rubric: Rubric,
    items: list[dict[str, Any]],
    planned: bool,
    calls: list[tuple[str, Any]],
    answer: str,
) -> None:
    if rubric.plan_expected is True:
        checks.check(planned and bool(items), "a plan was expected but none was made")
    elif rubric.plan_expected is False:
        checks.check(not items, f"planned a request that needed no plan ({len(items)} items)")
    for expected in rubric.required_tools:
        made = any(expected.matches(name, args) for name, args in calls)
        checks.check(made, f"required call {expected.describe()} was never made")
    for name in rubric.forbidden_tools:
        count = sum(1 for called, _ in calls if called == name)
        checks.check(count == 0, f"called forbidden tool {name} ({count} times)")
    closed = [
        str(i.get("text", "")).lower() for i in items if i.get("status") in ("completed", "blocked")
    ]
    for text in rubric.required_plan_items:
        checks.check(
            any(text.lower() in c for c in closed), f"plan item {text!r} was not completed"
        )
    for answer_check in rubric.answer:
        problem = answer_check.check(answer)
        checks.check(problem is None, problem or "")


def _row(key: tuple[str, int], checks: Checks, plan: list[dict[str, Any]] | None) -> dict[str, Any]:
    passed = not checks.failures
    score = (checks.applied - len(checks.failures)) / checks.applied if checks.applied else None
    if not checks.applied:
        explanation = "not applicable: no reward, rubric, plan or finish to judge"
        if checks.notes:
            explanation += f" ({'; '.join(checks.notes)})"
        details = {"checks": 0, "failures": [], "plan_items": 0}
        return {**_key(key), SCORE: None, PASSED: None, LABEL: "no evidence",
                EXPLANATION: explanation, DETAILS: details}  # fmt: skip
    if passed:
        held = ["ended by finish"] if checks.ending_judged else []
        held += ["every plan item closed"] if plan else []
        explanation = " with ".join(held) or "the rubric holds"
        if checks.applied > 2:
            explanation += f"; all {checks.applied} checks hold"
    else:
        explanation = "; ".join(checks.failures)
    if checks.notes:
        explanation += f" ({'; '.join(checks.notes)})"
    return {
        SESSION_ID: key[0],
        TURN_INDEX: key[1],
        SCORE: score,
        PASSED: passed,
        LABEL: "complete" if passed else "incomplete",
        EXPLANATION: explanation,
        DETAILS: {
            "checks": checks.applied,
            "failures": checks.failures,
            "plan_items": len(plan or []),
        },
    }


def _key(key: tuple[str, int]) -> dict[str, Any]:
    return {SESSION_ID: key[0], TURN_INDEX: key[1]}


def _calls_by_turn(frame: TraceFrame) -> dict[tuple[str, int], list[tuple[str, Any]]]:
    calls: dict[tuple[str, int], list[tuple[str, Any]]] = {}
    tools = frame.tool_frame
    for session, turn, name, args in zip(
        tools[SESSION_ID],
        tools[TURN_INDEX],
        tools[TOOL_NAME],
        tools[TOOL_ARGS],
        strict=True,
    ):
        calls.setdefault((session, int(turn)), []).append((str(name), _parse(args)))
    return calls


def _parse(arguments: Any) -> Mapping[str, Any] | None:
    if _missing(arguments):
        return None
    try:
        value = json.loads(arguments)
    except (TypeError, json.JSONDecodeError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def _item(item: Mapping[str, Any]) -> str:
    mark = _MARK.get(str(item.get("status")), "[?]")
    return f"{mark} {item.get('id', '?')} {item.get('text', '')!r} ({item.get('status')})"


def _missing(value: Any) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and value != value)
