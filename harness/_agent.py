"""The reference planning agent: a small turn loop, and sessions that hold its state.

The loop only orders the steps (limit → context → model → record → tools → decide); every
pattern is a helper, a tool or a context section switched by the `Variant`. A turn always ends
with a `TurnResult` that keeps the partial trajectory and names its stop reason.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from opentelemetry.trace import TracerProvider

from harness import _context as prompts
from harness._harness_plan import HarnessPlan
from harness._loops import call_key, trailing_run
from harness._messages import (
    AssistantMessage,
    Message,
    ModelResponse,
    SystemMessage,
    ToolCall,
    ToolDefinition,
    ToolMessage,
    Usage,
    UserMessage,
    canonical_json,
)
from harness._model import Model, ModelError
from harness._plan import (
    PlanItem,
    incomplete,
    is_open,
    render_item,
    render_plan,
    snapshot,
    status_line,
)
from harness._todo import TodoList, todo_tools
from harness._tools import Tool, ToolResult, ToolRetry, run_tool, tool
from harness._tracing import (
    ITERATIONS,
    OUTPUT_VALUE,
    PLAN,
    STOP_REASON,
    MessageDetail,
    SessionTracing,
    SpanHandle,
)
from harness._trigger import needs_plan
from harness._variant import Variant

StopReason = Literal[
    "finished", "forced_finish", "max_iterations", "loop_guard", "model_error", "awaiting_approval"
]
"""Why a turn ended."""

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
    "stop",
]
"""What the harness noticed or did during a turn."""

FINISH = "finish"


@dataclass(frozen=True, slots=True, kw_only=True)
class Event:
    """Something the harness noticed or did; also a span event on the turn's AGENT span."""

    kind: EventKind
    """What happened."""
    iteration: int
    """The model call it happened at (0: before the first)."""
    detail: str = ""
    """Evidence: the bounced items, the repeated call, the stop reason's detail."""


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


@dataclass(frozen=True, slots=True, kw_only=True)
class Agent:
    """Configuration of the reference agent; read-only. `session()` starts a conversation."""

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

    def session(
        self,
        session_id: str | None = None,
        *,
        user_id: str = "user",
        metadata: dict[str, Any] | None = None,
    ) -> Session:
        """Start a session (a conversation of one or more turns)."""
        return Session(
            self, session_id or f"session-{uuid.uuid4().hex[:12]}", user_id, metadata or {}
        )


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
    system: SystemMessage = SystemMessage(content="")
    offered: dict[str, Tool] = field(default_factory=dict)
    definitions: list[ToolDefinition] = field(default_factory=list)


