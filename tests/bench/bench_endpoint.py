"""The model endpoint's overhead per model call: through HTTP and a real client, against direct.

One trivial model (a `FunctionModel` with a fixed answer) is called `CALLS` times five ways:
directly (`await model.request(...)` on one event loop); through the endpoint with the sync
`openai.OpenAI` client in this process (an in-process agent: the client, the server and the
model loop share one interpreter lock), over chat completions and over the Responses API
(`responses.create`, what the OpenAI Agents SDK's default model calls); the same client in a
child process (an agent in its own
process, the common case: what it measures is sent back); and a bare keep-alive `http.client`
connection in this process (the endpoint's own share, without the client library's). Each call
is timed alone with `perf_counter_ns`; the ways take turns over `ROUNDS` rounds, so that a slow
spell of a shared machine slows each alike. Overhead is a way's median minus the direct median;
the ratio is the medians' quotient.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import openai
from rich.console import Console
from rich.table import Table

from plangate.harness import Message, ToolDefinition, UserMessage
from plangate.harness.models import FunctionModel
from plangate.replay.endpoint import ModelEndpoint

CALLS = 2000
"""Timed calls per way."""
ROUNDS = 4
"""Rounds the calls are spread over, each way taking its turn in every round."""
WARMUP = 50
ANSWER = "The numbers add up."
ASK: list[Message] = [UserMessage(content="Look at the numbers.")]
WIRE_ASK: list[Any] = [{"role": "user", "content": "Look at the numbers."}]
DIRECT = "direct (await model.request)"
OPENAI = "endpoint, openai.OpenAI (sync), same process"
RESPONSES = "endpoint, openai.OpenAI responses.create (sync), same process"
CHILD = "endpoint, openai.OpenAI (sync), child process"
RAW = "endpoint, http.client keep-alive, same process"
CHILD_SCRIPT = """
import json, sys, time
import openai
base_url, warmup, count, answer = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
client = openai.OpenAI(base_url=base_url, api_key="unused", max_retries=0)
ask = [{"role": "user", "content": "Look at the numbers."}]
times = []
for index in range(warmup + count):
    start = time.perf_counter_ns()
    reply = client.chat.completions.create(model="bench", messages=ask)
    times.append((time.perf_counter_ns() - start) / 1000)
    assert reply.choices[0].message.content == answer
print(json.dumps(times[warmup:]))
"""


@dataclass(frozen=True, slots=True)
class EndpointTiming:
    """One way of calling the model: µs per call."""

    name: str
    times_us: list[float] = field(repr=False)

    @property
    def median_us(self) -> float:
        return statistics.median(self.times_us)

    @property
    def p90_us(self) -> float:
        return statistics.quantiles(self.times_us, n=10)[-1]

    def as_dict(self, direct: EndpointTiming) -> dict[str, object]:
        return {
            "name": self.name,
            "calls": len(self.times_us),
            "median_us": round(self.median_us, 1),
            "min_us": round(min(self.times_us), 1),
            "p90_us": round(self.p90_us, 1),
            "overhead_us": round(self.median_us - direct.median_us, 1),
            "ratio": round(self.median_us / direct.median_us, 1),
        }


def model() -> FunctionModel:
    """The trivial model: the same answer to anything."""

    def answer(messages: Sequence[Message], tools: Sequence[ToolDefinition]) -> str:
        return ANSWER

    return FunctionModel(answer, name="bench")


def direct_calls(count: int) -> list[float]:
    """`count` direct calls on one event loop (its setup outside the timing)."""

    async def run() -> list[float]:
        trivial, times = model(), []
        for _ in range(count):
            start = time.perf_counter_ns()
            await trivial.request(ASK, [])
            times.append((time.perf_counter_ns() - start) / 1000)
        return times

    return asyncio.run(run())


def timed(call: Callable[[], object], count: int) -> list[float]:
    times = []
    for _ in range(count):
        start = time.perf_counter_ns()
        call()
        times.append((time.perf_counter_ns() - start) / 1000)
    return times


def child_calls(base_url: str, count: int) -> list[float]:
    """`count` calls timed by a child process's own client (after its warm-up calls)."""
    done = subprocess.run(
        [sys.executable, "-c", CHILD_SCRIPT, base_url, str(WARMUP), str(count), ANSWER],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    times: list[float] = json.loads(done.stdout)
    return times


def run_all(calls: int = CALLS, rounds: int = ROUNDS) -> list[EndpointTiming]:
    """Time the five ways; the direct one first."""
    times: dict[str, list[float]] = {DIRECT: [], OPENAI: [], RESPONSES: [], CHILD: [], RAW: []}
    with ModelEndpoint() as endpoint:
        route = endpoint.open_route(model())
        host, port = endpoint.url.removeprefix("http://").split(":")
        path = f"/r/{route.key}/v1/chat/completions"
        body = json.dumps({"model": "bench", "messages": WIRE_ASK})
        headers = {"Content-Type": "application/json"}
        connection = http.client.HTTPConnection(host, int(port))
        client = openai.OpenAI(base_url=route.base_url, api_key="unused", max_retries=0)

        def through_openai() -> None:
            reply = client.chat.completions.create(model="bench", messages=WIRE_ASK)
            assert reply.choices[0].message.content == ANSWER

        def through_responses() -> None:
            reply = client.responses.create(model="bench", input=WIRE_ASK)
            assert reply.output_text == ANSWER

        def through_http() -> None:
            connection.request("POST", path, body, headers)
            assert ANSWER.encode() in connection.getresponse().read()

        try:
            direct_calls(WARMUP), timed(through_openai, WARMUP), timed(through_http, WARMUP)
            timed(through_responses, WARMUP)
            for index in range(rounds):
                share = calls // rounds + (index < calls % rounds)
                times[DIRECT] += direct_calls(share)
                times[OPENAI] += timed(through_openai, share)
                times[RESPONSES] += timed(through_responses, share)
                times[CHILD] += child_calls(route.base_url, share)
                times[RAW] += timed(through_http, share)
        finally:
            client.close()
            connection.close()
    return [EndpointTiming(name, values) for name, values in times.items()]


def table(results: list[EndpointTiming]) -> Table:
    """The timings as a table, with each way's overhead over the direct call."""
    direct = next(r for r in results if r.name == DIRECT)
    grid = Table(title=f"Model endpoint overhead per model call ({len(direct.times_us):,} calls)")
    for column in ("way", "µs median", "min", "p90", "overhead µs", "ratio"):
        grid.add_column(column, justify="left" if column == "way" else "right")
    for r in results:
        row = r.as_dict(direct)
        grid.add_row(
            r.name, f"{r.median_us:,.1f}", f"{min(r.times_us):,.1f}", f"{r.p90_us:,.1f}",
            "" if r is direct else f"{row['overhead_us']:,.1f}",
            "" if r is direct else f"{row['ratio']:,.0f}×",
        )  # fmt: skip
    return grid


if __name__ == "__main__":
    Console(width=None if sys.stdout.isatty() else 150).print(table(run_all()))
