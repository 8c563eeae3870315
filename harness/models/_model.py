"""The `Model` protocol and the errors a model may raise."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from plangate.harness._errors import PlangateError
from plangate.harness._messages import Message, ModelResponse, ToolDefinition


@runtime_checkable
class Model(Protocol):
    """Anything that answers a list of messages, given the tools it may call.

    Provider adapters, simulated models and scripted models all implement this; the loop never
    sees a provider.
    """

    name: str
    """A short name for traces and reports (`gpt-4o-mini`, `sim:forgetful`)."""

    async def request(
        self, messages: Sequence[Message], tools: Sequence[ToolDefinition]
    ) -> ModelResponse:
        """Answer `messages`; `tools` are the tools the model may call on this call."""
        ...


class ModelError(PlangateError):
    """A model call failed for good (after retries): the turn stops with `model_error`."""
