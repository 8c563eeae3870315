"""Fixtures of the harness tests: a local chat-completions server and models pointed at it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from plangate.harness.models._openai import OpenAIModel
from tests.chat_server import ChatServer
from tests.harness.openai_helpers import KEY, MODEL, MakeModel, Sleeps


@pytest.fixture
def server() -> Iterator[ChatServer]:
    with ChatServer() as server:
        yield server


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()


@pytest.fixture
async def make_model(server: ChatServer, sleeps: Sleeps) -> AsyncIterator[MakeModel]:
    """Build models pointed at the server, with the recording sleep; close them afterwards."""
    models: list[OpenAIModel] = []

    def make(**options: Any) -> OpenAIModel:
        defaults: dict[str, Any] = {
            "model": MODEL,
            "api_key": KEY,
            "base_url": server.base_url,
            "sleep": sleeps,
        }
        models.append(OpenAIModel(**(defaults | options)))
        return models[-1]

    yield make
    for model in models:
        await model.aclose()
