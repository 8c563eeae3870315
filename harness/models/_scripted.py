"""A model that plays back an explicit list of responses: the primitive for unit tests."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from plangate.harness._messages import (
    AssistantMessage,
    Message,
    ModelResponse,
    ToolCall,
    ToolDefinition,
    Usage,
)
from plangate.harness.models._model import ModelError

Step = ModelResponse | AssistantMessage | ToolCall | str | ModelError
"""One scripted answer: a full response, a message, a single tool call, text, or an error."""


class UnexpectedModelCall(AssertionError):
    """The loop called a scripted model after its script ran out: a bug in the loop or the test."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SeenRequest:
    """What a scripted model was sent on one call."""

    messages: tuple[Message, ...]
    """The messages, in order."""
    tools: tuple[str, ...]
    """The names of the tools offered."""


@dataclass(slots=True)
class ScriptedModel:
    """Answers with the given steps in order, and records what it was sent.

    Raises `UnexpectedModelCall` on a call past the end of the script; `assert_complete()` fails
    if steps are left over. A `ModelError` step is raised instead of returned.
    """

    steps: Sequence[Step]
    """The answers, in order."""
    name: str = "scripted"
    """Model name for traces."""
    usage: Usage = field(default_factory=lambda: Usage(prompt_tokens=10, completion_tokens=5))
    """Usage reported on every call."""
    requests: list[SeenRequest] = field(default_factory=list)
    """What the model was sent, one entry per call."""

    async def request(
        self, messages: Sequence[Message], tools: Sequence[ToolDefinition]
    ) -> ModelResponse:
        """Record the request and return the next scripted step."""
        index = len(self.requests)
        self.requests.append(
            SeenRequest(messages=tuple(messages), tools=tuple(t.name for t in tools))
        )
        if index >= len(self.steps):
            raise UnexpectedModelCall(
                f"scripted model {self.name!r} was called {index + 1} times, "
                f"but its script has {len(self.steps)} steps"
            )
        return _as_response(self.steps[index], self.name, self.usage)

    def assert_complete(self) -> None:
        """Fail if some scripted steps were never used."""
        left = len(self.steps) - len(self.requests)
        if left > 0:
            raise AssertionError(
                f"scripted model {self.name!r} has {left} unused steps of {len(self.steps)}"
            )


def _as_response(step: Step, name: str, usage: Usage) -> ModelResponse:
    if isinstance(step, ModelError):
        raise step
    if isinstance(step, ModelResponse):
        return step
    if isinstance(step, str):
        return ModelResponse(message=AssistantMessage(content=step), usage=usage, model_name=name)
    if isinstance(step, ToolCall):
        step = AssistantMessage(tool_calls=(step,))
    return ModelResponse(message=step, usage=usage, model_name=name)


@dataclass(slots=True)
class FunctionModel:
    """A model whose answer is computed by a plain function of the messages and tools."""

    function: Callable[[Sequence[Message], Sequence[ToolDefinition]], Step]
    """Computes the answer."""
    name: str = "function"
    """Model name for traces."""

    async def request(
        self, messages: Sequence[Message], tools: Sequence[ToolDefinition]
    ) -> ModelResponse:
        """Return the function's answer."""
        return _as_response(self.function(messages, tools), self.name, Usage())
