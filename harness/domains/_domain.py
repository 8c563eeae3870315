"""What a demo domain is: a workspace of tools over deterministic data, plus the tasks it knows.

A domain's task catalog is what a simulated model "knows" about the world: which phrases name a
task and which tool calls do it. Real models do not need it; simulated ones read the request or
the plan they can see, match tasks by these phrases, and make these calls.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from plangate.harness._call_runs import call_key
from plangate.harness._errors import ConfigError
from plangate.harness._messages import canonical_json
from plangate.harness._tools import Tool


@dataclass(frozen=True, slots=True, kw_only=True)
class CallSpec:
    """One tool call a task needs."""

    name: str
    """Tool name."""
    arguments: Mapping[str, Any] = field(default_factory=dict)
    """Arguments, as a JSON object."""

    @property
    def key(self) -> str:
        """Tool name plus canonical arguments: what makes two calls identical."""
        return call_key(self.name, canonical_json(dict(self.arguments)))


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskSpec:
    """A task of a domain, as a simulated model understands it."""

    key: str
    """Short identifier (`sort-latency`)."""
    title: str
    """How a diligent agent names the task in its plan."""
    phrases: tuple[str, ...]
    """Lower-case phrases that identify the task in a request or a plan item."""
    calls: tuple[CallSpec, ...]
    """The work calls that do the task, in order."""
    blocked_reason: str | None = None
    """When set, the task cannot be done by the agent: it is to be marked blocked with this."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Domain:
    """A deterministic demo world: tools over its own data, and the tasks it knows."""

    name: str
    """Domain name used on the command line."""
    description: str
    """One line for listings."""
    instructions: str
    """Domain part of the system prompt."""
    make_tools: Callable[[], list[Tool]]
    """Builds a fresh workspace and returns its tools (each session gets its own state)."""
    tasks: tuple[TaskSpec, ...]
    """The tasks a simulated model can recognize."""
    demo_request: str
    """A request of three tasks used by `make demo`."""
    requests: tuple[str, ...] = ()
    """More example requests (simple ones and multi-task ones)."""


_DOMAINS: dict[str, Callable[[], Domain]] = {}


def register_domain(name: str) -> Callable[[Callable[[], Domain]], Callable[[], Domain]]:
    """Register a domain factory under `name`."""

    def add(factory: Callable[[], Domain]) -> Callable[[], Domain]:
        _DOMAINS[name] = factory
        return factory

    return add


def domain_names() -> list[str]:
    """The names of the registered domains."""
    return sorted(_DOMAINS)


def get_domain(name: str) -> Domain:
    """The domain called `name`; a `ConfigError` lists the choices if there is none."""
    if name not in _DOMAINS:
        raise ConfigError(f"unknown domain {name!r}; choose one of: {', '.join(sorted(_DOMAINS))}")
    return _DOMAINS[name]()
