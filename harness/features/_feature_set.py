"""Which features a session gets, from its variant's switches."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from plangate.harness.features._checkpoints import Checkpoints
from plangate.harness.features._feature import Feature, SessionView
from plangate.harness.features._memory import Memory
from plangate.harness.features._references import ResultReferences
from plangate.harness.features._skills import Skills
from plangate.harness.features._subagents import Subagents


def build_features(
    session: SessionView, *, memory_dir: Path | None = None, skills: Sequence[Any] = ()
) -> list[Feature]:
    """The features the session's variant turns on, in hook order.

    Args:
        session: The session, as its features see it.
        memory_dir: Folder of the per-user memory files (needed with `context.memory`).
        skills: The skills the agent can load (with `context.skills`).
    """
    features: list[Feature] = []
    context = session.variant.context
    if context.memory:
        features.append(Memory(session, memory_dir))
    if context.skills:
        features.append(Skills(session, skills))
    if context.subagents:
        features.append(Subagents(session))
    if context.result_reference_chars > 0:
        features.append(ResultReferences(session))
    if context.history_token_budget > 0:
        features.append(Checkpoints(session))
    return features
