"""The saved form of a session: one layout, written by `Session.state()` and read by `restore()`.

A `SessionStore` keeps it as JSON after every change; replay builds the state of a session as
it was before a recorded turn in the same layout.
"""

from __future__ import annotations

from typing import Any, TypedDict

STATE_VERSION = 1
"""The layout's version; a session saved with another cannot be restored."""


class SessionState(TypedDict):
    """Everything needed to continue a session in another process."""

    version: int
    session_id: str
    user_id: str
    metadata: dict[str, Any]
    turns: int
    """Turns completed."""
    history: list[dict[str, Any]]
    """The completed turns' messages (`message_to_dict`)."""
    plan: dict[str, Any] | None
    """The plan's own saved form (None without a plan)."""
    turn: dict[str, Any] | None
    """The turn in progress (cut short, or paused for approval), or None."""
    proposal: list[dict[str, Any]] | None
    """The plan awaiting approval, as the model wrote it."""
    features: dict[str, dict[str, Any]]
    """Each feature's saved state, by feature name."""


def session_state(
    *,
    session_id: str,
    user_id: str,
    metadata: dict[str, Any],
    turns: int,
    history: list[dict[str, Any]],
    plan: dict[str, Any] | None,
    features: dict[str, dict[str, Any]],
    turn: dict[str, Any] | None = None,
    proposal: list[dict[str, Any]] | None = None,
) -> SessionState:
    """A session's saved state in the current layout."""
    return {
        "version": STATE_VERSION,
        "session_id": session_id,
        "user_id": user_id,
        "metadata": metadata,
        "turns": turns,
        "history": history,
        "plan": plan,
        "turn": turn,
        "proposal": proposal,
        "features": features,
    }
