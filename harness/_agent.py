"""The reference planning agent: a small turn loop, and sessions that hold its state.

The loop only orders the steps (limit → context → model → record → tools → decide); every
pattern is a helper, a tool, a context section or a `Feature` switched by the `Variant`. A turn
always ends with a `TurnResult` that keeps the partial trajectory and names its stop reason.

With a `SessionStore`, the session is saved after every change (each model reply, each tool
call); a turn cut short by a crash, or paused for plan approval, resumes from there.
"""

from __future__ import annotations

import functools
import json
import uuid
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from opentelemetry.trace import TracerProvider

from plangate.harness import _context as prompts
from plangate.harness._dialects import make_plan, plan_tools
from plangate.harness._errors import PlangateError
from plangate.harness._feature_set import build_features
from plangate.harness._features import Feature, alive
from plangate.harness._harness_plan import HarnessPlan
from plangate.harness._loops import call_key, trailing_run
from plangate.harness._messages import (
    AssistantMessage,
    Message,
    ModelResponse,
    SystemMessage,
    ToolCall,
    ToolDefinition,
    ToolMessage,
    UserMessage,
    canonical_arguments_text,
    canonical_json,
    message_from_dict,
    message_to_dict,
    parse_object,
)
from plangate.harness._model import Model, ModelError
from plangate.harness._plan import (
    PlanItem,
    incomplete,
    is_open,
    render_item,
    render_plan,
    snapshot,
    status_line,
)
from plangate.harness._store import SessionStore, Status
from plangate.harness._tools import Tool, ToolResult, ToolRetry, run_tool, tool
from plangate.harness._tracing import (
    ITERATIONS,
    OUTPUT_VALUE,
    PLAN,
    STOP_REASON,
    MessageDetail,
    SessionTracing,
    SpanHandle,
)
from plangate.harness._trigger import needs_plan
from plangate.harness._turn import (
    CONTINUE,
    Continue,
    Event,
    EventKind,
    Outcome,
    Stop,
    ToolCallRecord,
    Turn,
    TurnResult,
)
from plangate.harness._variant import Variant

STATE_VERSION = 1
REJECTED = "Plan was rejected during review."


class SessionError(PlangateError):
    """A session cannot do what was asked in its state (e.g. resume a session that is idle)."""


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
    store: SessionStore | None = None
    """Where sessions are saved after every change (None: not saved)."""
    memory_dir: Path | None = None
    """Folder of the per-user memory files (with `context.memory`)."""
    skills: Sequence[Any] = ()
    """Skills the agent can load on demand (with `context.skills`)."""

    def session(
        self,
        session_id: str | None = None,
        *,
        user_id: str = "user",
        metadata: dict[str, Any] | None = None,
    ) -> Session:
        """A session: the saved one with this id when the store has it, else a new one."""
        session_id = session_id or f"session-{uuid.uuid4().hex[:12]}"
        session = Session(self, session_id, user_id, metadata or {})
        saved = self.store.load(session_id) if self.store is not None else None
        if saved is not None:
            session.restore(saved.state)
        return session


