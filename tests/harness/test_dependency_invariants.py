"""The dependency plan's saved state, and its invariants under arbitrary calls."""

from __future__ import annotations

import dataclasses
import graphlib
import json
import re
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, TypeVar

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from plangate.harness import PlanItem, ToolRetry
from plangate.harness.plans import DependencyPlan
from plangate.harness.plans._plan import ready_items
from tests.harness.test_dependency_plan import planned, step

T = TypeVar("T")


# --- persistence ---------------------------------------------------------------------------


def test_to_dict_and_from_dict_round_trip_exactly() -> None:
    plan = planned(step("a"), step("b", "a"), step("c"), step("d"), step("e", "d"), strict=True)
    plan.done("a", "line one\nline two")
    plan.start("b")
    plan.failed("d", "gone")
    saved = plan.to_dict()
    assert saved == {
        "max_plan_steps": 20,
        "strict_dependencies": True,
        "steps": [
            {"id": "a", "text": "Do a", "status": "completed", "result": "line one\nline two"},
            {"id": "b", "text": "Do b", "status": "in_progress", "depends_on": ["a"]},
            {"id": "c", "text": "Do c", "status": "pending"},
            {"id": "d", "text": "Do d", "status": "failed", "reason": "gone"},
            {"id": "e", "text": "Do e", "status": "pending", "depends_on": ["d"]},
        ],
    }
    restored = DependencyPlan.from_dict(json.loads(json.dumps(saved)))
    assert restored.to_dict() == saved
    assert restored.items() == plan.items()
    assert restored.items()[4].status == "blocked"
    assert restored.strict_dependencies is True


def test_an_empty_plan_round_trips() -> None:
    plan = DependencyPlan(max_plan_steps=5)
    restored = DependencyPlan.from_dict(plan.to_dict())
    assert restored.items() == ()
    assert restored.max_plan_steps == 5


@pytest.mark.parametrize(
    ("steps", "message"),
    [
        ([{"id": "a", "text": "t", "status": "blocked"}], "saved step 'a' has status 'blocked'"),
        (
            [{"id": "a", "text": "t", "status": "pending", "depends_on": ["z"]}],
            "saved step 'a' depends on unknown steps ['z']",
        ),
        (
            [
                {"id": "a", "text": "t", "status": "pending", "depends_on": ["b"]},
                {"id": "b", "text": "t", "status": "pending", "depends_on": ["a"]},
            ],
            "saved plan has a dependency cycle: a -> b -> a",
        ),
    ],
)
def test_from_dict_refuses_a_state_the_plan_cannot_reach(
    steps: list[dict[str, Any]], message: str
) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        DependencyPlan.from_dict({"steps": steps})


# --- the state machine under arbitrary operations ------------------------------------------

NAMES = ["a", "b", "c", "d", "e"]
BAD_NAMES = ["", "B", "a b", "x" * 65]
NAME_PATTERN = re.compile(r"[a-z0-9_-]{1,64}")
DESCRIPTIONS = st.sampled_from(["", "  ", "Do it", "two\nlines"])
ANY_NAME = st.one_of(st.sampled_from(NAMES), st.sampled_from([*BAD_NAMES, "z"]))
RESULTS = st.sampled_from(["", " ", "12 rows", "ok\nmore "])
REASONS = st.sampled_from(["", "  ", "timeout", "two\nlines"])


@st.composite
def step_inputs(draw: st.DrawFn) -> dict[str, Any]:
    data: dict[str, Any] = {"name": draw(ANY_NAME), "description": draw(DESCRIPTIONS)}
    if draw(st.booleans()):
        data["depends_on"] = draw(st.lists(st.sampled_from([*NAMES, "z"]), max_size=3))
    return data


