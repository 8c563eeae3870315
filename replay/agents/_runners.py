"""The three ways an agent plugs in: in this process, as a command, over HTTP.

Each runner runs one turn at a time and turns every way an agent can fail a turn (an exception,
a process that exits, a reply that is not the contract's JSON, an HTTP error) into
`AgentFailed`, with what the agent said; a spec that cannot work at all (no such module, no
such command, nothing listening) is an `AgentError`, which the command line reports as bad
input.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import inspect
import json
import os
import sys
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import httpx

from plangate.replay.agents._boundary import (
    AgentError,
    AgentFailed,
    AgentRunner,
    AgentSpec,
    TurnInput,
    TurnOutput,
)
from plangate.replay.agents._tool_calls import TURN_TOOLS_URL

TURN_SECONDS = 600.0
"""The longest one turn of a `command:` or `http:` agent may take before it counts as failed."""
_LINE_LIMIT = 64 * 1024 * 1024
"""The longest reply line a `command:` agent may write (a turn's messages can be large)."""
_STDERR_LINES = 40

TurnFunction = Callable[[TurnInput], Awaitable[Any]]


def runner_for(agent: AgentSpec, env: Mapping[str, str]) -> AgentRunner:
    """A runner for `agent`; `env` is what plangate adds to a `command:` agent's environment.

    Raises:
        AgentError: The spec cannot work: its module or factory is missing, its kind unknown.
    """
    if agent.kind == "python":
        return PythonRunner(agent)
    if agent.kind == "command":
        return CommandRunner(agent, env)
    return HttpRunner(agent)


class PythonRunner:
    """`python:package.module:factory`: an async callable in this process."""

    def __init__(self, agent: AgentSpec) -> None:
        self.agent = agent
        self.turn = _load(agent)

    async def run_turn(self, turn: TurnInput) -> TurnOutput:
        """Call the agent's turn function; its `hermetic` tools find the turn's `tools_url`."""
        token = TURN_TOOLS_URL.set(turn.tools_url)
        try:
            value = await self.turn(turn)
        except Exception as exc:  # the agent's own failure: the turn's outcome, not a crash
            raise AgentFailed(f"{self.agent.spec}: {type(exc).__name__}: {exc}") from exc
        finally:
            TURN_TOOLS_URL.reset(token)
        return TurnOutput.of(value, self.agent.spec)

    async def aclose(self) -> None:
        """Close the agent if it has an `aclose`."""
        closer = getattr(self.turn, "aclose", None)
        if closer is not None:
            await closer()


def _load(agent: AgentSpec) -> TurnFunction:
    module_name, _, attribute = agent.target.rpartition(":")
    if not module_name or not attribute:
        raise AgentError(f"agent {agent.spec!r}: write python:package.module:factory")
    if os.getcwd() not in sys.path:  # a team's agent lives in its repository, where we run
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise AgentError(f"agent {agent.spec!r}: cannot import {module_name!r}: {exc}") from exc
    found = getattr(module, attribute, None)
    if found is None:
        raise AgentError(f"agent {agent.spec!r}: module {module_name!r} has no {attribute!r}")
    if inspect.iscoroutinefunction(found):
        if agent.kwargs:
            raise AgentError(
                f"agent {agent.spec!r}: {attribute!r} is a turn function, not a factory: it "
                "takes no kwargs (make a factory that returns the turn function)"
            )
        return found  # type: ignore[no-any-return]
    try:
        made = found(**agent.kwargs)
    except TypeError as exc:
        raise AgentError(f"agent {agent.spec!r}: {attribute}(**kwargs) failed: {exc}") from exc
    if not callable(made):
        raise AgentError(
            f"agent {agent.spec!r}: {attribute}() returned {type(made).__name__}; a factory "
            "must return an async callable that takes a TurnInput"
        )
    return made  # type: ignore[no-any-return]


class CommandRunner:
    """`command:ARGV...`: a process that reads one turn per line and writes one reply per line.

    The process is started on the first turn and kept for the next ones; one that exits is
    started again for the next turn. Its standard error is kept (the last lines) to explain a
    failure.
    """

    def __init__(self, agent: AgentSpec, env: Mapping[str, str]) -> None:
        self.agent = agent
        self.argv = agent.argv()
        self.env = {**os.environ, **env, **agent.env}
        self.process: asyncio.subprocess.Process | None = None
        self.stderr: deque[str] = deque(maxlen=_STDERR_LINES)
        self._drain: asyncio.Task[None] | None = None

    async def run_turn(self, turn: TurnInput) -> TurnOutput:
        """Write the turn as one JSON line; read the reply line."""
        process = await self._running()
        assert process.stdin is not None and process.stdout is not None
        line = json.dumps(turn.to_json(), ensure_ascii=False) + "\n"
        try:
            process.stdin.write(line.encode())
            await process.stdin.drain()
            async with asyncio.timeout(TURN_SECONDS):
                reply = await process.stdout.readline()
        except (BrokenPipeError, ConnectionResetError):
            reply = b""
        except TimeoutError:
            await self.aclose()
            raise AgentFailed(f"{self.agent.spec}: no reply within {TURN_SECONDS:g} s") from None
        except ValueError:  # a line over the limit
            await self.aclose()
            raise AgentFailed(f"{self.agent.spec}: a reply line over 64 MiB") from None
        if not reply:
            raise AgentFailed(await self._exited())
        try:
            value = json.loads(reply)
        except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
            raise AgentFailed(
                f"{self.agent.spec}: wrote a line that is not JSON on standard output (write "
                f"logs to standard error): {reply[:200]!r}"
            ) from None
        return TurnOutput.of(value, self.agent.spec)

    async def _running(self) -> asyncio.subprocess.Process:
        if self.process is not None and self.process.returncode is None:
            return self.process
        try:
            self.process = await asyncio.create_subprocess_exec(
                *self.argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=self.env,
                limit=_LINE_LIMIT,
            )
        except OSError as exc:  # no such command, not executable
            raise AgentError(
                f"agent {self.agent.spec!r}: cannot start {self.argv[0]!r}: {exc}"
            ) from exc
        self._drain = asyncio.create_task(self._keep_stderr(self.process))
        return self.process

    async def _keep_stderr(self, process: asyncio.subprocess.Process) -> None:
        assert process.stderr is not None
        async for line in process.stderr:
            self.stderr.append(line.decode(errors="replace").rstrip())

    async def _exited(self) -> str:
        process = self.process
        code = await process.wait() if process is not None else None
        if self._drain is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._drain, 1)
        tail = " | ".join(list(self.stderr)[-5:]) or "nothing on standard error"
        return f"{self.agent.spec}: exited (code {code}) without a reply: {tail}"

    async def aclose(self) -> None:
        """Close the process's input, give it a moment to exit, then kill it."""
        process, self.process = self.process, None
        if process is None or process.returncode is not None:
            return
        assert process.stdin is not None
        with contextlib.suppress(Exception):
            process.stdin.close()
        try:
            await asyncio.wait_for(process.wait(), 5)
        except TimeoutError:
            process.kill()
            await process.wait()


