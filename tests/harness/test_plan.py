"""The plan view every dialect shares, and the harness-owned plan."""

from __future__ import annotations

from typing import Literal

import pytest

from plangate.harness import PlanItem
from plangate.harness.plans import (
    PLAN_HEADER,
    HarnessPlan,
    PlanStatus,
    incomplete,
    render_plan,
    snapshot,
    status_line,
)
from plangate.harness.plans._plan import next_action


def item(id: str, text: str, status: PlanStatus = "pending", reason: str | None = None) -> PlanItem:
    return PlanItem(id=id, text=text, status=status, reason=reason)


FIVE = (
    item("1", "collect", "completed"),
    item("2", "filter", "completed"),
    item("3", "analyze", "in_progress"),
    item("4", "validate"),
    item("5", "report"),
)


def test_render_plan_marks_every_status() -> None:
    items = (
        item("1", "Find the slow endpoints", "completed"),
        item("2", "Group them by service", "in_progress"),
        item("3", "Write a report"),
        item("4", "Email the team", "blocked", "no address"),
        item("5", "Deploy", "failed", "tests red"),
    )
    assert render_plan(items) == "\n".join(
        [
            "# Plan",
            "[x] 1. Find the slow endpoints",
            "[~] 2. Group them by service ← CURRENT",
            "[ ] 3. Write a report",
            "[!] 4. Email the team (blocked: no address)",
            "[!] 5. Deploy (failed: tests red)",
            'Next: work on "Group them by service"; mark it completed as soon as it is done.',
        ]
    )


def test_render_plan_of_a_blocked_item_without_reason_says_so() -> None:
    lines = render_plan((item("1", "a", "blocked"),)).splitlines()
    assert lines[1] == "[!] 1. a (blocked: no reason given)"


def test_render_plan_with_no_items() -> None:
    assert render_plan(()) == (
        f"{PLAN_HEADER}\n"
        "Next: no plan yet. If the request has two or more tasks, write the plan first."
    )


@pytest.mark.parametrize(
    ("items", "statuses", "expected"),
    [
        (
            (),
            "four",
            "Next: no plan yet. If the request has two or more tasks, write the plan first.",
        ),
        (
            (),
            "two",
            "Next: no plan yet. If the request has two or more tasks, write the plan first.",
        ),
        (
            FIVE,
            "four",
            'Next: work on "analyze"; mark it completed as soon as it is done.',
        ),
        (
            (item("1", "a", "completed"), item("2", "b"), item("3", "c")),
            "four",
            'Next: mark "b" in_progress and work on it.',
        ),
        (
            (item("1", "a", "completed"), item("2", "b"), item("3", "c")),
            "two",
            'Next: do "b", then mark it completed.',
        ),
        (
            (item("1", "a", "completed"), item("2", "b", "blocked", "r")),
            "four",
            "Next: every item is completed or blocked; call finish with a summary.",
        ),
        (
            (item("1", "a", "completed"), item("2", "b", "completed")),
            "two",
            "Next: every item is completed or blocked; call finish with a summary.",
        ),
    ],
    ids=["none-four", "none-two", "active", "pending-four", "pending-two", "blocked", "done"],
)
def test_next_action(
    items: tuple[PlanItem, ...], statuses: Literal["two", "four"], expected: str
) -> None:
    assert next_action(items, statuses=statuses) == expected
    assert render_plan(items, statuses=statuses).splitlines()[-1] == expected


def test_status_line_names_the_active_and_the_next_ready_item() -> None:
    assert status_line(FIVE) == '[Plan: 2/5 done. Active: "analyze". Ready: "validate".]'


@pytest.mark.parametrize(
    ("items", "expected"),
    [
        ((), "[Plan: 0/0 done.]"),
        ((item("1", "a"), item("2", "b")), '[Plan: 0/2 done. Ready: "a".]'),
        ((item("1", "a", "in_progress"),), '[Plan: 0/1 done. Active: "a".]'),
        (
            (item("1", "a", "completed"), item("2", "b", "blocked", "r")),
            "[Plan: 1/2 done.]",
        ),
    ],
)
def test_status_line_leaves_out_what_is_missing(items: tuple[PlanItem, ...], expected: str) -> None:
    assert status_line(items) == expected


def test_incomplete_keeps_pending_and_in_progress_items() -> None:
    items = (*FIVE, item("6", "email", "blocked", "r"), item("7", "deploy", "failed", "x"))
    assert [i.id for i in incomplete(items)] == ["3", "4", "5"]
    assert incomplete(FIVE[:2]) == []


def test_snapshot_is_compact_json_with_reason_only_when_set() -> None:
    items = (item("1", "Café", "completed"), item("2", "b", "blocked", "waiting"))
    assert snapshot(items) == (
        '[{"id":"1","text":"Café","status":"completed"},'
        '{"id":"2","text":"b","status":"blocked","reason":"waiting"}]'
    )


# --- the harness-owned plan ----------------------------------------------------------------

REQUEST = "Find the slow endpoints, group them by service and write a report."


def test_harness_plan_starts_with_one_item_per_task_and_the_first_in_progress() -> None:
    plan = HarnessPlan()
    assert plan.items() == ()
    assert plan.current() is None
    plan.start(REQUEST)
    assert plan.items() == (
        item("1", "Find the slow endpoints", "in_progress"),
        item("2", "Group them by service"),
        item("3", "Write a report"),
    )
    assert plan.current() == item("1", "Find the slow endpoints", "in_progress")


def test_harness_plan_advances_to_the_end() -> None:
    plan = HarnessPlan()
    plan.start(REQUEST)
    assert plan.advance() == item("2", "Group them by service", "in_progress")
    assert [i.status for i in plan.items()] == ["completed", "in_progress", "pending"]
    assert plan.advance() == item("3", "Write a report", "in_progress")
    assert plan.advance() is None
    assert [i.status for i in plan.items()] == ["completed"] * 3
    assert plan.advance() is None
    assert [i.status for i in plan.items()] == ["completed"] * 3


def test_harness_plan_message_names_the_current_item() -> None:
    plan = HarnessPlan()
    plan.start(REQUEST)
    plan.advance()
    assert plan.message() == "\n".join(
        [
            "# Plan",
            "[x] 1. Find the slow endpoints",
            "[~] 2. Group them by service ← CURRENT",
            "[ ] 3. Write a report",
            'Next: do only "Group them by service" now, then call finish; '
            "the harness will then give you the next item.",
        ]
    )
    plan.advance()
    plan.advance()
    assert plan.message().splitlines()[-1] == (
        "Next: every item is done; call finish with a summary."
    )


def test_harness_plan_of_a_request_without_task_clauses_is_the_whole_request() -> None:
    plan = HarnessPlan()
    plan.start("  What is the p95 latency of checkout?  ")
    assert plan.items() == (item("1", "What is the p95 latency of checkout?", "in_progress"),)


def test_harness_plan_start_replaces_the_previous_plan() -> None:
    plan = HarnessPlan()
    plan.start(REQUEST)
    plan.advance()
    plan.start("Restart the collector and check the logs")
    assert plan.items() == (
        item("1", "Restart the collector", "in_progress"),
        item("2", "Check the logs"),
    )
