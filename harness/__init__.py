"""The reference planning agent: models, tools, plans, the loop, guards, variants, tracing."""

from typing import TYPE_CHECKING, Any

from plangate.harness._agent import Agent, Session, SessionError
from plangate.harness._checkpoints import Checkpoints
from plangate.harness._context import build_context, system_prompt, written_tool_call
from plangate.harness._domain import (
    CallSpec,
    Domain,
    TaskSpec,
    domain_names,
    get_domain,
    register_domain,
)
from plangate.harness._errors import ConfigError, PlangateError
from plangate.harness._features import Feature
from plangate.harness._harness_plan import HarnessPlan
from plangate.harness._loops import CallRun, Runs, call_key, call_runs, identical_runs, trailing_run
from plangate.harness._memory import Memory, MemoryPathError
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
from plangate.harness._model import Model, ModelError
from plangate.harness._plan import (
    PLAN_HEADER,
    PlanItem,
    PlanState,
    PlanStatus,
    incomplete,
    is_open,
    render_plan,
    snapshot,
    status_line,
)
from plangate.harness._references import ResultReferences
from plangate.harness._scripted import (
    FunctionModel,
    ScriptedModel,
    SeenRequest,
    UnexpectedModelCall,
)
from plangate.harness._simulated import BEHAVIOURS, Behaviour, SimulatedModel, read_context
from plangate.harness._skills import Skill, Skills
from plangate.harness._spec import model_from_spec
from plangate.harness._store import SavedSession, SessionStore, StoreError
from plangate.harness._subagents import Subagents
from plangate.harness._todo import TodoList, todo_tools
from plangate.harness._tokens import count_message_tokens, count_tokens
from plangate.harness._tools import (
    Tool,
    ToolResult,
    ToolRetry,
    compile_schema,
    render_result,
    run_tool,
    tool,
    validate,
)
from plangate.harness._tracing import SessionTracing
from plangate.harness._trigger import needs_plan, split_tasks
from plangate.harness._turn import Event, EventKind, StopReason, ToolCallRecord, Turn, TurnResult
from plangate.harness._variant import (
    GuardSettings,
    PlanSettings,
    TurnSettings,
    Variant,
    builtin_variants,
    load_variant,
    parse_variant,
)

if TYPE_CHECKING:
    from plangate.harness._openai import OpenAIModel


def __getattr__(name: str) -> Any:
    # The `openai` package takes about a second to import; only pay for it when it is used.
    if name == "OpenAIModel":
        from plangate.harness._openai import OpenAIModel

        return OpenAIModel
    raise AttributeError(f"module 'plangate.harness' has no attribute {name!r}")


__all__ = [
    "BEHAVIOURS",
    "PLAN_HEADER",
    "Agent",
    "AssistantMessage",
    "Behaviour",
    "CallRun",
    "Runs",
    "CallSpec",
    "Checkpoints",
    "ConfigError",
    "Domain",
    "Event",
    "Feature",
    "EventKind",
    "FunctionModel",
    "GuardSettings",
    "HarnessPlan",
    "Memory",
    "MemoryPathError",
    "Message",
    "Model",
    "ModelError",
    "ModelResponse",
    "OpenAIModel",
    "PlanItem",
    "PlanSettings",
    "PlanState",
    "PlanStatus",
    "ResultReferences",
    "PlangateError",
    "ScriptedModel",
    "SeenRequest",
    "SavedSession",
    "Session",
    "SessionError",
    "SessionStore",
    "SessionTracing",
    "SimulatedModel",
    "Skill",
    "Skills",
    "StopReason",
    "StoreError",
    "Subagents",
    "SystemMessage",
    "TaskSpec",
    "TodoList",
    "Tool",
    "ToolCall",
    "ToolCallRecord",
    "ToolDefinition",
    "ToolMessage",
    "ToolResult",
    "ToolRetry",
    "Turn",
    "TurnResult",
    "TurnSettings",
    "UnexpectedModelCall",
    "Usage",
    "UserMessage",
    "Variant",
    "build_context",
    "builtin_variants",
    "call_key",
    "call_runs",
    "compile_schema",
    "canonical_arguments_text",
    "canonical_json",
    "count_message_tokens",
    "count_tokens",
    "domain_names",
    "get_domain",
    "identical_runs",
    "incomplete",
    "is_open",
    "load_variant",
    "message_from_dict",
    "message_to_dict",
    "model_from_spec",
    "needs_plan",
    "parse_variant",
    "read_context",
    "register_domain",
    "render_plan",
    "render_result",
    "run_tool",
    "snapshot",
    "split_tasks",
    "status_line",
    "system_prompt",
    "todo_tools",
    "tool",
    "trailing_run",
    "validate",
    "written_tool_call",
]
