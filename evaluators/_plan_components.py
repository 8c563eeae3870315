"""How a turn's plan-adherence evidence becomes its verdict: one component per rule, with limits.

Each component (work tracked by the plan, one item at a time, items earned, bookkeeping per work
call, nothing dropped silently, dependency order) passes or fails against the evaluator's
limits and says why; the score is the share of applicable components that pass.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from plangate.evaluators.scores import DETAILS, EXPLANATION, LABEL, PASSED, SCORE
from plangate.replay.schema import SESSION_ID, TURN_INDEX

MAX_LISTED = 5


@dataclass(frozen=True, slots=True)
class Limits:
    """The thresholds of one run."""

    max_bookkeeping_ratio: float
    min_tracked_share: float


@dataclass(frozen=True, slots=True)
class Component:
    """One component of a turn's adherence: its score (None: does not apply) and evidence."""

    name: str
    score: float | None
    holds: bool
    text: str
    label: str


def verdict(
    key: tuple[str, int], record: dict[str, Any], limits: Limits, plan_expected: bool
) -> dict[str, Any]:
    """The result row of one turn from its evidence `record` (no plan: no score)."""
    base = {SESSION_ID: key[0], TURN_INDEX: key[1]}
    if _count(record, "items") == 0 or _count(record, "snapshots") == 0:
        return {
            **base,
            SCORE: None,
            PASSED: False if plan_expected else None,
            LABEL: "no plan",
            EXPLANATION: "no plan in this turn; the rubric expects one"
            if plan_expected
            else "not applicable: no plan in this turn",
            DETAILS: {"plan": False, "plan_expected": plan_expected},
        }
    components = [build(record, limits) for build in _COMPONENTS]
    applicable = [c.score for c in components if c.score is not None]
    failed = [c for c in components if not c.holds]
    shown = failed + [c for c in components if c.holds and c.text]
    details: dict[str, Any] = {"plan": True, **_details(record)}
    details["components"] = {c.name: c.score for c in components}
    return {
        **base,
        SCORE: sum(applicable) / len(applicable) if applicable else None,
        PASSED: not failed,
        LABEL: failed[0].label if failed else "adherent",
        EXPLANATION: "; ".join(c.text for c in shown),
        DETAILS: details,
    }


def _tracked(record: dict[str, Any], limits: Limits) -> Component:
    work, tracked = _count(record, "work_calls"), _count(record, "tracked_calls")
    if work == 0:
        return Component("tracked_work", None, True, "no work calls", "untracked work")
    share = tracked / work
    where = "an item was in progress" if _flag(record, "four_status") else "an item was open"
    text = f"{tracked} of {work} work calls made while {where}"
    if tracked < work:
        text += f" (untracked: {_listed(record.get('untracked'))})"
    holds = share >= limits.min_tracked_share
    if not holds:
        text += f", below {limits.min_tracked_share:g}"
    return Component("tracked_work", share, holds, text, "untracked work")


def _single(record: dict[str, Any], limits: Limits) -> Component:
    snapshots = _count(record, "snapshots")
    several = _evidence(record, "several_active")
    if not several:
        return Component(
            "one_at_a_time", 1.0, True,
            f"at most one item in progress in {_plural(snapshots, 'snapshot', every=True)}",
            "several in progress",
        )  # fmt: skip
    text = (
        f"{len(several)} of {snapshots} snapshots had several items in progress "
        f"({_listed(several)})"
    )
    return Component(
        "one_at_a_time", 1 - len(several) / snapshots, False, text, "several in progress"
    )


def _earned(record: dict[str, Any], limits: Limits) -> Component:
    completions = _count(record, "completions")
    lazy = _evidence(record, "unworked")
    if completions == 0:
        return Component("worked_on", None, True, "no item completed", "completed without work")
    worked = completions - len(lazy)
    text = f"{worked} of {completions} completed items were worked on"
    if lazy:
        text += f" (not: {_listed(lazy)})"
    return Component("worked_on", worked / completions, not lazy, text, "completed without work")


