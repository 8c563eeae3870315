"""What an agent is made of: the read-only configuration that its sessions run with.

`Agent` is this plus `session()`; the session and its loop read their agent through this type,
so that they need not import the agent that starts them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opentelemetry.trace import TracerProvider

from plangate.harness._store import SessionStore
from plangate.harness._tools import Tool
from plangate.harness._tracing import MessageDetail
from plangate.harness._variant import Variant
from plangate.harness.models import Model


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentConfig:
    """The configuration of the reference agent; read-only."""

    model: Model
    """Answers the model calls."""
    variant: Variant
    """Every switch of the harness."""
    tools: Callable[[], Sequence[Tool]] = tuple
    """Builds the work tools for a new session (each session gets a fresh workspace)."""
    instructions: str = ""
    """Domain instructions added to the system prompt."""
    tracer_provider: TracerProvider | None = None
    """Where spans go; None traces nothing."""
    name: str = "plangate-reference"
    """Agent name on AGENT spans."""
    trace_messages: MessageDetail = "json"
    """LLM spans carry input messages as one JSON `input.value` (cheap), or `flat` as
    `llm.input_messages.*` attributes (costs one attribute per message field per call)."""
    store: SessionStore | None = None
    """Where sessions are saved after every change (None: not saved)."""
    memory_dir: Path | str | None = None
    """Folder of the per-user memory files (with `context.memory`): a path or a `str`."""
    skills: Sequence[Any] = ()
    """Skills the agent can load on demand (with `context.skills`)."""