class Session:
    """One conversation: its history, its plan, its tools and its spans."""

    def __init__(
        self, agent: Agent, session_id: str, user_id: str, metadata: dict[str, Any]
    ) -> None:
        self.agent = agent
        self.session_id = session_id
        self.user_id = user_id
        self.history: list[Message] = []
        variant = agent.variant
        self.todos: TodoList | None = (
            TodoList(variant.plan.statuses) if variant.plan.dialect == "todo" else None
        )
        self.harness_plan: HarnessPlan | None = (
            HarnessPlan() if variant.plan.dialect == "harness" else None
        )
        self._work_tools = list(agent.tools())
        self._plan_tools = (
            todo_tools(self.todos, show_plan=variant.plan.message == "history")
            if self.todos
            else []
        )
        self._finish = self._finish_tool()
        self.tracing = SessionTracing(
            agent.tracer_provider,
            session_id=session_id,
            user_id=user_id,
            metadata={"variant": variant.name, **metadata},
            messages=agent.trace_messages,
        )
        self._turn: Turn | None = None
        self.turns = 0

    def plan_items(self) -> tuple[PlanItem, ...]:
        """The plan as it stands (empty without a plan)."""
        if self.todos is not None:
            return self.todos.items()
        if self.harness_plan is not None:
            return self.harness_plan.items()
        return ()

    async def run_turn(self, request: str) -> TurnResult:
        """Run one turn of the conversation to its end and return what happened."""
        with self.tracing.turn(self.turns, request, self.agent.name) as span:
            turn = self._start(request)
            outcome: Outcome = CONTINUE
            while isinstance(outcome, Continue):
                outcome = await self._iterate(turn)
            self._emit(turn, "stop", f"{outcome.reason}: {outcome.detail}".rstrip(": "))
            span.set(
                {STOP_REASON: outcome.reason, ITERATIONS: turn.iteration, OUTPUT_VALUE: turn.answer}
            )
            if outcome.reason == "model_error":
                span.error(outcome.detail)
        self.history.extend(turn.messages)
        self._turn = None
        self.turns += 1
        return self._result(turn, outcome)

    # -- the loop -------------------------------------------------------------------------

    async def _iterate(self, turn: Turn) -> Outcome:
        tools = self._limit(turn)
        if isinstance(tools, Stop):
            return tools
        response = await self._call_model(turn, tools)
        if isinstance(response, Stop):
            return response
        turn.messages.append(response.message)
        if response.message.tool_calls:
            outcome = await self._run_calls(turn, response.message.tool_calls)
        else:
            outcome = self._on_text(turn, response.message)
        if turn.forcing and isinstance(outcome, Continue):
            return Stop(reason="forced_finish", detail="the iteration limit was reached")
        return outcome

    def _start(self, request: str) -> Turn:
        variant = self.agent.variant
        planning = variant.plan.dialect != "none" and (
            variant.plan.trigger == "always" or needs_plan(request)
        )
        turn = Turn(index=self.turns, request=request, planning=planning)
        turn.messages.append(UserMessage(content=request))
        self._turn = turn
        if variant.plan.dialect != "none" and not planning:
            self._emit(turn, "planning_skipped", "fewer than two actions in the request")
        turn.plan_snapshot = snapshot(self.plan_items())
        if planning and self.harness_plan is not None:
            self.harness_plan.start(request)
            turn.plan_snapshot = snapshot(self.plan_items())
            self.tracing.plan_change(0, turn.plan_snapshot, "the harness planned the request")
            self._emit(turn, "plan_updated", turn.plan_snapshot)
        turn.system = SystemMessage(
            content=prompts.system_prompt(variant, self.agent.instructions, planning=planning)
        )
        self._offer(turn, self._offered(turn))
        return turn

    def _offer(self, turn: Turn, tools: Sequence[Tool]) -> None:
        turn.offered = {t.name: t for t in tools}
        turn.definitions = [t.definition for t in tools]

    def _limit(self, turn: Turn) -> list[ToolDefinition] | Stop:
        """Iteration guard: the tools for the next call, a warning, a forced finish, or a stop."""
        settings = self.agent.variant.turn
        upcoming = turn.iteration + 1
        if upcoming > settings.max_iterations:
            return Stop(reason="max_iterations", detail=f"{settings.max_iterations} model calls")
        left = settings.max_iterations - upcoming + 1
        if settings.forced_finish and left == 1 and settings.ending == "finish_tool":
            turn.forcing = True
            self._prompt(turn, "forced_finish", prompts.FORCED_FINISH)
            self._offer(turn, [self._finish])
            return turn.definitions
        if settings.iteration_warning and left == settings.iteration_warning:
            self._prompt(turn, "iteration_warning", prompts.ITERATION_WARNING.format(left=left))
        return turn.definitions

    async def _call_model(self, turn: Turn, tools: list[ToolDefinition]) -> ModelResponse | Stop:
        messages = self._context(turn)
        turn.iteration += 1
        model = self.agent.model
        with self.tracing.llm(turn.iteration, messages, tools, model.name) as span:
            try:
                response = await model.request(messages, tools)
            except ModelError as exc:
                span.error(str(exc))
                self._emit(turn, "model_error", str(exc))
                return Stop(reason="model_error", detail=str(exc))
            self.tracing.record_response(span, response)
        turn.usage = turn.usage + response.usage
        return response

    async def _run_calls(self, turn: Turn, calls: Sequence[ToolCall]) -> Outcome:
        for position, call in enumerate(calls):
            stop = await self._run_call(turn, call)
            if stop is not None:
                self._skip(turn, calls[position + 1 :], stop.reason)
                return stop
            if turn.finished:
                self._skip(turn, calls[position + 1 :], "finished")
                return Stop(reason="forced_finish" if turn.forcing else "finished")
        return CONTINUE

    def _on_text(self, turn: Turn, message: AssistantMessage) -> Outcome:
        """A reply without tool calls: a nudge, a continuation prompt, or the end of the turn."""
        guards = self.agent.variant.guards
        text = message.content
        written = prompts.written_tool_call(text, turn.offered) if guards.nudge else None
        if written is not None:
            self._prompt(turn, "nudge", prompts.NUDGE.format(name=written))
            return CONTINUE
        if self.agent.variant.turn.ending == "finish_tool":
            reply = prompts.CONTINUATION if not text.strip() else prompts.TEXT_REMINDER
            self._prompt(turn, "continuation", reply)
            return CONTINUE
        if not text.strip() and guards.continuation and is_open(self.plan_items()):
            self._prompt(turn, "continuation", prompts.CONTINUATION)
            return CONTINUE
        turn.answer = text
        return Stop(reason="finished")

    # -- one tool call --------------------------------------------------------------------

    async def _run_call(self, turn: Turn, call: ToolCall) -> Stop | None:
        guards = self.agent.variant.guards
        arguments = _canonical_arguments(call)
        key = call_key(call.name, arguments)
        turn.keys.append(key)
        repeats = trailing_run(turn.keys[-guards.loop_stop_after :]) if guards.loop_guard else 0
        if guards.loop_guard and repeats >= guards.loop_stop_after:
            detail = f"{repeats} identical calls in a row: {key}"
            self._emit(turn, "loop_stop", detail)
            message = f"Not run: the loop guard stopped the turn ({detail})."
            self._record(turn, call, "error", message, arguments)
            return Stop(reason="loop_guard", detail=detail)
        found = turn.offered.get(call.name)
        schema = found.parameters if found is not None else None
        with self.tracing.tool(turn.iteration, call, schema) as span:
            result = await run_tool(call, turn.offered)
            content = self._annotate(turn, result, key, repeats, span)
        self._record(turn, call, result.status, content, arguments)
        return None

    def _annotate(
        self, turn: Turn, result: ToolResult, key: str, repeats: int, span: SpanHandle
    ) -> str:
        """The result text plus the loop warning and the status reminder; plan change events."""
        variant = self.agent.variant
        content = result.content
        if variant.guards.loop_guard and repeats >= variant.guards.loop_warn_after:
            content += "\n" + prompts.LOOP_WARNING.format(
                count=repeats, limit=variant.guards.loop_stop_after
            )
            self._emit(turn, "loop_warning", f"{repeats} identical calls in a row: {key}")
        items = self.plan_items()
        if variant.plan.status_reminder and turn.planning and items:
            content += "\n" + status_line(items)
        attributes = {OUTPUT_VALUE: content}
        current = snapshot(items) if items or turn.plan_snapshot != "[]" else "[]"
        if current != turn.plan_snapshot:
            turn.plan_snapshot = current
            attributes[PLAN] = current
            self._emit(turn, "plan_updated", current)
        span.set(attributes)
        if result.status == "error":
            span.error(result.content)
        return content

    def _record(
        self,
        turn: Turn,
        call: ToolCall,
        status: Literal["ok", "error", "not_run"],
        content: str,
        arguments: str,
    ) -> None:
        turn.messages.append(
            ToolMessage(
                tool_call_id=call.id, name=call.name, content=content, is_error=status != "ok"
            )
        )
        turn.calls.append(
            ToolCallRecord(
                iteration=turn.iteration,
                id=call.id,
                name=call.name,
                arguments=arguments,
                status=status,
                content=content,
            )
        )

    def _skip(self, turn: Turn, calls: Sequence[ToolCall], why: str) -> None:
        """Answer calls the turn will not run, so that the history stays well formed."""
        for call in calls:
            message = f"Not run: the turn ended ({why})."
            self._record(turn, call, "not_run", message, _canonical_arguments(call))

    # -- finish and its gate ----------------------------------------------------------------

    def _finish_tool(self) -> Tool:
        @tool
        def finish(summary: str) -> str:
            """End the turn. Call it once every plan item is completed (or blocked with a reason).

            Args:
                summary: What was done, and what remains (the answer the user sees).
            """
            assert self._turn is not None, "finish called outside a turn"
            return self._on_finish(self._turn, summary)

        return finish

    def _on_finish(self, turn: Turn, summary: str) -> str:
        if self.harness_plan is not None and turn.planning and not turn.forcing:
            done = self.harness_plan.current()
            following = self.harness_plan.advance()
            if following is not None:
                finished_text = done.text if done else ""
                return (
                    f'Recorded "{finished_text}" as done. Next item: "{following.text}". '
                    "Do it, then call finish."
                )
        open_items = incomplete(self.plan_items()) if turn.planning else []
        if open_items and self.agent.variant.turn.finish_gate and not turn.forcing:
            if turn.bounces < self.agent.variant.turn.max_bounces:
                turn.bounces += 1
                listed = "\n".join(
                    f"{render_item(i, current=False)} ({i.status})" for i in open_items
                )
                self._emit(turn, "gate_bounce", listed)
                count = f"{len(open_items)} plan item{'s are' if len(open_items) > 1 else ' is'}"
                raise ToolRetry(
                    f"Cannot finish: {count} not completed:\n{listed}\n"
                    "Complete them and mark them completed, or mark them blocked with a reason, "
                    "then call finish again."
                )
            self._emit(turn, "gate_exhausted", f"finish accepted after {turn.bounces} bounces")
        turn.finished = True
        turn.answer = summary
        return "Turn finished."

    # -- helpers --------------------------------------------------------------------------

    def _offered(self, turn: Turn) -> list[Tool]:
        if turn.forcing:
            return [self._finish]
        tools = list(self._work_tools)
        if turn.planning:
            tools.extend(self._plan_tools)
        if self.agent.variant.turn.ending == "finish_tool":
            tools.append(self._finish)
        return tools

    def _context(self, turn: Turn) -> list[Message]:
        return prompts.build_context(
            turn.system, self._plan_message(turn), self.history, turn.messages
        )

    def _plan_message(self, turn: Turn) -> SystemMessage | None:
        variant = self.agent.variant
        if variant.plan.message != "pinned" or not turn.planning:
            return None
        if self.harness_plan is not None:
            return SystemMessage(content=self.harness_plan.message())
        return SystemMessage(content=render_plan(self.plan_items(), statuses=variant.plan.statuses))

    def _prompt(self, turn: Turn, kind: EventKind, text: str) -> None:
        turn.messages.append(UserMessage(content=text))
        self._emit(turn, kind, text)

    def _emit(self, turn: Turn, kind: EventKind, detail: str) -> None:
        turn.events.append(Event(kind=kind, iteration=turn.iteration, detail=detail))
        self.tracing.event(kind, {"plangate.iteration": turn.iteration, "plangate.detail": detail})

    def _result(self, turn: Turn, stop: Stop) -> TurnResult:
        return TurnResult(
            session_id=self.session_id,
            turn_index=turn.index,
            request=turn.request,
            stop_reason=stop.reason,
            stop_detail=stop.detail,
            answer=turn.answer,
            plan=self.plan_items(),
            tool_calls=tuple(turn.calls),
            iterations=turn.iteration,
            events=tuple(turn.events),
            messages=tuple(turn.messages),
            usage=turn.usage,
        )


def _canonical_arguments(call: ToolCall) -> str:
    try:
        return canonical_json(json.loads(call.arguments or "{}"))
    except json.JSONDecodeError:
        return call.arguments
