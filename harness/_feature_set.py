"""Which features a session gets, from its variant's switches."""

from __future__ import annotations

from typing import TYPE_CHECKING

from plangate.harness._checkpoints import Checkpoints
from plangate.harness._features import Feature
from plangate.harness._memory import Memory
from plangate.harness._references import ResultReferences
from plangate.harness._skills import Skills
from plangate.harness._subagents import Subagents

if TYPE_CHECKING:
    from plangate.harness._agent import Session


def build_features(session: Session) -> list[Feature]:
    """The features the session's variant turns on, in hook order."""
    features: list[Feature] = []
    context = session.agent.variant.context
    if context.memory:
        features.append(Memory(session))
    if context.skills:
        features.append(Skills(session))
    if context.subagents:
        features.append(Subagents(session))
    if context.result_reference_chars > 0:
        features.append(ResultReferences(session))
    if context.history_token_budget > 0:
        features.append(Checkpoints(session))
    return features
