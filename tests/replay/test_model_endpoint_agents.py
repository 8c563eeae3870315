"""Agents on the model endpoint: plain client loops, plangate's own agent, threads, loops, processes."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import Any

import openai
import pytest

from plangate.harness import (
    Agent,
    AssistantMessage,
    Message,
    Model,
    ModelResponse,
    ScriptedModel,
    ToolCall,
    ToolDefinition,
    ToolMessage,
    TurnResult,
    UserMessage,
    get_domain,
    load_variant,
    model_from_spec,
)
from plangate.harness.models import FunctionModel, OpenAIModel
from plangate.replay.endpoint import ModelEndpoint, Route

ADD = {
    "type": "function",
    "function": {
        "name": "add",
        "description": "Add two numbers.",
        "parameters": {"type": "object", "properties": {"a": {}, "b": {}}},
    },
}


@pytest.fixture
def endpoint() -> Iterator[ModelEndpoint]:
    with ModelEndpoint() as running:
        yield running


def echo(label: str) -> FunctionModel:
    """A model that answers `label: <the last user message>`."""

    def answer(messages: Sequence[Message], tools: Sequence[ToolDefinition]) -> str:
        return f"{label}: {messages[-1].content}"

    return FunctionModel(answer, name=label)


def sent_texts(route: Route) -> list[str]:
    return [call.messages[-1].content for call in route.calls]


# A plain `openai` script, as any framework's agent would be


def test_a_plain_client_loop_runs_its_tools(endpoint: ModelEndpoint) -> None:
    model = ScriptedModel([ToolCall.of("add", "call_1", a=2, b=3), "2 + 3 = 5."])
    route = endpoint.open_route(model)
    messages: list[Any] = [{"role": "user", "content": "What is 2 + 3?"}]

    with openai.OpenAI(base_url=route.base_url, api_key="unused", max_retries=0) as client:
        while True:
            message = (
                client.chat.completions.create(model="gpt-test", messages=messages, tools=[ADD])
                .choices[0]
                .message
            )
            messages.append(message)  # the pydantic object, as the openai docs do
            if not message.tool_calls:
                break
            for call in message.tool_calls:
                total = sum(json.loads(call.function.arguments).values())
                messages.append({"role": "tool", "tool_call_id": call.id, "content": str(total)})

    model.assert_complete()
    assert message.content == "2 + 3 = 5."
    assert route.calls[1].messages == (
        UserMessage(content="What is 2 + 3?"),
        AssistantMessage(tool_calls=(ToolCall.of("add", "call_1", a=2, b=3),)),
        ToolMessage(tool_call_id="call_1", name="add", content="5"),
    )
    assert model.requests[1].messages == route.calls[1].messages  # what the model was sent


# plangate's own agent, through an OpenAIModel pointed at the endpoint


async def run_support(model: Model) -> TurnResult:
    domain = get_domain("support")
    agent = Agent(
        model=model,
        variant=load_variant("alyx"),
        tools=domain.make_tools,
        instructions=domain.instructions,
    )
    return await agent.session("endpoint").run_turn(domain.demo_request)


def trajectory(result: TurnResult) -> list[tuple[str, str, str]]:
    return [(call.name, call.arguments, call.status) for call in result.tool_calls]


async def test_a_simulated_model_behind_the_endpoint_runs_as_it_does_directly(
    endpoint: ModelEndpoint,
) -> None:
    seen = Seen(model_from_spec("sim:diligent", domain=get_domain("support")))
    direct = await run_support(seen)
    route = endpoint.open_route(model_from_spec("sim:diligent", domain=get_domain("support")))

    async with OpenAIModel(model="gpt-test", api_key="unused", base_url=route.base_url) as model:
        served = await run_support(model)

    assert served.stop_reason == direct.stop_reason == "finished"
    assert trajectory(served) == trajectory(direct)
    assert len(trajectory(direct)) > 6
    assert served.answer == direct.answer
    assert len(route.calls) == served.iterations == direct.iterations
    assert route.failure is None
    assert {call.model_name for call in route.calls} == {"gpt-test"}
    # The model behind the endpoint was sent what it is sent directly (the wire has no
    # `is_error`), and was offered the same tools.
    assert [call.messages for call in route.calls] == [
        tuple(without_error_flag(m) for m in messages) for messages, _ in seen.requests
    ]
    assert [call.tools for call in route.calls] == [tools for _, tools in seen.requests]


class Seen:
    """A model that keeps what it was sent, passing the call on."""

    def __init__(self, model: Model) -> None:
        self.model, self.name = model, model.name
        self.requests: list[tuple[tuple[Message, ...], tuple[ToolDefinition, ...]]] = []

    async def request(
        self, messages: Sequence[Message], tools: Sequence[ToolDefinition]
    ) -> ModelResponse:
        self.requests.append((tuple(messages), tuple(tools)))
        return await self.model.request(messages, tools)


def without_error_flag(message: Message) -> Message:
    return replace(message, is_error=False) if isinstance(message, ToolMessage) else message


# Routes never mix, whoever calls and however


def test_routes_used_from_threads_never_mix(endpoint: ModelEndpoint) -> None:
    routes = [endpoint.open_route(echo(label)) for label in ("left", "right")]
    answers: dict[str, str] = {}

    def agent(worker: int) -> None:
        route = routes[worker % 2]
        with openai.OpenAI(base_url=route.base_url, api_key="unused", max_retries=0) as client:
            for turn in range(10):
                text = f"worker {worker} turn {turn}"
                answer = client.chat.completions.create(
                    model="gpt-test",
                    messages=[{"role": "user", "content": text}],
                    stream=turn % 2 == 1,
                )
                if turn % 2:
                    answers[text] = "".join(c.choices[0].delta.content or "" for c in answer)
                else:
                    answers[text] = answer.choices[0].message.content or ""

    threads = [threading.Thread(target=agent, args=(worker,)) for worker in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    for index, route in enumerate(routes):
        expected = {f"worker {w} turn {t}" for w in range(index, 6, 2) for t in range(10)}
        assert sorted(sent_texts(route)) == sorted(expected)
    assert answers == {
        text: f"{('left', 'right')[int(text.split()[1]) % 2]}: {text}" for text in answers
    }
    assert len(answers) == 60


async def test_routes_used_from_asyncio_tasks_never_mix(endpoint: ModelEndpoint) -> None:
    routes = {label: endpoint.open_route(echo(label)) for label in ("left", "right")}

    async def agent(label: str, turn: int, client: openai.AsyncOpenAI) -> tuple[str, str]:
        text = f"{label} {turn}"
        completion = await client.chat.completions.create(
            model="gpt-test", messages=[{"role": "user", "content": text}]
        )
        return text, completion.choices[0].message.content or ""

    clients = {
        label: openai.AsyncOpenAI(base_url=route.base_url, api_key="unused", max_retries=0)
        for label, route in routes.items()
    }
    try:
        answers = await asyncio.gather(
            *(agent(label, turn, clients[label]) for turn in range(15) for label in routes)
        )
    finally:
        for client in clients.values():
            await client.close()

    assert all(answer == f"{text.split()[0]}: {text}" for text, answer in answers)
    for label, route in routes.items():
        assert sorted(sent_texts(route)) == sorted(f"{label} {turn}" for turn in range(15))


def test_an_async_agent_on_its_own_loop_and_a_sync_client_at_once(
    endpoint: ModelEndpoint,
) -> None:
    background = endpoint.open_route(echo("async"))
    foreground = endpoint.open_route(echo("sync"))
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever)
    thread.start()

    async def async_agent() -> list[str]:
        async with openai.AsyncOpenAI(
            base_url=background.base_url, api_key="unused", max_retries=0
        ) as client:
            replies = []
            for turn in range(10):
                completion = await client.chat.completions.create(
                    model="gpt-test", messages=[{"role": "user", "content": f"a{turn}"}]
                )
                replies.append(completion.choices[0].message.content or "")
            return replies

    try:
        running = asyncio.run_coroutine_threadsafe(async_agent(), loop)
        with openai.OpenAI(base_url=foreground.base_url, api_key="unused") as client:
            sync_replies = [
                client.chat.completions.create(
                    model="gpt-test", messages=[{"role": "user", "content": f"s{turn}"}]
                )
                .choices[0]
                .message.content
                for turn in range(10)
            ]
        async_replies = running.result(timeout=60)
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.close()

    assert async_replies == [f"async: a{turn}" for turn in range(10)]
    assert sync_replies == [f"sync: s{turn}" for turn in range(10)]
    assert sent_texts(background) == [f"a{turn}" for turn in range(10)]


AGENT_SCRIPT = """
import os, openai
client = openai.OpenAI(max_retries=0)  # OPENAI_BASE_URL and OPENAI_API_KEY from the environment
reply = client.chat.completions.create(
    model="gpt-test", messages=[{"role": "user", "content": "from a subprocess"}]
)
print(reply.choices[0].message.content)
"""


def test_an_agent_in_another_process_needs_only_the_base_url(endpoint: ModelEndpoint) -> None:
    route = endpoint.open_route(echo("sub"))
    env = {**os.environ, "OPENAI_BASE_URL": route.base_url, "OPENAI_API_KEY": "unused"}

    done = subprocess.run(
        [sys.executable, "-c", AGENT_SCRIPT],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "sub: from a subprocess"
    assert sent_texts(route) == ["from a subprocess"]


class Stuck:
    """A model whose call never ends on its own."""

    name = "stuck"

    def __init__(self) -> None:
        self.called = threading.Event()

    async def request(
        self, messages: Sequence[Message], tools: Sequence[ToolDefinition]
    ) -> ModelResponse:
        self.called.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


def test_closing_ends_calls_in_flight() -> None:
    endpoint = ModelEndpoint().start()
    model = Stuck()
    route = endpoint.open_route(model)
    raised: list[BaseException] = []

    def agent() -> None:
        with openai.OpenAI(base_url=route.base_url, api_key="unused", max_retries=0) as client:
            try:
                client.chat.completions.create(
                    model="gpt-test", messages=[{"role": "user", "content": "hi"}]
                )
            except openai.APIError as err:
                raised.append(err)

    thread = threading.Thread(target=agent)
    thread.start()
    assert model.called.wait(timeout=30)
    endpoint.close()
    thread.join(timeout=30)

    assert not thread.is_alive()
    assert len(raised) == 1
    assert isinstance(raised[0], openai.InternalServerError | openai.APIConnectionError)
    assert not any(t.name.startswith("plangate-endpoint") for t in threading.enumerate())
