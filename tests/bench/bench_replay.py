"""Replay throughput: turns a second, plangate's agent against teams' agents through the boundary.

Each agent replays every turn of a golden recorded from it, one turn at a time, with the strict
cassette (what `plangate replay` does by default): plangate's reference agent in process
(`replay_turn` on `support-desk`), and through the agent boundary and the local model endpoint
the same reference agent as a team's would plug in, the plain-`openai` test agent and the two framework examples in process (`python:`), and the
OpenAI Agents SDK example as a separate process (`command:`). The boundary agents' goldens are
recorded here first (the examples' ten sessions, `sim:diligent`). Rounds alternate between the
agents, so that a slow spell of a shared machine slows each alike; the figure is the median
round's turns per second.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from rich.console import Console
from rich.table import Table

from plangate.replay import GoldenDataset, read_dataset, replay_turn
from plangate.replay.agents import AgentDriver, AgentSpec, record_agent
from tests.conftest import REPO
from tests.examples.sessions import SESSIONS

ROUNDS = 3
AGENTS = {
    "reference agent, alyx (python:, behind the boundary)": "python:plangate.replay.agents:reference",
    "plain openai client (python:)": "python:tests.agents.support_agent:make",
    "OpenAI Agents SDK (python:)": "python:examples.support_openai_agents.agent:make",
    "pydantic-ai (python:)": "python:examples.support_pydantic_ai.agent:make",
    "OpenAI Agents SDK (command:)": f"command:{sys.executable} -m examples.support_openai_agents",
}


@dataclass(frozen=True, slots=True)
class Throughput:
    """One agent's replay throughput."""

    name: str
    turns: int
    seconds: list[float]

    @property
    def per_second(self) -> float:
        """Turns a second, in the median round."""
        return self.turns / statistics.median(self.seconds)


async def _reference(dataset: GoldenDataset) -> Callable[[], Awaitable[int]]:
    pairs = [(r["session_id"], r["turn_index"]) for r in dataset.turns.to_pylist()]

    async def run() -> int:
        for session, turn in pairs:
            result = await replay_turn(dataset, session, turn)
            assert result.error is None and result.divergence is None, result.error
        return len(pairs)

    return run


async def _boundary(spec: str) -> tuple[Callable[[], Awaitable[int]], AgentDriver]:
    agent = AgentSpec.of(spec)
    dataset = await record_agent(SESSIONS, name="bench", agent=agent, model="sim:diligent")
    pairs = [(r["session_id"], r["turn_index"]) for r in dataset.turns.to_pylist()]
    driver = AgentDriver(agent)

    async def run() -> int:
        for session, turn in pairs:
            result = await replay_turn(dataset, session, turn, agent=driver)
            assert result.error is None and result.divergence is None, result.error
        return len(pairs)

    return run, driver


async def measure() -> list[Throughput]:
    """Every agent's replays, `ROUNDS` rounds each, the agents taking turns within a round."""
    runs = {"reference agent, alyx (in process)": await _reference(
        read_dataset(REPO / "datasets" / "support-desk")
    )}  # fmt: skip
    drivers = []
    for name, spec in AGENTS.items():
        runs[name], driver = await _boundary(spec)
        drivers.append(driver)
    times: dict[str, list[float]] = {name: [] for name in runs}
    turns: dict[str, int] = {}
    try:
        for name, run in runs.items():  # a warm-up round: imports, processes, connections
            turns[name] = await run()
        for _ in range(ROUNDS):
            for name, run in runs.items():
                began = time.perf_counter()
                await run()
                times[name].append(time.perf_counter() - began)
    finally:
        for driver in drivers:
            await driver.aclose()
    return [Throughput(name, turns[name], times[name]) for name in runs]


def table(results: list[Throughput]) -> Table:
    """The results as a table."""
    grid = Table(title=f"Replay throughput, strict cassette, one turn at a time ({ROUNDS} rounds)")
    grid.add_column("agent")
    grid.add_column("turns", justify="right")
    grid.add_column("turns/s (median round)", justify="right")
    grid.add_column("ms per turn", justify="right")
    for result in results:
        grid.add_row(
            result.name,
            str(result.turns),
            f"{result.per_second:,.1f}",
            f"{1000 / result.per_second:,.1f}",
        )
    return grid


if __name__ == "__main__":
    Console().print(table(asyncio.run(measure())))
