"""Features: switchable capabilities that plug into the loop at a few fixed points.

Context management (large results by reference, history checkpoints), long-term memory, skills
and subagents are each a `Feature`. The loop calls every hook of every enabled feature at its
place; each hook does nothing by default, so a feature implements only what it needs and the
loop never grows a branch per feature.

The places, in the order of one model call:
`before_model` (may rewrite history, e.g. a checkpoint) → context: `[system] → [plan] →
context() → history(...) → [turn]` → the model → for each tool result `on_result` → after the
turn `after_turn`. `tools()` adds tools to what the model is offered. `state()` / `restore()`
save and load what the feature keeps, with the session.

A feature sees its session through `SessionView`, a narrow protocol: the session's identity,
variant, history and work tools, and four things it may ask (emit an event, make a side model
call, open a span, run a subagent). It never reaches into the session's loop or its state.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from plangate.harness._messages import Message, ModelResponse, SystemMessage, ToolCall
from plangate.harness._tools import Tool
from plangate.harness._tracing import SessionTracing
from plangate.harness._turn import EventKind, Turn, TurnResult
from plangate.harness._variant import Variant
from plangate.harness._weak import alive


class SessionView(Protocol):
    """What a feature sees of its session, and what it may ask of it."""

    @property
    def session_id(self) -> str:
        """The session's id."""
        ...

    @property
    def user_id(self) -> str:
        """Whose session it is."""
        ...

    @property
    def metadata(self) -> Mapping[str, Any]:
        """The session's metadata (e.g. the memory `space`)."""
        ...

    @property
    def variant(self) -> Variant:
        """The harness variant the session runs."""
        ...

    @property
    def history(self) -> Sequence[Message]:
        """The earlier turns' messages, as recorded (not as a feature rewrote them)."""
        ...

    @property
    def work_tools(self) -> tuple[Tool, ...]:
        """The session's work tools, without plan and control tools."""
        ...

    @property
    def plan_tool_names(self) -> frozenset[str]:
        """The names of the tools the session plans with."""
        ...

    @property
    def tracing(self) -> SessionTracing:
        """The session's spans (a feature's own spans nest in the running turn's)."""
        ...

    def emit(self, kind: EventKind, detail: str) -> None:
        """Record an event of the running turn; ignored between turns."""
        ...

    async def side_request(self, messages: Sequence[Message]) -> ModelResponse:
        """A model call outside the turn's loop, with no tools (traced; errors propagate)."""
        ...

    async def run_subagent(
        self,
        child_id: str,
        task: str,
        *,
        variant: Variant,
        tools: Sequence[Tool],
        instructions: str,
    ) -> TurnResult:
        """Run `task` as the one turn of a fresh agent made from this session's.

        The subagent has only `tools`, the session's instructions followed by `instructions`,
        `variant`, and nothing saved: no store, memory or skills.
        """
        ...


class Feature:
    """Base of every feature; every hook is a no-op."""

    name = "feature"
    """Key of the feature's saved state."""

    def __init__(self, session: SessionView) -> None:
        # Weakly: the session holds its features, and a feature holding it back would keep a
        # dropped session and its messages alive until the garbage collector looks for cycles.
        self._session = weakref.ref(session)

    @property
    def session(self) -> SessionView:
        """The session this feature belongs to."""
        return alive(self._session)

    def tools(self, turn: Turn) -> Sequence[Tool]:
        """Tools this feature offers on the turn's model calls."""
        return ()

    def context(self, turn: Turn) -> Sequence[SystemMessage]:
        """Messages placed right after the plan message (e.g. the user's memory)."""
        return ()

    def history(self, messages: Sequence[Message]) -> Sequence[Message]:
        """The session history as the model should see it (e.g. after a checkpoint)."""
        return messages

    def on_result(self, turn: Turn, call: ToolCall, content: str) -> str:
        """The text of a tool result as the model should see it (e.g. a reference)."""
        return content

    async def before_model(self, turn: Turn) -> None:
        """Runs before each model call of a turn."""

    async def after_turn(self, result: TurnResult) -> None:
        """Runs once a turn has ended."""

    def state(self) -> dict[str, Any]:
        """What to save with the session."""
        return {}

    def restore(self, state: dict[str, Any]) -> None:
        """Load what `state()` saved."""
