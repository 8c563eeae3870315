"""The turn loop: the steps of one turn, in order, each a helper; the base of `Session`.

The loop only orders the steps (limit → context → model → record → tools → decide); every
pattern is a guard (`_guards`), a tool, a context section or a `Feature` switched by the
`Variant`. A turn always ends with a `TurnResult` that keeps the partial trajectory and names
its stop reason. The session's state that the loop reads and changes is declared here and set
by `Session`; saving and loading it (`state`, `restore`, after every change with a store) is
here too.
"""

from __future__ import annotations

import functools
import json
import weakref
from collections.abc import Sequence
from typing import Any

from plangate.harness._call_runs import call_key, with_result
from plangate.harness._config import AgentConfig
from plangate.harness._context import system_prompt
from plangate.harness._errors import SessionError
from plangate.harness._guards import (
    Bounce,
    ForceFinish,
    Prompt,
    Repetition,
    finish_gate,
    iteration_guard,
    loop_guard,
    text_guard,
)
from plangate.harness._messages import (
    AssistantMessage,
    Message,
    ModelResponse,
    SystemMessage,
    ToolCall,
    ToolDefinition,
    UserMessage,
    canonical_arguments_text,
    canonical_json,
    message_from_dict,
    message_to_dict,
    parse_object,
)
from plangate.harness._spans import SpanHandle
from plangate.harness._state import STATE_VERSION, SessionState, session_state
from plangate.harness._store import Status
from plangate.harness._tools import Tool, ToolResult, ToolRetry, ToolSourceError, run_tool, tool
from plangate.harness._tracing import SessionTracing
from plangate.harness._trigger import needs_plan
from plangate.harness._turn import (
    CONTINUE,
    ERROR_STOP_REASONS,
    Continue,
    Event,
    EventKind,
    Outcome,
    Stop,
    Turn,
    TurnResult,
)
from plangate.harness._weak import alive
from plangate.harness.features import Feature
from plangate.harness.models import ModelError
from plangate.harness.plans import (
    HarnessPlan,
    Plan,
    PlanItem,
    incomplete,
    is_open,
    plan_message,
    plan_tools,
    snapshot,
    status_line,
)
from plangate.harness.semconv import DETAIL, ITERATION, ITERATIONS, OUTPUT_VALUE, PLAN, STOP_REASON


