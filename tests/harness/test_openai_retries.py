"""OpenAIModel's retries against a local chat-completions server: rate limits, server
errors with backoff, client errors, timeouts and refused connections."""

from __future__ import annotations

import socket

import pytest

from plangate.harness.models._openai import OpenAIModel
from tests.chat_server import ChatServer, completion, error
from tests.harness.openai_helpers import ASK, KEY, MODEL, WEATHER, MakeModel, Sleeps, failure

# Retries


@pytest.mark.parametrize(("header", "delay"), [("3", 3.0), ("0.25", 0.25), ("120", 8.0)])
async def test_rate_limit_waits_for_retry_after(
    server: ChatServer, make_model: MakeModel, sleeps: Sleeps, header: str, delay: float
) -> None:
    server.enqueue(error(429, "slow down", headers={"Retry-After": header}), completion("ok"))

    response = await make_model().request(ASK, [WEATHER])

    assert response.message.content == "ok"
    assert len(server.requests) == 2
    assert sleeps.delays == [delay]  # capped at backoff_max=8
    server.assert_complete()


async def test_server_errors_are_retried_with_backoff(
    server: ChatServer, make_model: MakeModel, sleeps: Sleeps
) -> None:
    server.enqueue(error(500), error(503, headers={"Retry-After": "soon"}), completion("ok"))

    response = await make_model(backoff_base=0.5).request(ASK, [WEATHER])

    assert response.message.content == "ok"
    assert len(server.requests) == 3
    # Exponential with jitter: retry n waits between half and all of base * 2**(n-1).
    first, second = sleeps.delays
    assert 0.25 <= first <= 0.5
    assert 0.5 <= second <= 1.0
    # The request is sent again unchanged.
    assert server.bodies[0] == server.bodies[1] == server.bodies[2]
    server.assert_complete()


async def test_persistent_server_error_fails_after_all_retries(
    server: ChatServer, make_model: MakeModel, sleeps: Sleeps
) -> None:
    server.enqueue(*[error(500, "upstream exploded")] * 6)
    model = make_model(max_retries=5, backoff_base=1.0, backoff_max=2.0)

    message = await failure(model)

    assert len(server.requests) == 6
    assert "HTTP 500" in message
    assert "upstream exploded" in message
    assert "after 6 attempts" in message
    assert server.base_url in message
    assert repr(MODEL) in message
    assert len(sleeps.delays) == 5
    assert 0.5 <= sleeps.delays[0] <= 1.0
    assert all(1.0 <= delay <= 2.0 for delay in sleeps.delays[1:])  # capped at backoff_max
    server.assert_complete()


async def test_same_seed_gives_same_delays(server: ChatServer, make_model: MakeModel) -> None:
    server.enqueue(*[error(502)] * 6)
    delays: list[list[float]] = []
    for _ in range(2):
        sleeps = Sleeps()
        await failure(make_model(max_retries=2, sleep=sleeps))
        delays.append(sleeps.delays)

    assert delays[0] == delays[1]
    assert delays[0][0] != delays[0][1]


@pytest.mark.parametrize(
    ("status", "hint"),
    [(400, ""), (401, "check the API key"), (404, "check the base URL"), (422, "")],
)
async def test_client_errors_are_not_retried(
    server: ChatServer, make_model: MakeModel, sleeps: Sleeps, status: int, hint: str
) -> None:
    server.enqueue(error(status, "messages[1].content is required"))

    message = await failure(make_model())

    assert len(server.requests) == 1
    assert sleeps.delays == []
    assert f"HTTP {status}: messages[1].content is required" in message
    assert hint in message
    assert "after 1 attempt)" in message


async def test_timeout_is_retried_then_fails(
    server: ChatServer, make_model: MakeModel, sleeps: Sleeps
) -> None:
    server.enqueue(completion("too late").after(30), completion("too late").after(30))

    message = await failure(make_model(timeout=2.0, max_retries=1))

    assert len(server.requests) == 2
    assert len(sleeps.delays) == 1
    assert "timed out after 2 s" in message
    assert "after 2 attempts" in message


async def test_timeout_then_success(
    server: ChatServer, make_model: MakeModel, sleeps: Sleeps
) -> None:
    server.enqueue(completion("too late").after(30), completion("in time"))

    # 2 s, not 0.2: a pause of the test process (its GC) longer than the timeout let the retry
    # take "in time" from the queue before the first attempt reached it (4/300 under load).
    response = await make_model(timeout=2.0).request(ASK, [])

    assert response.message.content == "in time"
    assert len(sleeps.delays) == 1


async def test_connection_refused_is_retried_then_fails(sleeps: Sleeps) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    # Nothing listens on the port now.
    base_url = f"http://127.0.0.1:{port}/v1"
    async with OpenAIModel(
        model=MODEL, api_key=KEY, base_url=base_url, max_retries=2, sleep=sleeps
    ) as model:
        message = await failure(model)

    assert "connection failed" in message
    assert base_url in message
    assert "after 3 attempts" in message
    assert len(sleeps.delays) == 2


async def test_the_deadline_stops_retrying_when_the_next_wait_would_pass_it(
    server: ChatServer, make_model: MakeModel, sleeps: Sleeps
) -> None:
    """A hanging or failing endpoint costs at most the deadline, not retries x timeout."""
    now = [0.0]

    async def waiting(seconds: float) -> None:
        await sleeps(seconds)
        now[0] += seconds

    server.enqueue(*[error(503, headers={"Retry-After": "4"})] * 3)
    model = make_model(max_retries=10, deadline=10.0, sleep=waiting, clock=lambda: now[0])

    message = await failure(model)

    # Waits of 4 s each: two fit in 10 s, the third would not; 3 attempts, not 11.
    assert len(server.requests) == 3
    assert "no time left for a retry within the deadline of 10 s" in message
    assert "after 3 attempts" in message
    server.assert_complete()


def test_the_environment_sets_timeout_retries_and_deadline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PLANGATE_OPENAI_API_KEY", KEY)
    monkeypatch.setenv("PLANGATE_MODEL_TIMEOUT", "2.5")
    monkeypatch.setenv("PLANGATE_MODEL_RETRIES", "1")
    monkeypatch.setenv("PLANGATE_MODEL_DEADLINE", "30")
    model = OpenAIModel.from_env(MODEL)
    assert (model.timeout, model.max_retries, model.deadline) == (2.5, 1, 30.0)
