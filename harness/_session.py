"""A session: one conversation with the agent, its history, plan, features and spans.

The public face of a conversation: run a turn, resume one that a crash cut short, approve or
reject a plan that waits for a reviewer, save and restore the whole state. With a
`SessionStore`, the session is saved after every change (each model reply, each tool call).
Each turn runs the loop of `TurnLoop`, its base.
"""

from __future__ import annotations

import dataclasses
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from plangate.harness._config import AgentConfig
from plangate.harness._errors import SessionError
from plangate.harness._loop import TurnLoop
from plangate.harness._messages import Message, ModelResponse
from plangate.harness._tools import Tool, ToolRetry
from plangate.harness._tracing import SessionTracing
from plangate.harness._turn import EventKind, Turn, TurnResult
from plangate.harness._variant import Variant
from plangate.harness.features import build_features
from plangate.harness.models import ModelError
from plangate.harness.plans import make_plan, render_plan

REJECTED = "Plan was rejected during review."


class Session(TurnLoop):
    """One conversation: its history, its plan, its tools, its features and its spans."""

    def __init__(
        self, agent: AgentConfig, session_id: str, user_id: str, metadata: dict[str, Any]
    ) -> None:
        self.agent = agent
        self.session_id = session_id
        self.user_id = user_id
        self.metadata = metadata
        self.history = []
        self.turns = 0
        self.plan = make_plan(agent.variant.plan)
        self._work_tools = list(agent.tools())
        # The session holds its tools, so they hold it weakly: a tool holding it back would keep
        # a dropped session and its messages alive until the garbage collector looks for cycles.
        this: weakref.ref[TurnLoop] = weakref.ref(self)
        self._finish = self._finish_tool(this)
        self.tracing = SessionTracing(
            agent.tracer_provider,
            session_id=session_id,
            user_id=user_id,
            metadata={"variant": agent.variant.name, **metadata},
            messages=agent.trace_messages,
        )
        memory_dir = Path(agent.memory_dir) if agent.memory_dir is not None else None
        self.features = build_features(self, memory_dir=memory_dir, skills=agent.skills)
        self._turn = None
        self._proposal = None

    # -- what features see of the session (`SessionView`) and the public API -----------------

    @property
    def variant(self) -> Variant:
        """The harness variant the session runs."""
        return self.agent.variant

    @property
    def work_tools(self) -> tuple[Tool, ...]:
        """The session's work tools (its workspace), without plan and control tools."""
        return tuple(self._work_tools)

    @property
    def plan_tool_names(self) -> frozenset[str]:
        """The names of the tools this session plans with."""
        return frozenset(t.name for t in self._plan_tools)

    def emit(self, kind: EventKind, detail: str) -> None:
        """Record an event of the running turn (for features); ignored between turns."""
        if self._turn is not None:
            self._emit(self._turn, kind, detail)

    async def side_request(self, messages: Sequence[Message]) -> ModelResponse:
        """A model call outside the turn's loop (a checkpoint, a memory update), with no tools.

        Traced as an LLM span with iteration 0; a `ModelError` marks the span and propagates.
        """
        model = self.agent.model
        with self.tracing.llm(0, messages, (), model.name) as span:
            try:
                response = await model.request(messages, ())
            except ModelError as exc:
                span.error(str(exc))
                raise
            self.tracing.record_response(span, response)
        return response

    async def run_subagent(
        self,
        child_id: str,
        task: str,
        *,
        variant: Variant,
        tools: Sequence[Tool],
        instructions: str,
    ) -> TurnResult:
        """Run `task` as the one turn of a fresh agent made from this one (a subagent).

        It shares the model and tracer provider; it has only `tools`, this agent's instructions
        followed by `instructions`, and nothing saved (no store, memory or skills).
        """
        agent = dataclasses.replace(
            self.agent,
            variant=variant,
            tools=lambda: tools,
            instructions="\n\n".join(filter(None, [self.agent.instructions, instructions])),
            name=f"{self.agent.name}/sub",
            store=None,
            memory_dir=None,
            skills=(),
        )
        metadata = {**self.metadata, "parent_session": self.session_id}
        return await Session(agent, child_id, self.user_id, metadata).run_turn(task)

    def proposed_plan(self) -> list[dict[str, Any]] | None:
        """The plan awaiting approval, as the model wrote it (None when nothing waits)."""
        return self._proposal

    async def run_turn(self, request: str) -> TurnResult:
        """Run one turn of the conversation to its end (or to a pause) and return it."""
        if self._turn is not None:
            raise SessionError(
                f"session {self.session_id!r} has a turn {self.status.replace('_', ' ')}; "
                "resume it (or approve / reject its plan) before starting another"
            )
        return await self._drive(request, None)

    async def resume(self) -> TurnResult:
        """Continue a turn that a crash cut short, from its last saved state."""
        if self.status != "running":
            raise SessionError(f"session {self.session_id!r} has nothing to resume ({self.status})")
        turn = self._turn
        assert turn is not None
        return await self._drive(turn.request, turn)

    async def approve(self, steps: list[dict[str, Any]] | None = None) -> TurnResult:
        """Approve the proposed plan (or a modified one, checked again) and continue the turn."""
        turn = self._awaiting()
        assert self.plan is not None and self._proposal is not None
        modified = steps is not None
        try:
            warnings = self.plan.create(steps if steps is not None else self._proposal)  # type: ignore[union-attr]
        except ToolRetry as exc:
            raise SessionError(f"the modified plan is not valid: {exc}") from exc
        self._proposal = None
        note = " with changes" if modified else ""
        text = f"The reviewer approved the plan{note}.\n{render_plan(self.plan_items())}"
        if warnings:
            text += "\n" + "\n".join(warnings)
        self._prompt(turn, "plan_approved", text)
        return await self._drive(turn.request, turn)

    async def reject(self, reason: str = "") -> TurnResult:
        """Reject the proposed plan; the model is told so and must plan again."""
        turn = self._awaiting()
        self._proposal = None
        self._prompt(turn, "plan_rejected", f"{REJECTED} {reason}".strip())
        return await self._drive(turn.request, turn)

    def _awaiting(self) -> Turn:
        if self.status != "awaiting_approval" or self._turn is None:
            raise SessionError(f"session {self.session_id!r} has no plan awaiting approval")
        return self._turn