@st.composite
def plausible_plans(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Mostly valid plans: unique names, dependencies on earlier steps, now and then a cycle."""
    names = draw(st.permutations(NAMES))[: draw(st.integers(2, len(NAMES) - 1))]
    steps: list[dict[str, Any]] = []
    for index, name in enumerate(names):
        earlier = names[:index]
        depends_on = draw(st.lists(st.sampled_from(earlier), max_size=2)) if earlier else []
        steps.append({"name": name, "description": f"Do {name}", "depends_on": depends_on})
    if draw(st.integers(0, 9)) == 0:
        steps[0]["depends_on"] = [names[-1]]
    return steps


def blank(text: str) -> bool:
    return not text.strip()


def one_line(text: str) -> str:
    return " ".join(text.split())


def acyclic(depends_on: dict[str, Sequence[str]]) -> bool:
    try:
        graphlib.TopologicalSorter(depends_on).prepare()
    except graphlib.CycleError:
        return False
    return True


def valid_plan(steps: list[dict[str, Any]], limit: int) -> bool:
    names = [s["name"] for s in steps]
    if not 2 <= len(steps) <= limit or len(set(names)) != len(names):
        return False
    if not all(NAME_PATTERN.fullmatch(name) for name in names):
        return False
    if any(blank(s["description"]) for s in steps):
        return False
    depends_on = {s["name"]: s.get("depends_on", []) for s in steps}
    known = all(d in depends_on for deps in depends_on.values() for d in deps)
    return known and acyclic(depends_on)


def below(items: Sequence[PlanItem], name: str) -> set[str]:
    """The steps that depend on `name`, directly or further down (a reference version)."""
    found: set[str] = set()
    changed = True
    while changed:
        more = {i.id for i in items if set(i.depends_on) & (found | {name})} - found
        changed = bool(more)
        found |= more
    return found


def replaced(items: Sequence[PlanItem], item: PlanItem) -> tuple[PlanItem, ...]:
    return tuple(item if i.id == item.id else i for i in items)


class DependencyMachine(RuleBasedStateMachine):
    strict: ClassVar[bool] = False
    limit: ClassVar[int] = len(NAMES) - 1

    def __init__(self) -> None:
        super().__init__()
        self.plan = DependencyPlan(max_plan_steps=self.limit, strict_dependencies=self.strict)
        self.results: dict[str, str] = {}

    def attempt(self, operation: Callable[[], T]) -> tuple[bool, T | None]:
        """Run an operation; a refusal must say something and change nothing."""
        before, saved = self.plan.items(), self.plan.to_dict()
        try:
            value = operation()
        except ToolRetry as exc:
            assert str(exc)
            assert self.plan.items() == before
            assert self.plan.to_dict() == saved
            return False, None
        return True, value

    def find(self, name: str) -> PlanItem | None:
        return next((i for i in self.plan.items() if i.id == name), None)

    def unmet(self, item: PlanItem) -> list[str]:
        done = {i.id for i in self.plan.items() if i.status == "completed"}
        return [d for d in item.depends_on if d not in done]

    # --- rules ---

    @rule(steps=st.lists(step_inputs(), max_size=6))
    def create(self, steps: list[dict[str, Any]]) -> None:
        before = {i.id: i for i in self.plan.items()}
        ok, _ = self.attempt(lambda: self.plan.create(steps))
        assert ok == valid_plan(steps, self.limit), steps
        if not ok:
            return
        expected = []
        for s in steps:
            kept = before.get(s["name"])
            completed = kept is not None and kept.status == "completed"
            expected.append(
                PlanItem(
                    id=s["name"],
                    text=one_line(s["description"]),
                    status="completed" if completed else "pending",
                    depends_on=tuple(dict.fromkeys(s.get("depends_on", []))),
                    result=kept.result if kept is not None and completed else None,
                )
            )
        assert self.plan.items() == tuple(expected)

    @initialize(steps=st.one_of(st.just([]), plausible_plans(), plausible_plans()))
    def first_plan(self, steps: list[dict[str, Any]]) -> None:
        self.create(steps)

    @rule(steps=plausible_plans())
    def create_plausible(self, steps: list[dict[str, Any]]) -> None:
        self.create(steps)

    @rule(name=ANY_NAME)
    def start(self, name: str) -> None:
        item, before = self.find(name), self.plan.items()
        unmet = self.unmet(item) if item is not None else []
        ok, warnings = self.attempt(lambda: self.plan.start(name))
        if item is None or item.status in ("completed", "failed", "blocked"):
            assert not ok
        elif item.status == "in_progress":
            assert ok and warnings and "already in progress" in warnings[0]
            assert self.plan.items() == before
        elif self.check_transition(ok, before, item, unmet, status="in_progress"):
            assert warnings == self.expected_warnings(unmet)

    @rule(name=ANY_NAME, result=RESULTS)
    def done(self, name: str, result: str) -> None:
        item, before = self.find(name), self.plan.items()
        unmet = self.unmet(item) if item is not None else []
        ok, note = self.attempt(lambda: self.plan.done(name, result))
        if item is None or item.status in ("failed", "blocked"):
            assert not ok
        elif item.status == "completed":
            assert ok and note and "already completed" in note
            assert self.plan.items() == before
        elif blank(result):
            assert not ok
        elif self.check_transition(
            ok, before, item, unmet, status="completed", result=result.strip()
        ):
            assert ([note] if note else []) == self.expected_warnings(unmet)
            self.results[name] = result.strip()

    @rule(name=ANY_NAME, reason=REASONS)
    def failed(self, name: str, reason: str) -> None:
        item = self.find(name)
        before = self.plan.items()
        ok, _ = self.attempt(lambda: self.plan.failed(name, reason))
        if (
            item is None
            or item.status == "completed"
            or (item.status != "failed" and blank(reason))
        ):
            assert not ok
            return
        assert ok
        if item.status == "failed":
            assert self.plan.items() == before
            return
        dependents = below(before, name)
        for old, new in zip(before, self.plan.items(), strict=True):
            if new.id == name:
                assert new == PlanItem(
                    id=name,
                    text=old.text,
                    status="failed",
                    reason=one_line(reason),
                    depends_on=old.depends_on,
                )
            elif new.id in dependents and old.status != "failed":
                assert (new.status, new.result) == ("blocked", None)
            else:
                assert new == old

    @precondition(lambda self: bool(self.plan.items()))
    @rule(data=st.data())
    def work_on_a_step(self, data: st.DataObject) -> None:
        # Names drawn from the whole alphabet often miss the plan; drive real transitions too.
        name = data.draw(st.sampled_from([i.id for i in self.plan.items()]))
        operation = data.draw(st.sampled_from(["start", "start", "done", "done", "failed"]))
        if operation == "start":
            self.start(name)
        elif operation == "done":
            self.done(name, data.draw(RESULTS))
        else:
            self.failed(name, data.draw(REASONS))

    @precondition(
        lambda self: any(i.status in ("pending", "in_progress") for i in self.plan.items())
    )
    @rule(data=st.data())
    def advance(self, data: st.DataObject) -> None:
        # Carry the plan forward as a diligent model would: finish what runs, start what is ready.
        active = [i.id for i in self.plan.items() if i.status == "in_progress"]
        if active:
            self.done(data.draw(st.sampled_from(active)), "12 rows")
        elif ready := [i.id for i in self.plan.ready()]:
            self.start(data.draw(st.sampled_from(ready)))

    @staticmethod
    def expected_warnings(unmet: list[str]) -> list[str]:
        return [f"unsatisfied dependencies, proceeding anyway: {', '.join(unmet)}"] if unmet else []

    def check_transition(
        self,
        ok: bool,
        before: tuple[PlanItem, ...],
        item: PlanItem,
        unmet: list[str],
        **changes: Any,
    ) -> bool:
        """A pending or in-progress step moves on, unless (strict) a dependency is unfinished.

        This is the strict rule "at the time": whether a step may move on is decided by the
        dependencies' statuses before the call.
        """
        if self.strict and unmet:
            assert not ok, (item, unmet)
            return False
        assert ok, item
        assert self.plan.items() == replaced(before, dataclasses.replace(item, **changes))
        return True

    # --- invariants ---

    @invariant()
    def dependencies_exist_and_form_no_cycle(self) -> None:
        items = self.plan.items()
        names = {i.id for i in items}
        assert all(d in names for i in items for d in i.depends_on)
        assert acyclic({i.id: i.depends_on for i in items})

    @invariant()
    def step_count_is_within_bounds(self) -> None:
        assert len(self.plan.items()) == 0 or 2 <= len(self.plan.items()) <= self.limit

    @invariant()
    def completed_steps_keep_their_result(self) -> None:
        for item in self.plan.items():
            if item.status == "completed":
                assert item.result == self.results[item.id]
            else:
                assert item.result is None

    @invariant()
    def nothing_below_a_failed_step_is_active_or_completed(self) -> None:
        items = self.plan.items()
        for failed in (i for i in items if i.status == "failed"):
            assert failed.reason and failed.reason == one_line(failed.reason)
            for item in items:
                if item.id in below(items, failed.id):
                    assert item.status in ("blocked", "failed"), (failed.id, item)

    @invariant()
    def blocked_means_below_a_failed_step(self) -> None:
        items = self.plan.items()
        failed = [i.id for i in items if i.status == "failed"]
        for item in items:
            is_below = any(item.id in below(items, f) for f in failed)
            assert (item.status == "blocked") == (is_below and item.status != "failed")
            if item.status == "blocked":
                assert item.reason and item.reason.startswith("depends on failed step")

    @invariant()
    def strict_steps_in_progress_have_their_dependencies_completed(self) -> None:
        if self.strict:
            for item in self.plan.items():
                if item.status == "in_progress":
                    assert self.unmet(item) == []

    @invariant()
    def ready_steps_are_the_shared_view(self) -> None:
        assert self.plan.ready() == ready_items(self.plan.items())

    @invariant()
    def saved_state_round_trips(self) -> None:
        saved = self.plan.to_dict()
        restored = DependencyPlan.from_dict(json.loads(json.dumps(saved)))
        assert restored.to_dict() == saved
        assert restored.items() == self.plan.items()


class StrictDependencyMachine(DependencyMachine):
    strict: ClassVar[bool] = True


MACHINE_SETTINGS = settings(max_examples=40, stateful_step_count=15, deadline=None)
TestDependencyPlan = DependencyMachine.TestCase
TestDependencyPlan.settings = MACHINE_SETTINGS
TestStrictDependencyPlan = StrictDependencyMachine.TestCase
TestStrictDependencyPlan.settings = MACHINE_SETTINGS
