"""The agent boundary: "run this turn", the one contract between plangate and any agent.

plangate hands an agent a `TurnInput` (the session, the turn, the request, the conversation
before it as OpenAI-style chat messages, the user, the agent's own saved state, and where its
model is) and gets a `TurnOutput` back (the answer, and optionally the new state and the turn's
messages). In JSON, one object each, they are what a `command:` agent reads on standard input
and writes on standard output, one line per turn, and what an `http:` agent gets by POST.

An agent is named by a spec string, with its variant settings beside it (`AgentSpec`):

- `python:package.module:factory`: an async callable in this process, or a factory (called
  with the settings' keyword arguments) that returns one;
- `command:ARGV...`: any executable, started with the settings' `args` and `env`;
- `http:URL`: a running service that takes the same JSON by POST.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from plangate.harness import PlangateError
from plangate.replay.endpoint import check_source

AgentKind = Literal["python", "command", "http"]
AGENT_KINDS: tuple[AgentKind, ...] = ("python", "command", "http")
LOCAL_API_KEY = "plangate-local"
"""The API key an agent is given for plangate's local model endpoint (any text works)."""
TOOLS_URL_ENV = "PLANGATE_TOOLS_URL"
"""The environment variable that gives a `command:` agent its route's tools URL (`hermetic`)."""


class AgentError(PlangateError):
    """An agent spec or its settings are unusable; the message names the spec and the field."""