class TurnLoop:
    """The loop's steps over the session's state (which `Session` sets up)."""

    agent: AgentConfig
    session_id: str
    user_id: str
    metadata: dict[str, Any]
    history: list[Message]
    """The completed turns' messages."""
    turns: int
    """Turns completed."""
    plan: Plan | None
    tracing: SessionTracing
    features: list[Feature]
    _work_tools: list[Tool]
    _finish: Tool
    _turn: Turn | None
    """The turn in progress (cut short, or paused for approval)."""
    _proposal: list[dict[str, Any]] | None
    """The plan awaiting approval."""

    @functools.cached_property
    def _plan_tools(self) -> list[Tool]:
        """The tools the model plans with, made when a turn first plans (many never do)."""
        this = weakref.ref(self)
        return plan_tools(self.plan, self.agent.variant.plan, lambda s: alive(this)._propose(s))

    @property
    def status(self) -> Status:
        """`idle`, `running` (a turn was cut short) or `awaiting_approval`."""
        if self._turn is None:
            return "idle"
        return "awaiting_approval" if self._proposal is not None else "running"

    def plan_items(self) -> tuple[PlanItem, ...]:
        """The plan as it stands (empty without a plan)."""
        return self.plan.items() if self.plan is not None else ()

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
                    await feature.after_turn(
                        turn.result(self.session_id, self.plan_items(), outcome)
                    )
            self._emit(turn, "stop", f"{outcome.reason}: {outcome.detail}".rstrip(": "))
            span.set(
                {STOP_REASON: outcome.reason, ITERATIONS: turn.iteration, OUTPUT_VALUE: turn.answer}
            )
            if outcome.reason in ERROR_STOP_REASONS:
                span.error(outcome.detail)
        result = turn.result(self.session_id, self.plan_items(), outcome)
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
            content=system_prompt(
                self.agent.variant, self.agent.instructions, planning=turn.planning
            )
        )
        self._offer(turn)

    def _limit(self, turn: Turn) -> list[ToolDefinition] | Stop:
        """Iteration guard: the tools for the next call (after a warning or a forced finish)."""
        decision = iteration_guard(turn.iteration, self.agent.variant.turn)
        if isinstance(decision, Stop):
            return decision
        if isinstance(decision, ForceFinish):
            turn.forcing = True
            self._prompt(turn, "forced_finish", decision.text)
        elif decision is not None:
            self._prompt(turn, decision.kind, decision.text)
        self._offer(turn)  # features may add tools as the turn goes
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
        if response.finish_reason == "length":  # an answer cut short looks like a bad one
            self._emit(turn, "length_cutoff", f"model call {turn.iteration} hit its token limit")
        turn.usage = turn.usage + response.usage
        return response

    async def _run_calls(self, turn: Turn, calls: Sequence[ToolCall]) -> Outcome:
        for position, call in enumerate(calls):
            stop = await self._run_call(turn, call)
            if stop is None and self._proposal is not None:
                stop = Stop(reason="awaiting_approval", detail="create_plan waits for a reviewer")
            if stop is not None:
                turn.skip(calls[position + 1 :], stop.reason)
                return stop
            if turn.finished:
                turn.skip(calls[position + 1 :], "finished")
                return Stop(reason="forced_finish" if turn.forcing else "finished")
        return CONTINUE

    def _on_text(self, turn: Turn, message: AssistantMessage) -> Outcome:
        """A reply without tool calls: a nudge, a prompt to go on, or the end of the turn."""
        plan_open = is_open(self.plan_items())
        decision = text_guard(
            message.content, turn.offered, self.agent.variant, plan_open=plan_open
        )
        if isinstance(decision, Prompt):
            self._prompt(turn, decision.kind, decision.text)
            return CONTINUE
        turn.answer = message.content
        return decision

    async def _run_call(self, turn: Turn, call: ToolCall) -> Stop | None:
        parsed = parse_object(call.arguments)  # once: for the key here, for the tool below
        arguments = (
            canonical_json(parsed)
            if parsed is not None
            else canonical_arguments_text(call.arguments)
        )
        turn.keys.append(call_key(call.name, arguments))
        repeated = loop_guard(turn.keys, self.agent.variant.guards)
        if repeated is not None and repeated.stop:
            self._emit(turn, "loop_stop", repeated.detail)
            message = f"Not run: the loop guard stopped the turn ({repeated.detail})."
            turn.record(call, "error", message, arguments)
            return Stop(reason="loop_guard", detail=repeated.detail)
        found = turn.offered.get(call.name)
        schema = found.parameters if found is not None else None
        nests = found is not None and found.is_async  # delegate's subagent spans nest in it
        limit = self.agent.variant.tools.timeout
        with self.tracing.tool(turn.iteration, call, schema, nests=nests) as span:
            try:
                result = await run_tool(call, turn.offered, parsed, time_limit=limit)
            except ToolSourceError as exc:  # the tools' infrastructure, not the agent: an error
                span.error(str(exc))
                return self._tool_failed(turn, call, arguments, str(exc))
            content = self._annotate(turn, result, repeated, span)
        turn.record(call, result.status, content, arguments)
        if self.agent.variant.guards.loop_compare_results:  # what the tool returned, compared
            turn.keys[-1] = with_result(turn.keys[-1], result.content)
        self._save()
        return None

    def _tool_failed(self, turn: Turn, call: ToolCall, arguments: str, detail: str) -> Stop:
        self._emit(turn, "tool_error", detail)
        turn.record(call, "error", f"Not run: {detail}.", arguments)
        self._save()
        return Stop(reason="tool_error", detail=detail)

    def _annotate(
        self, turn: Turn, result: ToolResult, repeated: Repetition | None, span: SpanHandle
    ) -> str:
        """The result text as the model sees it; plan change events; span attributes."""
        variant = self.agent.variant
        content = result.content
        for feature in self.features:
            content = feature.on_result(turn, result.call, content)
        if repeated is not None:
            content += "\n" + repeated.warning
            self._emit(turn, "loop_warning", repeated.detail)
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

    @staticmethod
    def _finish_tool(this: weakref.ref[TurnLoop]) -> Tool:
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
            following = self.plan.finish()
            if following is not None:
                return following
        if turn.planning and not turn.forcing:
            settings = self.agent.variant.turn
            gate = finish_gate(
                incomplete(self.plan_items()), bounces=turn.bounces, settings=settings
            )
            if isinstance(gate, Bounce):
                turn.bounces += 1
                self._emit(turn, "gate_bounce", gate.items)
                raise ToolRetry(gate.text)
            if gate.exhausted:
                self._emit(turn, "gate_exhausted", gate.exhausted)
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

    def _offer(self, turn: Turn) -> None:
        """Offer the turn's tools on the coming calls; a forced finish offers only `finish`."""
        turn.offer([self._finish] if turn.forcing else self._offered(turn))

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
        return plan_message(self.plan, self.agent.variant.plan) if turn.planning else None

    def _prompt(self, turn: Turn, kind: EventKind, text: str) -> None:
        turn.messages.append(UserMessage(content=text))
        self._emit(turn, kind, text)

    def _emit(self, turn: Turn, kind: EventKind, detail: str) -> None:
        turn.events.append(Event(kind=kind, iteration=turn.iteration, detail=detail))
        self.tracing.event(kind, {ITERATION: turn.iteration, DETAIL: detail})

    def state(self) -> SessionState:
        """Everything needed to continue this session in another process."""
        return session_state(
            session_id=self.session_id,
            user_id=self.user_id,
            metadata=self.metadata,
            turns=self.turns,
            history=[message_to_dict(m) for m in self.history],
            plan=self.plan.to_dict() if self.plan is not None else None,
            turn=self._turn.to_dict() if self._turn is not None else None,
            proposal=self._proposal,
            features={f.name: f.state() for f in self.features},
        )

    def restore(self, state: SessionState | dict[str, Any]) -> None:
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