def _ratio(record: dict[str, Any], limits: Limits) -> Component:
    plan, work = _count(record, "plan_calls"), _count(record, "work_calls")
    if work == 0:
        text = f"{_plural(plan, 'plan call')}, no work calls"
        return Component("bookkeeping", None, True, text, "bookkeeping")
    ratio = plan / work
    limit = limits.max_bookkeeping_ratio
    holds = ratio <= limit
    text = (
        f"{_plural(plan, 'plan call')} for {_plural(work, 'work call')} "
        f"(ratio {ratio:.2f}, {'within' if holds else 'above'} the limit {limit:g})"
    )
    score = 1.0 if holds else limit / ratio
    return Component("bookkeeping", score, holds, text, "bookkeeping")


def _dropped(record: dict[str, Any], limits: Limits) -> Component:
    count = _count(record, "items")
    dropped = _evidence(record, "dropped")
    if not dropped:
        text = f"no item dropped ({_plural(count, 'item')})"
        return Component("kept", 1.0, True, text, "dropped items")
    text = (
        f"{len(dropped)} of {count} items dropped without being completed, blocked or failed: "
        f"{_listed(dropped)}"
    )
    return Component("kept", 1 - len(dropped) / count, False, text, "dropped items")


def _ordered(record: dict[str, Any], limits: Limits) -> Component:
    checks = _count(record, "dependency_checks")
    wrong = _evidence(record, "out_of_order")
    if checks == 0:
        return Component("dependency_order", None, True, "", "dependency order")
    if not wrong:
        text = f"dependency order respected in {checks} starts and completions"
        return Component("dependency_order", 1.0, True, text, "dependency order")
    text = (
        f"{len(wrong)} of {checks} starts and completions came before their dependencies "
        f"completed: {_listed(wrong)}"
    )
    return Component("dependency_order", 1 - len(wrong) / checks, False, text, "dependency order")


def _details(record: dict[str, Any]) -> dict[str, Any]:
    work, plan = _count(record, "work_calls"), _count(record, "plan_calls")
    completions, unworked = _count(record, "completions"), _evidence(record, "unworked")
    return {
        "statuses": "four" if _flag(record, "four_status") else "two",
        "work_calls": work,
        "tracked_calls": _count(record, "tracked_calls"),
        "tracked_share": _count(record, "tracked_calls") / work if work else None,
        "untracked": _evidence(record, "untracked"),
        "snapshots": _count(record, "snapshots"),
        "max_in_progress": _count(record, "max_in_progress"),
        "several_in_progress": _evidence(record, "several_active"),
        "completions": completions,
        "worked_on": completions - len(unworked),
        "unworked": unworked,
        "plan_calls": plan,
        "bookkeeping_ratio": plan / work if work else None,
        "items": _count(record, "items"),
        "dropped": _evidence(record, "dropped"),
        "dependency_checks": _count(record, "dependency_checks"),
        "out_of_order": _evidence(record, "out_of_order"),
    }


def _count(record: dict[str, Any], name: str) -> int:
    value = record.get(name)
    if value is None or value is pd.NA or (isinstance(value, float) and value != value):
        return 0
    return int(value)


def _flag(record: dict[str, Any], name: str) -> bool:
    value = record.get(name)
    return isinstance(value, bool | np.bool_) and bool(value)


def _evidence(record: dict[str, Any], name: str) -> list[str]:
    value = record.get(name)
    return [str(v) for v in value] if isinstance(value, list) else []


def _plural(count: int, noun: str, *, every: bool = False) -> str:
    if count == 1:
        return f"the 1 {noun}" if every else f"1 {noun}"
    return f"all {count} {noun}s" if every else f"{count} {noun}s"


def _listed(values: Iterable[str] | None) -> str:
    shown = list(values or [])
    text = ", ".join(shown[:MAX_LISTED])
    return text + (f" and {len(shown) - MAX_LISTED} more" if len(shown) > MAX_LISTED else "")


"""Evidence lists in explanations stop after this many entries."""


_COMPONENTS: tuple[Callable[[dict[str, Any], Limits], Component], ...] = (
    _tracked,
    _single,
    _earned,
    _ratio,
    _dropped,
    _ordered,
)
