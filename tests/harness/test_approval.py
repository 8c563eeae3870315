"""Plan approval: create_plan pauses the run; a person approves, edits or rejects the plan."""

from __future__ import annotations

from pathlib import Path

import pytest

from plangate.harness import (
    Agent,
    SessionError,
    SessionStore,
    SimulatedModel,
    UserMessage,
    get_domain,
    load_variant,
)

REQUEST = "Sort the LLM spans by latency, identify the bottlenecks, and write a report with suggested improvements."


def reviewed_agent(store: SessionStore | None = None) -> Agent:
    domain = get_domain("observability")
    return Agent(
        model=SimulatedModel("diligent", domain.tasks),
        variant=load_variant("flux-review"),
        tools=domain.make_tools,
        instructions=domain.instructions,
        store=store,
    )


async def test_create_plan_pauses_until_approved(tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "runs.db")
    session = reviewed_agent(store).session("review-1")
    paused = await session.run_turn(REQUEST)

    assert paused.stop_reason == "awaiting_approval"
    assert session.status == "awaiting_approval"
    assert store.load("review-1").status == "awaiting_approval"  # type: ignore[union-attr]
    assert [s["name"] for s in session.proposed_plan() or []] == [
        "sort-llm-latency",
        "find-bottlenecks",
        "write-report",
    ]
    assert session.plan_items() == ()  # nothing is applied before the review
    assert paused.tool_calls[-1].content.startswith("Plan submitted for review (3 steps)")
    with pytest.raises(SessionError, match="has a turn awaiting approval"):
        await session.run_turn("something else")

    # A new process picks the paused run up from the store and approves it.
    restored = reviewed_agent(store).session("review-1")
    assert restored.status == "awaiting_approval"
    result = await restored.approve()
    assert result.stop_reason == "finished"
    assert [i.status for i in result.plan] == ["completed"] * 3
    kinds = [e.kind for e in result.events]
    assert "plan_proposed" in kinds and "plan_approved" in kinds and "resumed" in kinds
    approval = next(
        m for m in result.messages if isinstance(m, UserMessage) and "approved" in m.content
    )
    assert approval.content.startswith("The reviewer approved the plan.\n# Plan")
    assert store.load("review-1").status == "idle"  # type: ignore[union-attr]


async def test_an_edited_plan_is_checked_again_then_followed() -> None:
    session = reviewed_agent().session()
    await session.run_turn(REQUEST)
    with pytest.raises(SessionError, match="the modified plan is not valid.*cycle"):
        await session.approve(
            [
                {"name": "a", "description": "A", "depends_on": ["b"]},
                {"name": "b", "description": "B", "depends_on": ["a"]},
            ]
        )
    assert session.status == "awaiting_approval"  # a bad edit changes nothing
    edited = [
        {"name": "sort-llm-latency", "description": "Sort the LLM spans by latency"},
        {
            "name": "write-report",
            "description": "Write a latency report with suggested improvements",
            "depends_on": ["sort-llm-latency"],
        },
    ]
    result = await session.approve(edited)
    assert result.stop_reason == "finished"
    assert [i.id for i in result.plan] == ["sort-llm-latency", "write-report"]
    assert any(
        "approved the plan with changes" in m.content
        for m in result.messages
        if isinstance(m, UserMessage)
    )


async def test_a_rejected_plan_is_planned_again() -> None:
    session = reviewed_agent().session()
    await session.run_turn(REQUEST)
    again = await session.reject("too coarse")
    assert again.stop_reason == "awaiting_approval"
    told = [m.content for m in again.messages if isinstance(m, UserMessage)]
    assert "Plan was rejected during review. too coarse" in told
    assert [c.name for c in again.tool_calls].count("create_plan") == 2
    final = await session.approve()
    assert final.stop_reason == "finished"


async def test_nothing_to_approve() -> None:
    session = reviewed_agent().session()
    with pytest.raises(SessionError, match="no plan awaiting approval"):
        await session.approve()
    with pytest.raises(SessionError, match="no plan awaiting approval"):
        await session.reject()


def test_approval_needs_the_dependency_dialect() -> None:
    from plangate.harness import ConfigError, parse_variant

    with pytest.raises(
        ConfigError, match="'plan.approve_plan' needs 'plan.dialect = \"dependency\"'"
    ):
        parse_variant('name = "x"\n[plan]\napprove_plan = true\n', "x.toml")
