"""`--agent` on `record` and `replay`: a team's own agent behind the agent boundary."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

from plangate.ci.cli._flags import endpoint_flags
from plangate.harness import PlangateError, read_text
from plangate.replay import GoldenDataset, load_requests
from plangate.replay.agents import AgentSpec, record_agent, recorded_agent


def agent_from_args(args: argparse.Namespace) -> AgentSpec | None:
    """The `--agent` and its settings (None: plangate's own agent runs).

    Raises:
        PlangateError: A setting is malformed, or given without `--agent`.
    """
    settings = {
        "env": dict(_pair(text, "--agent-env") for text in args.agent_env),
        "args": list(args.agent_arg),
        "kwargs": {k: _value(v) for k, v in (_pair(t, "--agent-kwarg") for t in args.agent_kwarg)},
        "mcp": dict(_pair(text, "--agent-mcp") for text in args.agent_mcp),
    }
    if args.agent is None:
        given = [flag for flag, value in settings.items() if value]
        if given:
            raise PlangateError(
                f"--agent-{given[0].rstrip('s')} is a setting of --agent; give --agent SPEC"
            )
        return None
    return AgentSpec.of(args.agent, {key: value for key, value in settings.items() if value})


def _pair(text: str, flag: str) -> tuple[str, str]:
    name, equals, value = text.partition("=")
    if not equals or not name:
        raise PlangateError(f"{flag} {text!r}: write NAME=VALUE")
    return name, value


def _value(text: str) -> object:
    """A keyword argument's value: JSON when it parses (`3`, `true`, `["a"]`), else the text."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


async def record_with_agent(args: argparse.Namespace, agent: AgentSpec) -> GoldenDataset:
    """`plangate record --agent SPEC ...`: the sessions recorded through the agent boundary."""
    if args.variant is not None:
        raise PlangateError("give --variant (plangate's agent) or --agent (yours), not both")
    path = Path(args.requests)
    requests = load_requests(read_text(path, "requests file"), str(path))
    return await record_agent(
        requests,
        name=args.name or Path(args.output).name,
        agent=agent,
        model=args.model,
        domain=args.domain,
        seed=args.seed,
        description=args.description,
        redact=args.redact,
        allow_errors=args.allow_errors,
        endpoint=endpoint_flags(args),
    )


def session_agents(
    dataset: GoldenDataset, pairs: Sequence[tuple[str, int]], given: AgentSpec | None
) -> dict[str, AgentSpec]:
    """Which selected sessions replay through the agent boundary, and with which agent.

    `--agent` replays every selected session with that agent; without it, a session recorded
    from a team's agent replays with that agent, and the rest with plangate's own.
    """
    sessions = {session for session, _ in pairs}
    if given is not None:
        return dict.fromkeys(sessions, given)
    chosen = {s: recorded_agent(dataset.session(s)) for s in sessions}
    return {s: agent for s, agent in chosen.items() if agent is not None}
