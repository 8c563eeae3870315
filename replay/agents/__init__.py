"""Any agent behind one boundary: "run this turn", in this process, as a command, over HTTP.

- `_boundary`: the contract (`TurnInput`, `TurnOutput`), the agent spec with its variant
  settings (`AgentSpec`), and the errors;
- `_runners`: the three ways to plug in (`python:`, `command:`, `http:`);
- `_driver`: runs an agent's turns behind plangate's local model endpoint, one route a slot;
- `_observed`: a turn as the endpoint saw it (its messages, steps, trace-table rows);
- `_golden`: recording an agent's sessions as a golden dataset, and replaying its turns;
- `_hermetic`: `hermetic`, a wrapper that makes a Python agent's function tools (and, with
  `_hermetic_frameworks`, a framework's tool objects) recorded and replayed from the cassette;
- `_reference`: plangate's own agent behind the boundary
  (`python:plangate.replay.agents:reference`).

Imports `plangate.harness`, the rest of `plangate.replay` and its endpoint.
"""

from plangate.replay.agents._boundary import (
    AGENT_KINDS,
    LOCAL_API_KEY,
    TOOLS_URL_ENV,
    AgentError,
    AgentFailed,
    AgentRunner,
    AgentSpec,
    TurnInput,
    TurnOutput,
)
from plangate.replay.agents._driver import AgentDriver, DrivenTurn
from plangate.replay.agents._golden import record_agent, recorded_agent
from plangate.replay.agents._hermetic import HermeticError, ReplayedToolError, hermetic
from plangate.replay.agents._reference import reference
from plangate.replay.agents._runners import runner_for

__all__ = [
    "AGENT_KINDS",
    "LOCAL_API_KEY",
    "TOOLS_URL_ENV",
    "AgentDriver",
    "AgentError",
    "AgentFailed",
    "AgentRunner",
    "AgentSpec",
    "DrivenTurn",
    "HermeticError",
    "ReplayedToolError",
    "TurnInput",
    "TurnOutput",
    "hermetic",
    "record_agent",
    "recorded_agent",
    "reference",
    "runner_for",
]
