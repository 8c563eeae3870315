"""Features: switchable capabilities that plug into the loop at a few fixed hooks.

- `_feature`: the `Feature` base (its hooks, each a no-op) and `SessionView`, the narrow view of
  its session that a feature gets;
- `_memory`: a per-user Markdown memory, loaded on every call, updated after every turn;
- `_checkpoints`: past a token budget, a model-written checkpoint replaces earlier turns;
- `_references`: large tool results kept by reference, queried with jq in a sandbox;
- `_skills`: instructions plus tools, loaded on demand;
- `_subagents`: `delegate`, a scoped subagent for one bounded job;
- `_feature_set`: which of them a variant turns on.

Imports harness basics (messages, tools, turns, variants, tracing) and the token counter; never
the session itself, which it sees only through `SessionView`.
"""

from plangate.harness.features._checkpoints import Checkpoints
from plangate.harness.features._feature import Feature, SessionView
from plangate.harness.features._feature_set import build_features
from plangate.harness.features._memory import Memory, MemoryPathError, MemoryUpdate
from plangate.harness.features._references import ResultReferences
from plangate.harness.features._skills import Skill, Skills
from plangate.harness.features._subagents import Subagents

__all__ = [
    "Checkpoints",
    "Feature",
    "Memory",
    "MemoryPathError",
    "MemoryUpdate",
    "ResultReferences",
    "SessionView",
    "Skill",
    "Skills",
    "Subagents",
    "build_features",
]
