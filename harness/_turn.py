"""The records of a turn: its mutable state, its events and calls, its result, its decisions.

`Turn` is the one mutable state the loop owns; everything else here is a frozen record. All of
them serialize to JSON-able dicts so that a run can be saved after every change and resumed
after a crash or a pause for approval.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from plangate.harness._messages import (
    Message,
    SystemMessage,
    ToolCall,
    ToolDefinition,
    ToolMessage,
    Usage,
    canonical_arguments_text,
    message_from_dict,
    message_to_dict,
)
from plangate.harness._tools import Tool
from plangate.harness.plans import PlanItem

StopReason = Literal[
    "finished",
    "forced_finish",
    "max_iterations",
    "loop_guard",
    "model_error",
    "tool_error",
    "agent_error",
    "awaiting_approval",
]
"""Why a turn ended. `agent_error` is for agents behind plangate's agent boundary: the agent
raised, or exited without an answer (its own failure, so a fail, not an error)."""

STOP_REASONS: tuple[StopReason, ...] = get_args(StopReason)
"""Every stop reason, in the order above."""
ERROR_STOP_REASONS: frozenset[StopReason] = frozenset({"model_error", "tool_error"})
"""Stop reasons that are infrastructure failures, not something the agent did: the model
endpoint kept failing (`model_error`), or what serves the tools failed (`tool_error`)."""


def infrastructure_failure(stop_reason: str, detail: str) -> str | None:
    """`the model failed: …` or `the tools failed: …` for an infrastructure stop, else None."""
    if stop_reason not in ERROR_STOP_REASONS:
        return None
    what = "model" if stop_reason == "model_error" else "tools"
    return f"the {what} failed: {detail}"


EventKind = Literal[
    "plan_updated",
    "planning_skipped",
    "gate_bounce",
    "gate_exhausted",
    "nudge",
    "continuation",
    "loop_warning",
    "loop_stop",
    "iteration_warning",
    "forced_finish",
    "model_error",
    "tool_error",
    "length_cutoff",
    "plan_proposed",
    "plan_approved",
    "plan_rejected",
    "resumed",
    "checkpoint",
    "memory_updated",
    "skill_loaded",
    "stop",
]
"""What the harness noticed or did during a turn."""

FINISH = "finish"
"""The tool that ends a turn (with the finish gate)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Event:
    """Something the harness noticed or did; also a span event on the turn's AGENT span."""

    kind: EventKind
    """What happened."""
    iteration: int
    """The model call it happened at (0: before the first)."""
    detail: str = ""
    """Evidence: the bounced items, the repeated call, the stop reason's detail."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form."""
        return {"kind": self.kind, "iteration": self.iteration, "detail": self.detail}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Event:
        """The inverse of `to_dict`."""
        return cls(kind=data["kind"], iteration=data["iteration"], detail=data["detail"])


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallRecord:
    """One tool call of a turn and how it went."""

    iteration: int
    """The model call that asked for it."""
    id: str
    """Call id."""
    name: str
    """Tool name."""
    arguments: str
    """Canonical JSON of the arguments (the raw text when it was not valid JSON)."""
    status: Literal["ok", "error", "not_run"]
    """`error` for a result the model should fix; `not_run` when the turn stopped first."""
    content: str
    """The result as the model saw it."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form."""
        return {
            "iteration": self.iteration,
            "id": self.id,
            "name": self.name,
            "arguments": self.arguments,
            "status": self.status,
            "content": self.content,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ToolCallRecord:
        """The inverse of `to_dict`."""
        return cls(**data)


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnResult:
    """Everything about one finished (or stopped) turn."""

    session_id: str
    """The session."""
    turn_index: int
    """0 for the session's first turn."""
    request: str
    """The user's message."""
    stop_reason: StopReason
    """Why the turn ended."""
    stop_detail: str
    """More about the stop (the model error, the looping call)."""
    answer: str
    """The final text: the `finish` summary, or the reply that ended the turn."""
    plan: tuple[PlanItem, ...]
    """The plan at the end of the turn."""
    tool_calls: tuple[ToolCallRecord, ...]
    """Every tool call, in order."""
    iterations: int
    """Model calls made."""
    events: tuple[Event, ...]
    """What the harness noticed or did."""
    messages: tuple[Message, ...]
    """The turn's trajectory: the request and everything after it."""
    usage: Usage
    """Token counts summed over the turn."""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able summary (what `plangate run --json` prints)."""
        return {
            "session_id": self.session_id,
            "turn_index": self.turn_index,
            "request": self.request,
            "stop_reason": self.stop_reason,
            "stop_detail": self.stop_detail,
            "answer": self.answer,
            "iterations": self.iterations,
            "plan": [item.as_dict() for item in self.plan],
            "tool_calls": [
                {
                    "name": c.name,
                    "arguments": c.arguments,
                    "status": c.status,
                    "iteration": c.iteration,
                }
                for c in self.tool_calls
            ],
            "events": [
                {"kind": e.kind, "iteration": e.iteration, "detail": e.detail} for e in self.events
            ],
            "usage": {
                "prompt_tokens": self.usage.prompt_tokens,
                "completion_tokens": self.usage.completion_tokens,
            },
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class Stop:
    """Decision: end the turn."""

    reason: StopReason
    detail: str = ""


@dataclass(frozen=True, slots=True)
class Continue:
    """Decision: call the model again."""


CONTINUE = Continue()
Outcome = Stop | Continue


@dataclass(slots=True, kw_only=True)
class Turn:
    """The mutable state of one running turn, owned by the loop."""

    index: int
    request: str
    planning: bool
    messages: list[Message] = field(default_factory=list)
    iteration: int = 0
    bounces: int = 0
    forcing: bool = False
    finished: bool = False
    answer: str = ""
    keys: list[str] = field(default_factory=list)
    calls: list[ToolCallRecord] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    plan_snapshot: str = "[]"
    pause: str | None = None
    system: SystemMessage = SystemMessage(content="")
    offered: dict[str, Tool] = field(default_factory=dict)
    definitions: list[ToolDefinition] = field(default_factory=list)

    def offer(self, tools: Sequence[Tool]) -> None:
        """Offer `tools` on the coming model calls."""
        self.offered = {t.name: t for t in tools}
        self.definitions = [t.definition for t in tools]

    def record(
        self,
        call: ToolCall,
        status: Literal["ok", "error", "not_run"],
        content: str,
        arguments: str,
    ) -> None:
        """Record a call's result: a tool message for the model, a call record for the result."""
        self.messages.append(
            ToolMessage(
                tool_call_id=call.id, name=call.name, content=content, is_error=status != "ok"
            )
        )
        self.calls.append(
            ToolCallRecord(
                iteration=self.iteration,
                id=call.id,
                name=call.name,
                arguments=arguments,
                status=status,
                content=content,
            )
        )

    def skip(self, calls: Sequence[ToolCall], why: str) -> None:
        """Answer calls the turn will not run, so that the history stays well formed."""
        for call in calls:
            message = f"Not run: the turn ended ({why})."
            self.record(call, "not_run", message, canonical_arguments_text(call.arguments))

    def result(self, session_id: str, plan: tuple[PlanItem, ...], stop: Stop) -> TurnResult:
        """The turn as it stands, ended by `stop`, with the session's `plan`."""
        return TurnResult(
            session_id=session_id,
            turn_index=self.index,
            request=self.request,
            stop_reason=stop.reason,
            stop_detail=stop.detail,
            answer=self.answer,
            plan=plan,
            tool_calls=tuple(self.calls),
            iterations=self.iteration,
            events=tuple(self.events),
            messages=tuple(self.messages),
            usage=self.usage,
        )

    def to_dict(self) -> dict[str, Any]:
        """The saved state of the turn (tools and the system prompt are rebuilt on restore)."""
        return {
            "index": self.index,
            "request": self.request,
            "planning": self.planning,
            "messages": [message_to_dict(m) for m in self.messages],
            "iteration": self.iteration,
            "bounces": self.bounces,
            "forcing": self.forcing,
            "finished": self.finished,
            "answer": self.answer,
            "keys": list(self.keys),
            "calls": [c.to_dict() for c in self.calls],
            "events": [e.to_dict() for e in self.events],
            "usage": [self.usage.prompt_tokens, self.usage.completion_tokens],
            "plan_snapshot": self.plan_snapshot,
            "pause": self.pause,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Turn:
        """The inverse of `to_dict`."""
        prompt, completion = data["usage"]
        return cls(
            index=data["index"],
            request=data["request"],
            planning=data["planning"],
            messages=[message_from_dict(m) for m in data["messages"]],
            iteration=data["iteration"],
            bounces=data["bounces"],
            forcing=data["forcing"],
            finished=data["finished"],
            answer=data["answer"],
            keys=list(data["keys"]),
            calls=[ToolCallRecord.from_dict(c) for c in data["calls"]],
            events=[Event.from_dict(e) for e in data["events"]],
            usage=Usage(prompt_tokens=prompt, completion_tokens=completion),
            plan_snapshot=data["plan_snapshot"],
            pause=data.get("pause"),
        )
