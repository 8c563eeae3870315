"""What the OpenAIModel tests share: the request, the model's settings, a recording sleep."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from plangate.harness._messages import (
    Message,
    ToolDefinition,
    UserMessage,
)
from plangate.harness.models._model import ModelError
from plangate.harness.models._openai import OpenAIModel

KEY = "sk-test-0123456789-secret"


MODEL = "test-model"


ASK: list[Message] = [UserMessage(content="What is the weather in Paris?")]


WEATHER = ToolDefinition(
    name="get_weather",
    description="Get the current weather in a city.",
    parameters={
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
)


MakeModel = Callable[..., OpenAIModel]


class Sleeps:
    """An injected sleep that records the delays instead of waiting."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


async def failure(model: OpenAIModel) -> str:
    """Run a request that must fail; return the error message, checked for the key."""
    with pytest.raises(ModelError) as caught:
        await model.request(ASK, [WEATHER])
    message = str(caught.value)
    assert KEY not in message
    return message
