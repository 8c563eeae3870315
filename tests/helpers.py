"""Shared builders for tests."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from harness import Agent, Model, ScriptedModel, Tool, ToolCall, TurnResult, load_variant, tool


@tool
def add(a: int, b: int) -> int:
    """Add two whole numbers.

    Args:
        a: The first number.
        b: The second number.
    """
    return a + b


@tool
def explode(reason: str) -> str:
    """A tool that always fails with a bug (to test that tool exceptions never end the run).

    Args:
        reason: What to say in the exception.
    """
    raise RuntimeError(reason)


WORK_TOOLS: tuple[Tool, ...] = (add, explode)


def call(name: str, call_id: str | None = None, /, **arguments: Any) -> ToolCall:
    """A tool call with canonical JSON arguments."""
    return ToolCall.of(name, call_id, **arguments)


def agent(
    model: Model, variant: str = "alyx", tools: Sequence[Tool] = WORK_TOOLS, **kw: Any
) -> Agent:
    """An agent over the test tools with a shipped variant."""
    return Agent(model=model, variant=load_variant(variant), tools=lambda: tools, **kw)


async def run(
    script: Sequence[Any], request: str, variant: str = "alyx", **kw: Any
) -> tuple[TurnResult, ScriptedModel]:
    """Run one turn on a scripted model; checks that the script was used up."""
    model = ScriptedModel(list(script))
    result = await agent(model, variant, **kw).session("test-session").run_turn(request)
    model.assert_complete()
    return result, model
