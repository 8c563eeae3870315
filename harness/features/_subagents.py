"""Scoped subagents: `delegate` hands a bounded job to a fresh agent with only the named tools.

The subagent is a new `Agent` built from the parent's: the same model and tracer provider, a
variant without a plan that ends with `finish`, all guards on, no memory, skills or further
delegation, and a model call limit no higher than the parent's. It shares the parent's work
tools (the same workspace), but only those the parent names. It runs one turn in a session
`<parent>/sub-<n>`; its AGENT span is a child of the `delegate` TOOL span, which is current
while the tool runs. However the subagent ends, the parent gets a tool result (its answer, stop
reason and number of calls), never an exception.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from plangate.harness._tools import Tool, ToolRetry, tool
from plangate.harness._turn import FINISH, Turn, TurnResult
from plangate.harness._variant import ContextSettings, GuardSettings, Variant
from plangate.harness.features._feature import Feature, SessionView

DELEGATE = "delegate"
SUBAGENT_INSTRUCTIONS = (
    "You are a subagent: another agent gave you one bounded job. You see nothing of its "
    "conversation, only the job below. Do it with the tools you have, then call finish with a "
    "summary the other agent can use: the results, and anything you could not do."
)


def scoped_variant(parent: Variant, max_iterations: int) -> Variant:
    """The variant of a subagent: no plan, `finish` ends the turn, guards on, no features."""
    limit = min(max_iterations, parent.turn.max_iterations)
    return dataclasses.replace(
        parent,
        name=f"{parent.name}/sub",
        plan=dataclasses.replace(
            parent.plan, dialect="none", approve_plan=False, status_reminder=False
        ),
        turn=dataclasses.replace(
            parent.turn,
            ending="finish_tool",
            max_iterations=limit,
            iteration_warning=min(parent.turn.iteration_warning, limit - 1),
        ),
        guards=GuardSettings(),
        context=ContextSettings(),
    )


def describe(child_id: str, result: TurnResult) -> str:
    """The tool result that tells the parent how its subagent did (`finish` is not counted)."""
    work = sum(1 for c in result.tool_calls if c.name != FINISH)
    calls = f"{_count(result.iterations, 'model call')}, {_count(work, 'tool call')}"
    if result.stop_reason == "finished":
        head = f"Subagent {child_id} finished after {calls}."
    else:
        detail = f" ({result.stop_detail})" if result.stop_detail else ""
        head = (
            f"Subagent {child_id} did not finish: it stopped with {result.stop_reason}{detail} "
            f"after {calls}. Its work may be incomplete."
        )
    return f"{head}\nStop reason: {result.stop_reason}\nAnswer: {result.answer or '(none)'}"


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"


class Subagents(Feature):
    """Offers `delegate`, which runs a scoped subagent for one bounded job."""

    name = "subagents"

    def __init__(self, session: SessionView) -> None:
        super().__init__(session)
        self.count = 0
        """Subagents started so far in this session (numbers their session ids)."""
        self._delegate = self._delegate_tool()

    def tools(self, turn: Turn) -> list[Tool]:
        """`delegate`."""
        return [self._delegate]

    def delegable(self) -> dict[str, Tool]:
        """The parent's work tools a subagent may be given, by name."""
        work: Sequence[Tool] = self.session.work_tools
        return {t.name: t for t in work if t.name not in (FINISH, DELEGATE)}

    async def delegate(self, task: str, tools: Sequence[str], max_iterations: int) -> str:
        """Run one subagent on `task` with the named tools; the text is what the parent sees.

        Raises:
            ToolRetry: The task is empty, a tool cannot be delegated, or the limit is below 1.
        """
        if not task.strip():
            raise ToolRetry("The task is empty. Describe the job the subagent should do.")
        if max_iterations < 1:
            raise ToolRetry("max_iterations must be at least 1.")
        selected = self._select(tools)
        self.count += 1
        parent = self.session
        child_id = f"{parent.session_id}/sub-{self.count}"
        result = await parent.run_subagent(
            child_id,
            task,
            variant=scoped_variant(parent.variant, max_iterations),
            tools=selected,
            instructions=SUBAGENT_INSTRUCTIONS,
        )
        return describe(child_id, result)

    def _select(self, names: Sequence[str]) -> tuple[Tool, ...]:
        allowed = self.delegable()
        wrong = [n for n in names if n not in allowed]
        if wrong:
            listed = ", ".join(sorted(allowed)) or "none"
            raise ToolRetry(
                f"Cannot delegate {', '.join(repr(n) for n in wrong)}: a subagent may only get "
                f"your work tools: {listed}. Plan tools, finish and delegate stay with you "
                "(the subagent has its own finish)."
            )
        return tuple(allowed[n] for n in dict.fromkeys(names))

    def _delegate_tool(self) -> Tool:
        async def delegate(task: str, tools: list[str], max_iterations: int = 8) -> str:
            """Run a subagent.

            Args:
                task: The job, complete in itself: the subagent sees nothing of this conversation.
                tools: Names of your work tools the subagent may use (it always has finish).
                max_iterations: Most model calls the subagent may make.
            """
            return await self.delegate(task, tools, max_iterations)

        listed = ", ".join(sorted(self.delegable())) or "none"
        limit = self.session.variant.turn.max_iterations
        description = (
            "Hand a bounded, self-contained job to a subagent that works with only the tools you "
            "name and reports back its answer, its stop reason and how many calls it made. "
            f"Tools you can give it: {listed}. Its model calls are capped at {limit}."
        )
        return tool(description=description)(delegate)

    def state(self) -> dict[str, Any]:
        """How many subagents were started (so that ids stay unique after a restore)."""
        return {"count": self.count}

    def restore(self, state: dict[str, Any]) -> None:
        """Load what `state()` saved."""
        self.count = int(state.get("count", 0))
