"""The reference planning agent: the loop, its guards, plans, features, models and tracing.

What lives where:

- `_agent`, `_config`, `_session`, `_loop`: the agent (read-only configuration), its sessions
  (a conversation's state and API) and the turn loop;
- `_guards`: the iteration, loop, text and finish guards, each a function that decides;
- `_turn`, `_messages`, `_tools`, `_variant`, `_state`, `_store`: the records of a turn, the
  messages, tools, variants, the saved-session layout and its SQLite store;
- `_tracing`, `_spans`, `semconv`: OpenInference spans and the names on them;
- `_loops`: the run detector, shared with the evaluators; `_trigger`: the planning trigger;
- `plans/`, `features/`, `models/`, `domains/`: the plan dialects, the switchable features,
  the models, the demo domains (each with its own public face).

`plangate.harness` imports nothing else of plangate: the other packages build on it. The names
below are what a user starts from; everything else stays importable from its module.
"""

from typing import TYPE_CHECKING, Any

from plangate.harness._agent import Agent
from plangate.harness._call_runs import call_runs
from plangate.harness._errors import ConfigError, PlangateError, SessionError, first_line
from plangate.harness._files import (
    OutputError,
    check_output,
    json_problem,
    read_text,
    replace_folder,
    staging_folder,
    write_text_atomic,
    writing,
)
from plangate.harness._messages import (
    AssistantMessage,
    Message,
    ModelResponse,
    SystemMessage,
    ToolCall,
    ToolDefinition,
    ToolMessage,
    Usage,
    UserMessage,
    canonical_arguments_text,
    canonical_json,
    message_from_dict,
    message_to_dict,
)
from plangate.harness._session import Session
from plangate.harness._state import SessionState, session_state
from plangate.harness._store import SessionStore
from plangate.harness._tools import Tool, ToolRetry, ToolSourceError, render_result, tool
from plangate.harness._turn import (
    ERROR_STOP_REASONS,
    FINISH,
    STOP_REASONS,
    Event,
    StopReason,
    ToolCallRecord,
    TurnResult,
    infrastructure_failure,
)
from plangate.harness._variant import Variant, builtin_variants, load_variant, parse_variant
from plangate.harness.domains import Domain, domain_names, get_domain
from plangate.harness.models import (
    BEHAVIOURS,
    EndpointSettings,
    Model,
    ModelError,
    ScriptedModel,
    SimulatedModel,
    model_from_spec,
)
from plangate.harness.plans import PlanItem

if TYPE_CHECKING:
    from plangate.harness.models import OpenAIModel
else:  # not for type checkers: a module `__getattr__` would hide every missing name

    def __getattr__(name: str) -> Any:
        # The `openai` package takes about a second to import; only pay for it when it is used.
        if name == "OpenAIModel":
            from plangate.harness.models import OpenAIModel

            return OpenAIModel
        raise AttributeError(f"module 'plangate.harness' has no attribute {name!r}")


__all__ = [
    "BEHAVIOURS",
    "ERROR_STOP_REASONS",
    "FINISH",
    "STOP_REASONS",
    "Agent",
    "AssistantMessage",
    "ConfigError",
    "Domain",
    "EndpointSettings",
    "Event",
    "Message",
    "Model",
    "ModelError",
    "ModelResponse",
    "OpenAIModel",
    "OutputError",
    "PlanItem",
    "PlangateError",
    "ScriptedModel",
    "Session",
    "SessionError",
    "SessionState",
    "SessionStore",
    "SimulatedModel",
    "StopReason",
    "SystemMessage",
    "Tool",
    "ToolCall",
    "ToolCallRecord",
    "ToolDefinition",
    "ToolMessage",
    "ToolRetry",
    "ToolSourceError",
    "TurnResult",
    "Usage",
    "UserMessage",
    "Variant",
    "builtin_variants",
    "call_runs",
    "canonical_arguments_text",
    "canonical_json",
    "check_output",
    "domain_names",
    "first_line",
    "get_domain",
    "infrastructure_failure",
    "json_problem",
    "load_variant",
    "message_from_dict",
    "message_to_dict",
    "model_from_spec",
    "parse_variant",
    "read_text",
    "render_result",
    "replace_folder",
    "session_state",
    "staging_folder",
    "tool",
    "write_text_atomic",
    "writing",
]
