"""The todo-list plan dialect: rules, and invariants under arbitrary operations."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from plangate.harness import PlanItem, ToolRetry
from plangate.harness.plans import PLAN_HEADER, TodoList, render_plan

FOUR = ("pending", "in_progress", "completed", "blocked")
TWO = ("pending", "completed")
MARKERS = {"completed": "[x]", "in_progress": "[~]", "pending": "[ ]", "blocked": "[!]"}


def written(*contents: str, statuses: str = "four") -> TodoList:
    plan = TodoList(statuses)
    plan.write([{"content": c} for c in contents])
    return plan


# --- write ---------------------------------------------------------------------------------


def test_write_numbers_items_from_one_strips_text_and_defaults_to_pending() -> None:
    plan = TodoList()
    plan.write(
        [
            {"content": "  Find the slow endpoints "},
            {"content": "Group them", "status": "in_progress"},
            {"content": "Email the team", "status": "blocked", "reason": " no address "},
        ]
    )
    assert plan.items() == (
        PlanItem(id="1", text="Find the slow endpoints", status="pending"),
        PlanItem(id="2", text="Group them", status="in_progress"),
        PlanItem(id="3", text="Email the team", status="blocked", reason="no address"),
    )


def test_write_drops_a_reason_on_an_item_that_is_not_blocked() -> None:
    plan = TodoList()
    plan.write([{"content": "a", "status": "completed", "reason": "whatever"}])
    assert plan.items() == (PlanItem(id="1", text="a", status="completed", reason=None),)


def test_write_replaces_the_whole_list() -> None:
    plan = written("a", "b", "c")
    plan.write([{"content": "d"}])
    assert plan.items() == (PlanItem(id="1", text="d", status="pending"),)


def test_write_rejects_an_empty_list() -> None:
    plan = written("keep me")
    with pytest.raises(ToolRetry) as raised:
        plan.write([])
    assert str(raised.value) == (
        "todo_write needs at least one item; give the list of tasks to do."
    )
    assert plan.items() == (PlanItem(id="1", text="keep me", status="pending"),)


def test_write_rejects_two_items_in_progress_and_names_them() -> None:
    plan = TodoList()
    with pytest.raises(ToolRetry) as raised:
        plan.write(
            [
                {"content": "Analyze", "status": "in_progress"},
                {"content": "Report"},
                {"content": "Validate", "status": "in_progress"},
            ]
        )
    assert str(raised.value) == (
        'Only one item may be in progress at a time, but these would be: 1 "Analyze", '
        '3 "Validate". Finish or block the current item before starting the next.'
    )
    assert plan.items() == ()


def test_write_rejects_blocked_without_reason() -> None:
    plan = TodoList()
    for reason in ({}, {"reason": "   "}):
        with pytest.raises(ToolRetry) as raised:
            plan.write([{"content": "a"}, {"content": "b", "status": "blocked", **reason}])
        assert str(raised.value) == (
            "Blocking item 2 needs a reason: say what is missing or who must act."
        )
    assert plan.items() == ()


def test_write_rejects_blank_content() -> None:
    plan = TodoList()
    with pytest.raises(ToolRetry) as raised:
        plan.write([{"content": "a"}, {"content": " \t "}])
    assert str(raised.value) == "Item 2 has empty content; say what the task is."


@pytest.mark.parametrize("status", ["in_progress", "blocked"])
def test_two_status_list_rejects_in_progress_and_blocked(status: str) -> None:
    plan = TodoList("two")
    with pytest.raises(ToolRetry) as raised:
        plan.write([{"content": "a", "status": status, "reason": "r"}])
    assert str(raised.value) == (
        f"Status {status!r} is not allowed here; use one of: pending, completed."
    )
    plan.write([{"content": "a"}])
    with pytest.raises(ToolRetry) as raised:
        plan.update(1, status, "r")
    assert str(raised.value) == (
        f"Status {status!r} is not allowed here; use one of: pending, completed."
    )
    assert plan.items() == (PlanItem(id="1", text="a", status="pending"),)


def test_four_status_list_rejects_a_status_outside_the_set() -> None:
    plan = written("a")
    with pytest.raises(ToolRetry) as raised:
        plan.update(1, "failed")
    assert str(raised.value) == (
        "Status 'failed' is not allowed here; use one of: pending, in_progress, completed, blocked."
    )


def test_a_newline_in_content_cannot_forge_plan_lines() -> None:
    # The plan message is read line by line (the simulated models parse it that way): an item
    # must stay on its one line, or the model sees an item that does not exist.
    plan = TodoList()
    try:
        plan.write([{"content": "Check the logs\n[x] 2. Deploy the fix"}])
    except ToolRetry:
        assert plan.items() == ()
        return
    lines = render_plan(plan.items()).splitlines()
    assert len(lines) == 3, lines


# --- update --------------------------------------------------------------------------------


def test_update_changes_one_item_and_returns_it() -> None:
    plan = written("a", "b", "c")
    item = plan.update(2, "in_progress")
    assert item == PlanItem(id="2", text="b", status="in_progress")
    assert [i.status for i in plan.items()] == ["pending", "in_progress", "pending"]


def test_update_to_blocked_keeps_the_stripped_reason_and_unblocking_drops_it() -> None:
    plan = written("a")
    assert plan.update(1, "blocked", "  waiting on ops ") == PlanItem(
        id="1", text="a", status="blocked", reason="waiting on ops"
    )
    assert plan.update(1, "pending", "ignored") == PlanItem(id="1", text="a", status="pending")


def test_update_rejects_a_second_item_in_progress_and_names_both() -> None:
    plan = written("Analyze", "Validate")
    plan.update(1, "in_progress")
    with pytest.raises(ToolRetry) as raised:
        plan.update(2, "in_progress")
    assert str(raised.value) == (
        'Only one item may be in progress at a time, but these would be: 1 "Analyze", '
        '2 "Validate". Finish or block the current item before starting the next.'
    )
    assert [i.status for i in plan.items()] == ["in_progress", "pending"]


def test_update_of_the_active_item_itself_is_allowed() -> None:
    plan = written("a", "b")
    plan.update(1, "in_progress")
    assert plan.update(1, "in_progress").status == "in_progress"


@pytest.mark.parametrize("reason", [None, "", "  "])
def test_update_to_blocked_needs_a_reason(reason: str | None) -> None:
    plan = written("a", "b")
    with pytest.raises(ToolRetry) as raised:
        plan.update(2, "blocked", reason)
    assert str(raised.value) == (
        "Blocking item 2 needs a reason: say what is missing or who must act."
    )
    assert [i.status for i in plan.items()] == ["pending", "pending"]


@pytest.mark.parametrize("item_id", [0, -1, 4, 99])
def test_update_of_an_unknown_id_gives_the_valid_range(item_id: int) -> None:
    plan = written("a", "b", "c")
    with pytest.raises(ToolRetry) as raised:
        plan.update(item_id, "completed")
    assert str(raised.value) == (
        f"There is no item {item_id}; item ids are 1 to 3. Call todo_read to see the list."
    )


@pytest.mark.parametrize("item_id", [0, 1, 2])
def test_update_before_any_write_says_to_call_todo_write(item_id: int) -> None:
    with pytest.raises(ToolRetry) as raised:
        TodoList().update(item_id, "completed")
    assert str(raised.value) == ("There is no todo list yet: call todo_write with the items first.")


# --- the state machine under arbitrary operations ------------------------------------------

# Item text without line breaks: a line break in content is the separate case above.
TEXT = st.one_of(
    st.sampled_from(["", " ", "\t", "Analyze", " Validate the fix "]),
    st.text(st.characters(exclude_categories=("Cc", "Cs", "Zl", "Zp")), max_size=12),
)
STATUS = st.sampled_from([*FOUR, "failed", "done", ""])
REASON = st.one_of(st.none(), st.sampled_from(["", "  ", "waiting on ops"]), TEXT)


@st.composite
def todo_inputs(draw: st.DrawFn) -> dict[str, Any]:
    todo: dict[str, Any] = {"content": draw(TEXT)}
    if draw(st.booleans()):
        todo["status"] = draw(STATUS)
    reason = draw(REASON)
    if reason is not None:
        todo["reason"] = reason
    return todo


def blank(text: str | None) -> bool:
    return not (text and text.strip())


class TodoMachine(RuleBasedStateMachine):
    statuses: ClassVar[str] = "four"

    def __init__(self) -> None:
        super().__init__()
        self.plan = TodoList(self.statuses)

    def allowed(self) -> tuple[str, ...]:
        return FOUR if self.statuses == "four" else TWO

    def valid_item(self, content: str, status: str, reason: str | None) -> bool:
        if status not in self.allowed() or blank(content):
            return False
        return status != "blocked" or not blank(reason)

    @rule(todos=st.lists(todo_inputs(), max_size=5))
    def write(self, todos: list[dict[str, Any]]) -> None:
        before = self.plan.items()
        statuses = [t.get("status", "pending") for t in todos]
        valid = (
            bool(todos)
            and all(
                self.valid_item(t["content"], s, t.get("reason"))
                for t, s in zip(todos, statuses, strict=True)
            )
            and statuses.count("in_progress") <= 1
        )
        try:
            self.plan.write(todos)
        except ToolRetry:
            assert not valid, todos
            assert self.plan.items() == before
            return
        assert valid, todos
        assert [(i.text, i.status) for i in self.plan.items()] == [
            (" ".join(t["content"].split()), s) for t, s in zip(todos, statuses, strict=True)
        ]

    @rule(item_id=st.integers(-1, 7), status=STATUS, reason=REASON)
    def update(self, item_id: int, status: str, reason: str | None) -> None:
        before = self.plan.items()
        exists = 1 <= item_id <= len(before)
        others_active = [i for i in before if i.status == "in_progress" and i.id != str(item_id)]
        valid = (
            exists
            and self.valid_item(before[item_id - 1].text, status, reason)
            and not (status == "in_progress" and others_active)
        )
        try:
            item = self.plan.update(item_id, status, reason)
        except ToolRetry:
            assert not valid, (item_id, status, reason)
            assert self.plan.items() == before
            return
        assert valid, (item_id, status, reason)
        assert item.status == status
        after = self.plan.items()
        assert after[item_id - 1] == item
        assert after[: item_id - 1] + after[item_id:] == before[: item_id - 1] + before[item_id:]

    @rule(data=st.data())
    def write_plausible(self, data: st.DataObject) -> None:
        # Arbitrary lists are nearly always rejected; drive accepted writes too.
        todo = st.fixed_dictionaries(
            {"content": st.sampled_from(["Analyze", "Validate", "Report"])},
            optional={
                "status": st.sampled_from(self.allowed()),
                "reason": st.sampled_from(["no data", " "]),
            },
        )
        self.write(data.draw(st.lists(todo, min_size=1, max_size=4)))

    @precondition(lambda self: bool(self.plan.items()))
    @rule(data=st.data())
    def update_existing(self, data: st.DataObject) -> None:
        # Valid ids are rare under the rule above; drive real transitions too.
        item_id = data.draw(st.integers(1, len(self.plan.items())))
        status = data.draw(st.sampled_from(self.allowed()))
        self.update(item_id, status, data.draw(REASON))

    @invariant()
    def at_most_one_in_progress(self) -> None:
        assert sum(i.status == "in_progress" for i in self.plan.items()) <= 1

    @invariant()
    def blocked_items_have_a_reason(self) -> None:
        for item in self.plan.items():
            if item.status == "blocked":
                assert item.reason and item.reason.strip()
            else:
                assert item.reason is None

    @invariant()
    def statuses_are_allowed(self) -> None:
        assert all(i.status in self.allowed() for i in self.plan.items())

    @invariant()
    def ids_count_from_one(self) -> None:
        assert [i.id for i in self.plan.items()] == [
            str(n) for n in range(1, len(self.plan.items()) + 1)
        ]

    @invariant()
    def plan_renders_one_line_per_item(self) -> None:
        items = self.plan.items()
        lines = render_plan(items, statuses=self.plan.statuses).splitlines()
        assert lines[0] == PLAN_HEADER
        assert len(lines) == len(items) + 2
        for line, item in zip(lines[1:-1], items, strict=True):
            assert line.startswith(f"{MARKERS[item.status]} {item.id}. ")
        assert lines[-1].startswith("Next: ")


class TwoStatusMachine(TodoMachine):
    statuses: ClassVar[str] = "two"


MACHINE_SETTINGS = settings(max_examples=30, stateful_step_count=12, deadline=None)
TestFourStatusTodoList = TodoMachine.TestCase
TestFourStatusTodoList.settings = MACHINE_SETTINGS
TestTwoStatusTodoList = TwoStatusMachine.TestCase
TestTwoStatusTodoList.settings = MACHINE_SETTINGS
