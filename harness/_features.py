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
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from plangate.harness._messages import Message, SystemMessage, ToolCall
from plangate.harness._tools import Tool

if TYPE_CHECKING:
    from plangate.harness._agent import Session
    from plangate.harness._turn import Turn, TurnResult


class Feature:
    """Base of every feature; every hook is a no-op."""

    name = "feature"
    """Key of the feature's saved state."""

    def __init__(self, session: Session) -> None:
        # Weakly: the session holds its features, and a feature holding it back would keep a
        # dropped session and its messages alive until the garbage collector looks for cycles.
        self._session = weakref.ref(session)

    @property
    def session(self) -> Session:
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


def alive(session: weakref.ref[Session]) -> Session:
    """The session behind a weak reference that its own features and tools hold."""
    found = session()
    if found is None:
        raise RuntimeError("the session is gone")
    return found