class Session:
    """One conversation: its history, its plan, its tools, its features and its spans."""

    def __init__(
        self, agent: Agent, session_id: str, user_id: str, metadata: dict[str, Any]
    ) -> None:
        self.agent = agent
        self.session_id = session_id
        self.user_id = user_id
        self.metadata = metadata
        self.history: list[Message] = []
        self.turns = 0
        self.plan = make_plan(agent.variant.plan)
        self._work_tools = list(agent.tools())
        # The session holds its tools, so they hold it weakly: a tool holding it back would keep
        # a dropped session and its messages alive until the garbage collector looks for cycles.
        this = weakref.ref(self)
        self._finish = self._finish_tool(this)
        self.tracing = SessionTracing(
            agent.tracer_provider,
            session_id=session_id,
            user_id=user_id,
            metadata={"variant": agent.variant.name, **metadata},
            messages=agent.trace_messages,
        )
        self.features: list[Feature] = build_features(self)
        self._turn: Turn | None = None
        self._proposal: list[dict[str, Any]] | None = None

    @functools.cached_property
    def _plan_tools(self) -> list[Tool]:
        """The tools the model plans with, made when a turn first plans (many never do)."""
        this = weakref.ref(self)
        return plan_tools(self.plan, self.agent.variant.plan, lambda s: alive(this)._propose(s))

    # -- public API -------------------------------------------------------------------------

    @property
    def status(self) -> Status:
        """`idle`, `running` (a turn was cut short) or `awaiting_approval`."""
        if self._turn is None:
            return "idle"
        return "awaiting_approval" if self._proposal is not None else "running"

    @property
    def work_tools(self) -> tuple[Tool, ...]:
        """The session's work tools (its workspace), without plan and control tools."""
        return tuple(self._work_tools)

    def emit(self, kind: EventKind, detail: str) -> None:
        """Record an event of the running turn (for features); ignored between turns."""
        if self._turn is not None:
            self._emit(self._turn, kind, detail)

    async def side_request(self, messages: Sequence[Message]) -> ModelResponse:
        """A model call outside the turn's loop (a checkpoint, a memory update), with no tools.

        Traced as an LLM span with iteration 0; a `ModelError` marks the span and propagates.
        """
        model = self.agent.model
        with self.tracing.llm(0, messages, (), model.name) as span:
            try:
                response = await model.request(messages, ())
            except ModelError as exc:
                span.error(str(exc))
                raise
            self.tracing.record_response(span, response)
        return response

    def plan_items(self) -> tuple[PlanItem, ...]:
        """The plan as it stands (empty without a plan)."""
        return self.plan.items() if self.plan is not None else ()

    def proposed_plan(self) -> list[dict[str, Any]] | None:
        """The plan awaiting approval, as the model wrote it (None when nothing waits)."""
        return self._proposal

    async def run_turn(self, request: str) -> TurnResult:
        """Run one turn of the conversation to its end (or to a pause) and return it."""
        if self._turn is not None:
            raise SessionError(
                f"session {self.session_id!r} has a turn {self.status.replace('_', ' ')}; "
                "resume it (or approve / reject its plan) before starting another"
            )
        return await self._drive(request, None)

    async def resume(self) -> TurnResult:
        """Continue a turn that a crash cut short, from its last saved state."""
        if self.status != "running":
            raise SessionError(f"session {self.session_id!r} has nothing to resume ({self.status})")
        turn = self._turn
        assert turn is not None
        return await self._drive(turn.request, turn)

    async def approve(self, steps: list[dict[str, Any]] | None = None) -> TurnResult:
        """Approve the proposed plan (or a modified one, checked again) and continue the turn."""
        turn = self._awaiting()
        assert self.plan is not None and self._proposal is not None
        modified = steps is not None
        try:
            warnings = self.plan.create(steps if steps is not None else self._proposal)  # type: ignore[union-attr]
        except ToolRetry as exc:
            raise SessionError(f"the modified plan is not valid: {exc}") from exc
        self._proposal = None
        note = " with changes" if modified else ""
        text = f"The reviewer approved the plan{note}.\n{render_plan(self.plan_items())}"
        if warnings:
            text += "\n" + "\n".join(warnings)
        self._prompt(turn, "plan_approved", text)
        return await self._drive(turn.request, turn)

    async def reject(self, reason: str = "") -> TurnResult:
        """Reject the proposed plan; the model is told so and must plan again."""
        turn = self._awaiting()
        self._proposal = None
        self._prompt(turn, "plan_rejected", f"{REJECTED} {reason}".strip())
        return await self._drive(turn.request, turn)

    # -- the loop -------------------------------------------------------------------------

    async def _drive(self, request: str, turn: Turn | None) -> TurnResult:
        index = turn.index if turn is not None else self.turns
        with self.tracing.turn(index, request, self.agent.name) as span:
            if turn is None:
                turn = self._start(request)
            else:
                self._rebuild(turn)
                self._emit(turn, "resumed", f"at model call {turn.iteration}")
            outcome: Outcome = CONTINUE
            while isinstance(outcome, Continue):
                outcome = await self._iterate(turn)
            if outcome.reason != "awaiting_approval":
                for feature in self.features:  # inside the turn's span: their spans nest in it
                    await feature.after_turn(self._result(turn, outcome))
            self._emit(turn, "stop", f"{outcome.reason}: {outcome.detail}".rstrip(": "))
            span.set(
                {STOP_REASON: outcome.reason, ITERATIONS: turn.iteration, OUTPUT_VALUE: turn.answer}
            )
            if outcome.reason == "model_error":
                span.error(outcome.detail)
        result = self._result(turn, outcome)
        if outcome.reason != "awaiting_approval":
            self.history.extend(turn.messages)
            self._turn = None
            self.turns += 1
        self._save()
        return result

    async def _iterate(self, turn: Turn) -> Outcome:
        tools = self._limit(turn)
        if isinstance(tools, Stop):
            return tools
        for feature in self.features:
            await feature.before_model(turn)
        response = await self._call_model(turn, tools)
        if isinstance(response, Stop):
            return response
        turn.messages.append(response.message)
        self._save()
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
        if planning and isinstance(self.plan, HarnessPlan):
            self.plan.start(request)
            turn.plan_snapshot = snapshot(self.plan_items())
            self.tracing.plan_change(0, turn.plan_snapshot, "the harness planned the request")
            self._emit(turn, "plan_updated", turn.plan_snapshot)
        self._rebuild(turn)
        self._save()
        return turn

    def _rebuild(self, turn: Turn) -> None:
        """What a turn derives from configuration: its system prompt and the tools it offers."""
        turn.system = SystemMessage(
            content=prompts.system_prompt(
                self.agent.variant, self.agent.instructions, planning=turn.planning
            )
        )
        self._offer(turn, [self._finish] if turn.forcing else self._offered(turn))

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
        if not turn.forcing:
            self._offer(turn, self._offered(turn))  # features may add tools as the turn goes
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
            if stop is None and self._proposal is not None:
                stop = Stop(reason="awaiting_approval", detail="create_plan waits for a reviewer")
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
        parsed = parse_object(call.arguments)  # once: for the key here, for the tool below
        arguments = (
            canonical_json(parsed)
            if parsed is not None
            else canonical_arguments_text(call.arguments)
        )
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
        nests = found is not None and found.is_async  # delegate's subagent spans nest in it
        with self.tracing.tool(turn.iteration, call, schema, nests=nests) as span:
            result = await run_tool(call, turn.offered, parsed)
            content = self._annotate(turn, result, key, repeats, span)
        self._record(turn, call, result.status, content, arguments)
        self._save()
        return None

    def _annotate(
        self, turn: Turn, result: ToolResult, key: str, repeats: int, span: SpanHandle
    ) -> str:
        """The result text as the model sees it; plan change events; span attributes."""
        variant = self.agent.variant
        content = result.content
        for feature in self.features:
            content = feature.on_result(turn, result.call, content)
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
            self._record(turn, call, "not_run", message, canonical_arguments_text(call.arguments))

    # -- finish, its gate, and plan approval --------------------------------------------------

    @staticmethod
    def _finish_tool(this: weakref.ref[Session]) -> Tool:
        @tool
        def finish(summary: str) -> str:
            """End the turn. Call it once every plan item is completed (or blocked with a reason).

            Args:
                summary: What was done, and what remains (the answer the user sees).
            """
            session = alive(this)
            assert session._turn is not None, "finish called outside a turn"
            return session._on_finish(session._turn, summary)

        return finish

    def _on_finish(self, turn: Turn, summary: str) -> str:
        if isinstance(self.plan, HarnessPlan) and turn.planning and not turn.forcing:
            done = self.plan.current()
            following = self.plan.advance()
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

    def _propose(self, steps: list[dict[str, Any]]) -> str:
        """`create_plan` under approval: keep the (valid) plan for a reviewer and pause."""
        self._proposal = steps
        assert self._turn is not None
        self._emit(self._turn, "plan_proposed", json.dumps(steps, ensure_ascii=False))
        return (
            f"Plan submitted for review ({len(steps)} steps). The run pauses until a person "
            "approves, edits or rejects it."
        )

    def _awaiting(self) -> Turn:
        if self.status != "awaiting_approval" or self._turn is None:
            raise SessionError(f"session {self.session_id!r} has no plan awaiting approval")
        return self._turn

    # -- helpers --------------------------------------------------------------------------

    def _offered(self, turn: Turn) -> list[Tool]:
        tools = list(self._work_tools)
        if turn.planning:
            tools.extend(self._plan_tools)
        for feature in self.features:
            tools.extend(feature.tools(turn))
        if self.agent.variant.turn.ending == "finish_tool":
            tools.append(self._finish)
        return tools

    def _context(self, turn: Turn) -> list[Message]:
        history: Sequence[Message] = self.history
        extra: list[SystemMessage] = []
        for feature in self.features:
            history = feature.history(history)
            extra.extend(feature.context(turn))
        plan = self._plan_message(turn)
        head = [plan, *extra] if plan is not None else extra
        return [turn.system, *head, *history, *turn.messages]

    def _plan_message(self, turn: Turn) -> SystemMessage | None:
        variant = self.agent.variant
        if variant.plan.message != "pinned" or not turn.planning:
            return None
        if isinstance(self.plan, HarnessPlan):
            return SystemMessage(content=self.plan.message())
        dialect: Literal["todo", "dependency"] = (
            "dependency" if variant.plan.dialect == "dependency" else "todo"
        )
        text = render_plan(self.plan_items(), statuses=variant.plan.statuses, dialect=dialect)
        return SystemMessage(content=text)

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

    # -- saving and restoring -----------------------------------------------------------------

    def state(self) -> dict[str, Any]:
        """Everything needed to continue this session in another process."""
        return {
            "version": STATE_VERSION,
            "session_id": self.session_id,
            "user_id": self.user_id,
            "metadata": self.metadata,
            "turns": self.turns,
            "history": [message_to_dict(m) for m in self.history],
            "plan": self.plan.to_dict() if self.plan is not None else None,
            "turn": self._turn.to_dict() if self._turn is not None else None,
            "proposal": self._proposal,
            "features": {f.name: f.state() for f in self.features},
        }

    def restore(self, state: dict[str, Any]) -> None:
        """Load a state saved by `state()`."""
        if state.get("version") != STATE_VERSION:
            raise SessionError(f"saved session {self.session_id!r} has an unknown state version")
        self.turns = state["turns"]
        self.history = [message_from_dict(m) for m in state["history"]]
        if self.plan is not None and state["plan"] is not None:
            self.plan.restore(state["plan"])
        self._turn = Turn.from_dict(state["turn"]) if state["turn"] is not None else None
        self._proposal = state.get("proposal")
        for feature in self.features:
            feature.restore(state["features"].get(feature.name, {}))

    def _save(self) -> None:
        store = self.agent.store
        if store is not None:
            store.save(
                self.session_id,
                self.status,
                self.state(),
                variant=self.agent.variant.name,
                user_id=self.user_id,
            )
