"""Models: the protocol the loop calls, its provider adapter, and the models tests and CI run on.

- `_model`: the `Model` protocol and `ModelError`;
- `_endpoint`: `EndpointSettings`, an `openai:` model's timeout, retries and deadline;
- `_openai`: `OpenAIModel`, any OpenAI-compatible endpoint (loaded on first use: the `openai`
  package takes about a second to import);
- `_scripted`: `ScriptedModel` and `FunctionModel`, the primitives of unit tests;
- `_simulated`: `SimulatedModel`, deterministic models that reproduce known planning failures;
- `_spec`: `model_from_spec` for the command line (`sim:NAME`, `openai:MODEL`);
- `_tokens`: offline token counting;
- `_wire`: the OpenAI chat-completions wire format both ways, as plain dicts (`WireError`):
  what `OpenAIModel` sends and reads, and what a local endpoint reads from any agent and
  answers it;
- `_responses_wire`: the OpenAI Responses API's wire format, as a local endpoint reads its
  requests (into the same records as chat completions) and answers them.

Imports harness basics and the demo domains (a simulated model works from a domain's tasks).
"""

from typing import TYPE_CHECKING, Any

from plangate.harness.models._endpoint import EndpointSettings
from plangate.harness.models._model import Model, ModelError
from plangate.harness.models._responses_wire import (
    check_responses_tool_choice,
    response_events_to_wire,
    response_to_wire,
    responses_input_from_wire,
    responses_tools_from_wire,
    responses_usage_to_wire,
)
from plangate.harness.models._scripted import (
    FunctionModel,
    ScriptedModel,
    SeenRequest,
    UnexpectedModelCall,
)
from plangate.harness.models._simulated import BEHAVIOURS, Behaviour, SimulatedModel, read_context
from plangate.harness.models._spec import model_from_spec
from plangate.harness.models._tokens import count_message_tokens, count_tokens
from plangate.harness.models._wire import (
    WireError,
    call_to_wire,
    chunks_to_wire,
    completion_to_wire,
    message_to_wire,
    messages_from_wire,
    messages_to_wire,
    read_completion,
    tool_to_wire,
    tools_from_wire,
    tools_to_wire,
    usage_to_wire,
)

if TYPE_CHECKING:
    from plangate.harness.models._openai import OpenAIModel
else:  # not for type checkers: a module `__getattr__` would hide every missing name

    def __getattr__(name: str) -> Any:
        # The `openai` package takes about a second to import; only pay for it when it is used.
        if name == "OpenAIModel":
            from plangate.harness.models._openai import OpenAIModel

            return OpenAIModel
        raise AttributeError(f"module 'plangate.harness.models' has no attribute {name!r}")


__all__ = [
    "BEHAVIOURS",
    "Behaviour",
    "EndpointSettings",
    "FunctionModel",
    "Model",
    "ModelError",
    "OpenAIModel",
    "ScriptedModel",
    "SeenRequest",
    "SimulatedModel",
    "UnexpectedModelCall",
    "WireError",
    "call_to_wire",
    "check_responses_tool_choice",
    "chunks_to_wire",
    "completion_to_wire",
    "count_message_tokens",
    "count_tokens",
    "message_to_wire",
    "messages_from_wire",
    "messages_to_wire",
    "model_from_spec",
    "read_completion",
    "read_context",
    "response_events_to_wire",
    "response_to_wire",
    "responses_input_from_wire",
    "responses_tools_from_wire",
    "responses_usage_to_wire",
    "tool_to_wire",
    "tools_from_wire",
    "tools_to_wire",
    "usage_to_wire",
]