class AgentFailed(Exception):
    """The agent did not complete a turn: it raised, exited, or answered something unreadable.

    Not a `PlangateError`: it is the agent's own failure, recorded as the turn's outcome
    (`agent_error`), not bad input to plangate.
    """


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnInput:
    """What an agent is given to run one turn."""

    session_id: str
    """The conversation."""
    turn_index: int
    """0 for the session's first turn."""
    request: str
    """The user's message for this turn."""
    history: tuple[dict[str, Any], ...] = ()
    """The conversation before this turn, as OpenAI chat messages (no system message)."""
    user_id: str = "user"
    """Who is asking."""
    state: Any = None
    """The agent's own state as it returned it after the previous turn (None at first)."""
    model_base_url: str = ""
    """The OpenAI-compatible endpoint to call for this turn, up to and including `/v1`."""
    model_api_key: str = LOCAL_API_KEY
    """The key to give that endpoint."""
    model_name: str = ""
    """The model to ask for."""
    tools_url: str | None = None
    """Where the agent's `hermetic` tools ask to be recorded or replayed, `{url}/r/{key}/tools`
    (None: the agent runs its tools itself)."""
    otlp_endpoint: str | None = None
    """Where to export the turn's OpenTelemetry spans over OTLP/HTTP (the exporter appends
    `/v1/traces`); an in-process agent flushes them before it returns the turn."""
    mcp: Mapping[str, str] = field(default_factory=dict)
    """plangate's MCP gateway for each of the agent's MCP servers, by the name the agent's
    `mcp` setting gives it (a `command:` agent also finds each in that environment variable)."""

    def to_json(self) -> dict[str, Any]:
        """The JSON object a `command:` or `http:` agent receives."""
        return {
            "session_id": self.session_id,
            "turn_index": self.turn_index,
            "request": self.request,
            "history": list(self.history),
            "user_id": self.user_id,
            "state": self.state,
            "model": {
                "base_url": self.model_base_url,
                "api_key": self.model_api_key,
                "name": self.model_name,
            },
            "tools_url": self.tools_url,
            "telemetry": {"otlp_endpoint": self.otlp_endpoint},
            "mcp": dict(self.mcp),
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnOutput:
    """What an agent gives back after a turn."""

    answer: str
    """The final answer the user sees."""
    state: Any = None
    """The agent's own state to hand back on the next turn (JSON-able; None: keeps none)."""
    messages: tuple[dict[str, Any], ...] | None = None
    """The turn's messages as OpenAI chat messages, request first (None: plangate takes them
    from what its model endpoint saw)."""

    @classmethod
    def of(cls, value: Any, where: str) -> TurnOutput:
        """Read an agent's reply: a `TurnOutput`, a string (the answer), or a JSON object.

        Raises:
            AgentFailed: The reply is none of those; the message says what was wrong.
        """
        if isinstance(value, TurnOutput):
            return value
        if isinstance(value, str):
            return cls(answer=value)
        if not isinstance(value, Mapping):
            raise AgentFailed(f"{where}: returned {type(value).__name__}, expected an object")
        if "error" in value and value["error"]:
            raise AgentFailed(f"{where}: reported an error: {str(value['error'])[:500]}")
        answer = value.get("answer")
        if not isinstance(answer, str):
            raise AgentFailed(f"{where}: the reply has no 'answer' string: {_short(value)}")
        messages = value.get("messages")
        if messages is not None and not (
            isinstance(messages, list) and all(isinstance(m, dict) for m in messages)
        ):
            raise AgentFailed(f"{where}: 'messages' must be a list of chat message objects")
        return cls(
            answer=answer,
            state=value.get("state"),
            messages=tuple(messages) if messages is not None else None,
        )


class AgentRunner(Protocol):
    """A running agent: runs turns, one at a time per runner, until closed."""

    async def run_turn(self, turn: TurnInput) -> TurnOutput:
        """Run one turn.

        Raises:
            AgentFailed: The agent did not complete the turn.
        """
        ...

    async def aclose(self) -> None:
        """Release what the runner holds (a process, a connection)."""
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentSpec:
    """An agent and its variant settings: what a gate side, `record` and `replay` name."""

    spec: str
    """`python:module:factory`, `command:ARGV...` or `http:URL`."""
    env: Mapping[str, str] = field(default_factory=dict)
    """Environment variables for a `command:` agent (on top of plangate's)."""
    args: tuple[str, ...] = ()
    """Extra arguments for a `command:` agent."""
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    """Keyword arguments for a `python:` factory."""
    mcp: Mapping[str, str] = field(default_factory=dict)
    """The agent's MCP servers, by the environment variable it reads each one's URL from:
    `plangate:DOMAIN`, `stdio:COMMAND ARGS` or an `http://` URL. plangate serves each through
    its gateway (recorded, or from the cassette) and sets the variable to the gateway's URL."""

    @property
    def kind(self) -> AgentKind:
        """Which of the three ways the agent plugs in."""
        kind = self.spec.partition(":")[0]
        if kind not in AGENT_KINDS:
            raise AgentError(
                f"agent {self.spec!r}: start it with python:, command: or http: "
                "(python:package.module:factory, command:ARGV..., http://URL as http:URL)"
            )
        return kind

    @property
    def target(self) -> str:
        """The spec without its kind: the module and factory, the command line, the URL."""
        return self.spec.partition(":")[2]

    def argv(self) -> list[str]:
        """A `command:` agent's command line, its `args` appended."""
        try:
            words = shlex.split(self.target)
        except ValueError as exc:
            raise AgentError(
                f"agent {self.spec!r}: the command line does not parse: {exc}"
            ) from exc
        if not words:
            raise AgentError(f"agent {self.spec!r}: name the command after command:")
        return [*words, *self.args]

    @property
    def label(self) -> str:
        """The spec with its settings, as a dataset or report names the agent."""
        settings = self.settings()
        return self.spec if not settings else f"{self.spec} {json.dumps(settings, sort_keys=True)}"

    def settings(self) -> dict[str, Any]:
        """The variant settings that are set, as JSON."""
        out: dict[str, Any] = {}
        if self.env:
            out["env"] = dict(self.env)
        if self.args:
            out["args"] = list(self.args)
        if self.kwargs:
            out["kwargs"] = dict(self.kwargs)
        if self.mcp:
            out["mcp"] = dict(self.mcp)
        return out

    @classmethod
    def of(cls, spec: str, settings: Mapping[str, Any] | None = None, where: str = "") -> AgentSpec:
        """An agent spec with settings `{"env": {...}, "args": [...], "kwargs": {...}}`.

        Raises:
            AgentError: A setting has the wrong shape; the message names it and `where`.
        """
        settings = dict(settings or {})
        at = f"{where}: " if where else ""
        unknown = sorted(set(settings) - {"env", "args", "kwargs", "mcp"})
        if unknown:
            raise AgentError(
                f"{at}unknown agent setting {unknown[0]!r}; allowed: args, env, kwargs, mcp"
            )
        env = settings.get("env", {})
        if not isinstance(env, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in env.items()
        ):
            raise AgentError(f'{at}agent env must be a table of strings, like {{ MODE = "a" }}')
        args = settings.get("args", [])
        if not isinstance(args, list | tuple) or not all(isinstance(a, str) for a in args):
            raise AgentError(f'{at}agent args must be a list of strings, like ["--strict"]')
        kwargs = settings.get("kwargs", {})
        if not isinstance(kwargs, Mapping):
            raise AgentError(f"{at}agent kwargs must be a table, like {{ finish_check = true }}")
        mcp = settings.get("mcp", {})
        if not isinstance(mcp, Mapping) or not all(
            isinstance(k, str) and k and isinstance(v, str) for k, v in mcp.items()
        ):
            raise AgentError(
                f"{at}agent mcp must be a table of strings, like "
                '{ DESK_MCP_URL = "plangate:support" }'
            )
        for source in mcp.values():
            check_source(source, at.rstrip(": ") or f"agent {spec!r}")
        agent = cls(spec=spec, env=dict(env), args=tuple(args), kwargs=dict(kwargs), mcp=dict(mcp))
        agent.kind  # noqa: B018 - checks the spec's kind now, where the mistake is
        return agent


def _short(value: Any, limit: int = 200) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"