class HttpRunner:
    """`http:URL`: a running service that takes a turn's JSON by POST and answers with JSON."""

    def __init__(self, agent: AgentSpec) -> None:
        self.agent = agent
        self.url = agent.target
        if not self.url.startswith(("http://", "https://")):
            raise AgentError(f"agent {agent.spec!r}: write http:http://HOST:PORT/PATH")
        self.client = httpx.AsyncClient(timeout=TURN_SECONDS)

    async def run_turn(self, turn: TurnInput) -> TurnOutput:
        """POST the turn; read the reply."""
        try:
            response = await self.client.post(self.url, json=turn.to_json())
        except httpx.ConnectError as exc:
            raise AgentError(
                f"agent {self.agent.spec!r}: nothing answers at {self.url}: {exc}"
            ) from exc
        except httpx.HTTPError as exc:
            raise AgentFailed(f"{self.agent.spec}: {type(exc).__name__}: {exc}") from exc
        if response.status_code >= 400:
            raise AgentFailed(
                f"{self.agent.spec}: HTTP {response.status_code}: {response.text[:300]}"
            )
        try:
            value = response.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise AgentFailed(
                f"{self.agent.spec}: answered with something that is not JSON"
            ) from None
        return TurnOutput.of(value, self.agent.spec)

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self.client.aclose()
