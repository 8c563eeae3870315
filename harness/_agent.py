"""The reference planning agent: what users make, and the sessions it starts.

An `Agent` is read-only configuration (its model, variant, tools, tracing, store; see
`AgentConfig`); `session()` starts a conversation, or loads a saved one from the store. The
conversation is a `Session`, and each of its turns runs the small loop of `TurnLoop`.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from plangate.harness._config import AgentConfig
from plangate.harness._errors import SessionError
from plangate.harness._session import Session


@dataclass(frozen=True, slots=True, kw_only=True)
class Agent(AgentConfig):
    """The reference planning agent: configuration, read-only; `session()` starts a conversation."""

    def session(
        self,
        session_id: str | None = None,
        *,
        user_id: str = "user",
        metadata: dict[str, Any] | None = None,
    ) -> Session:
        """A session: the saved one with this id when the store has it, else a new one."""
        session_id = session_id or f"session-{uuid.uuid4().hex[:12]}"
        session = Session(self, session_id, user_id, metadata or {})
        saved = self.store.load(session_id) if self.store is not None else None
        if saved is not None:
            if saved.variant != self.variant.name:
                raise SessionError(
                    f"session {session_id!r} was saved by variant {saved.variant!r}, and this "
                    f"agent runs {self.variant.name!r}: its state does not fit; use another "
                    f"session id, or variant {saved.variant!r} to continue it"
                )
            session.restore(saved.state)
        return session
