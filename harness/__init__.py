"""The reference planning agent: models, tools, plans, the loop, guards, variants, tracing."""

from harness._domain import CallSpec, Domain, TaskSpec, domain_names, get_domain
from harness._errors import ConfigError, PlangateError
from harness._loops import CallRun, call_key, identical_runs, trailing_run
from harness._messages import (
    AssistantMessage,
    Message,
    ModelResponse,
    SystemMessage,
    ToolCall,
    ToolDefinition,
    ToolMessage,
    Usage,
    UserMessage,
    canonical_json,
)
from harness._model import Model, ModelError
from harness._scripted import FunctionModel, ScriptedModel, UnexpectedModelCall
from harness._tools import Tool, ToolResult, ToolRetry, run_tool, tool

__all__ = [
    "AssistantMessage",
    "CallRun",
    "CallSpec",
    "ConfigError",
    "Domain",
    "FunctionModel",
    "Message",
    "Model",
    "ModelError",
    "ModelResponse",
    "PlangateError",
    "ScriptedModel",
    "SystemMessage",
    "TaskSpec",
    "Tool",
    "ToolCall",
    "ToolDefinition",
    "ToolMessage",
    "ToolResult",
    "ToolRetry",
    "UnexpectedModelCall",
    "Usage",
    "UserMessage",
    "call_key",
    "canonical_json",
    "domain_names",
    "get_domain",
    "identical_runs",
    "run_tool",
    "tool",
    "trailing_run",
]
