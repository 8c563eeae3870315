"""Deterministic simulated models that reproduce the failures planning agents are known for.

CI has no LLM. These models stand in for one: each reads only the context window the harness
sends (the request, the pinned plan message, plan tool results, gate bounces), works out which
tasks are asked for and which are done using the domain's task catalog, and acts like a
diligent agent, except for its one documented failure:

- `diligent`: follows the plan, does each task, marks it, finishes;
- `forgetful`: sees only the system prompt, a pinned plan message and the last few messages;
  when the request has scrolled out and no plan is visible, it believes it is done;
- `early-finisher`: does all the work but finishes before marking the last item;
- `looper`: gets stuck repeating one work call with identical arguments;
- `announcer`: says which tool it will call, then calls it on its next reply;
- `churner`: reads the plan before every work call (bookkeeping instead of work);
- `silent`: returns nothing once in the middle of the work;
- `flaky`: a seeded coin decides, per run, whether it behaves as `diligent` or as
  `early-finisher`: the same case passes under some seeds and fails under others.

A seed decides where the failure strikes (which call the looper sticks on, when the silent
model goes quiet, which calls are announced), so repeated runs vary as a real model's would.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeGuard, get_args

from plangate.harness._messages import (
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
from plangate.harness._turn import FINISH
from plangate.harness.domains import CallSpec, TaskSpec
from plangate.harness.plans import PLAN_HEADER, PLAN_TOOLS

Behaviour = Literal[
    "diligent", "forgetful", "early-finisher", "looper", "announcer", "churner", "silent", "flaky"
]
"""The simulated models."""

BEHAVIOURS: tuple[str, ...] = get_args(Behaviour)

_DEPENDENCY_STATUSES = frozenset({"pending", "in_progress", "completed", "blocked"})
NOT_WORK = PLAN_TOOLS | {FINISH}
"""Calls that do none of a task's work: plan bookkeeping and `finish`."""

_PLAN_LINE = re.compile(
    r"^\[(?P<mark>[x~ !])\] (?P<id>[\w-]+)\. (?P<text>.*?)"
    r"(?: ← CURRENT)?(?: \((?:blocked|failed): .*\))?(?: \((?:pending|in_progress)\))?$"
)
_STATUS_OF_MARK = {"x": "completed", "~": "in_progress", " ": "pending", "!": "blocked"}


@dataclass(frozen=True, slots=True, kw_only=True)
class SeenItem:
    """A plan item as the model read it from its context."""

    id: str
    status: str
    task: TaskSpec | None


@dataclass(frozen=True, slots=True, kw_only=True)
class Reading:
    """What a simulated model understands from the messages it can see."""

    requested: tuple[TaskSpec, ...]
    """Tasks named in the latest visible request, in order."""
    plan: tuple[SeenItem, ...] | None
    """The latest visible plan, or None when no plan is visible."""
    done: frozenset[str]
    """Keys of the calls visible as made since the request."""
    tools: frozenset[str]
    """Tools offered on this call."""
    last_call: ToolCall | None
    """The latest visible tool call."""
    last_text: str
    """Text of the latest visible assistant message without tool calls ('' if none)."""
    bounced: bool
    """A finish was refused and the refusal is visible."""
    wrote_plan: bool
    """A todo_write call is visible."""
    statuses: frozenset[str] = frozenset()
    """The statuses `todo_update` accepts, from its schema (empty without plan tools)."""


@dataclass(frozen=True, slots=True)
class Say:
    """Reply with text and no tool call."""

    text: str


Action = CallSpec | Say


def read_context(
    messages: Sequence[Message], tasks: Sequence[TaskSpec], tools: Sequence[ToolDefinition]
) -> Reading:
    """Understand a context window the way a model would: from its text alone."""
    start = _request_index(messages, tasks)
    requested = _tasks_in(messages[start].content, tasks) if start is not None else ()
    since = messages[start:] if start is not None else messages
    calls = [c for m in since if isinstance(m, AssistantMessage) for c in m.tool_calls]
    last_text = ""
    for message in reversed(messages):
        if isinstance(message, AssistantMessage):
            last_text = "" if message.tool_calls else message.content
            break
    return Reading(
        requested=requested,
        plan=_latest_plan(messages, tasks),
        done=frozenset(_key(c) for c in calls),
        tools=frozenset(t.name for t in tools),
        last_call=calls[-1] if calls else None,
        last_text=last_text,
        bounced=any(
            isinstance(m, ToolMessage) and m.content.startswith("Cannot finish") for m in since
        ),
        wrote_plan=_wrote_plan(since),
        statuses=_statuses(tools),
    )


def _wrote_plan(messages: Sequence[Message]) -> bool:
    """A plan was written and not rejected in review since."""
    wrote = False
    for message in messages:
        if isinstance(message, AssistantMessage):
            wrote = wrote or any(
                c.name in ("todo_write", "create_plan") for c in message.tool_calls
            )
        elif isinstance(message, UserMessage) and "rejected during review" in message.content:
            wrote = False
    return wrote


def _statuses(tools: Sequence[ToolDefinition]) -> frozenset[str]:
    if any(t.name == "start_step" for t in tools):
        return _DEPENDENCY_STATUSES
    for definition in tools:
        if definition.name == "todo_update":
            status = definition.parameters.get("properties", {}).get("status", {})
            return frozenset(status.get("enum", ()))
    return frozenset()


def diligent_action(reading: Reading) -> Action:
    """What a diligent agent does next, given what it can see."""
    can_plan = reading.tools & {"todo_write", "create_plan"}
    if can_plan and len(reading.requested) >= 2 and not reading.wrote_plan and _new_work(reading):
        return _write_plan(reading)
    if reading.plan is not None and (reading.tools & PLAN_TOOLS or FINISH in reading.tools):
        return _plan_step(reading)
    for task in reading.requested:
        call = _next_call(task, reading)
        if call is not None:
            return call
    return _conclude(reading)


def _new_work(reading: Reading) -> bool:
    """The request asks for tasks the visible plan does not hold (or there is no plan)."""
    planned = {item.task.key for item in reading.plan or () if item.task is not None}
    return not {task.key for task in reading.requested} <= planned


def _write_plan(reading: Reading) -> CallSpec:
    tasks = reading.requested
    if "todo_write" in reading.tools:
        todos = [{"content": task.title} for task in tasks]
        return CallSpec(name="todo_write", arguments={"todos": todos})
    steps = [
        {
            "name": task.key,
            "description": task.title,
            **({"depends_on": [tasks[i - 1].key]} if i else {}),
        }
        for i, task in enumerate(tasks)
    ]
    return CallSpec(name="create_plan", arguments={"steps": steps})


def _plan_step(reading: Reading) -> Action:
    plan = reading.plan or ()
    has_todo = bool(reading.tools & {"todo_update", "start_step"})
    active = next((i for i in plan if i.status == "in_progress"), None)
    if active is not None:
        return _work_on(active, reading, has_todo)
    pending = next((i for i in plan if i.status == "pending"), None)
    if pending is None or not has_todo:
        return _conclude(reading)
    if "in_progress" in reading.statuses:
        return _update(pending.id, "in_progress", None, reading)
    return _work_on(pending, reading, has_todo)


def _work_on(item: SeenItem, reading: Reading, has_todo: bool) -> Action:
    task = item.task
    call = _next_call(task, reading)
    if call is not None:
        return call
    if not has_todo:
        return _conclude(reading)
    if task is not None and task.blocked_reason and "blocked" in reading.statuses:
        return _update(item.id, "blocked", task.blocked_reason, reading)
    return _update(item.id, "completed", None, reading)


def _next_call(task: TaskSpec | None, reading: Reading) -> CallSpec | None:
    """The task's next call not yet made (a blocked task's calls too: say, an escalation)."""
    if task is None:
        return None
    return next((c for c in task.calls if c.key not in reading.done), None)


def _update(item_id: str, status: str, reason: str | None, reading: Reading) -> CallSpec:
    if "start_step" in reading.tools:
        return _step_update(item_id, status, reason)
    arguments: dict[str, Any] = {"item_id": int(item_id), "status": status}
    if reason:
        arguments["reason"] = reason
    return CallSpec(name="todo_update", arguments=arguments)


def _step_update(name: str, status: str, reason: str | None) -> CallSpec:
    if status == "in_progress":
        return CallSpec(name="start_step", arguments={"name": name})
    if status == "blocked":
        return CallSpec(name="mark_step_failed", arguments={"name": name, "reason": reason or ""})
    return CallSpec(name="mark_step_done", arguments={"name": name, "result": f"{name} is done"})


def _conclude(reading: Reading) -> Action:
    summary = _summary(reading)
    if FINISH in reading.tools:
        return CallSpec(name=FINISH, arguments={"summary": summary})
    return Say(summary)


def _summary(reading: Reading) -> str:
    tasks = [i.task for i in reading.plan or () if i.task] or list(reading.requested)
    done = [t.title for t in tasks if not t.blocked_reason]
    blocked = [f"{t.title} ({t.blocked_reason})" for t in tasks if t.blocked_reason]
    text = "Done: " + ("; ".join(done) if done else "the request") + "."
    if blocked:
        text += " Blocked: " + "; ".join(blocked) + "."
    return text


def is_last_completion(action: Action, reading: Reading) -> bool:
    """Whether `action` marks the only open plan item completed."""
    if not isinstance(action, CallSpec) or action.name not in ("todo_update", "mark_step_done"):
        return False
    if action.name == "todo_update" and action.arguments.get("status") != "completed":
        return False
    open_items = [i for i in reading.plan or () if i.status in ("pending", "in_progress")]
    return len(open_items) == 1


@dataclass(slots=True)
class SimulatedModel:
    """A seeded simulated model of one behaviour over a domain's task catalog."""

    behaviour: Behaviour
    """Which failure it reproduces (`diligent` reproduces none)."""
    tasks: Sequence[TaskSpec]
    """What it knows about the world: the tasks and the calls that do them."""
    seed: int = 0
    """Where the failure strikes."""
    window: int = 6
    """How many recent messages `forgetful` sees (three tool calls and their results)."""
    name: str = ""
    """Model name for traces (default `sim:<behaviour>`)."""
    calls: int = 0
    """Model calls answered so far."""
    ids_after: int = 0
    """Its tool-call ids start after this number: a model made for one replayed turn continues
    the session's numbering (`call_1`, `call_2`, … were the earlier turns'), as the recording's
    one model per session did. Some frameworks drop a call whose id they have seen before."""
    _rng: random.Random = field(init=False)
    _ids: int = field(init=False, default=0)
    _stuck_after: int = field(init=False)
    _silent_at: int = field(init=False)
    _slips: bool = field(init=False)

    def __post_init__(self) -> None:
        if self.behaviour not in BEHAVIOURS:
            raise ValueError(f"unknown behaviour {self.behaviour!r}; choose one of {BEHAVIOURS}")
        self.name = self.name or f"sim:{self.behaviour}"
        self._rng = random.Random(f"{self.behaviour}:{self.seed}")
        self._stuck_after = self._rng.randint(1, 2)
        self._silent_at = self._rng.randint(3, 5)
        self._slips = self._rng.random() < 0.5

    async def request(
        self, messages: Sequence[Message], tools: Sequence[ToolDefinition]
    ) -> ModelResponse:
        """Decide the next step from the visible context."""
        self.calls += 1
        if not tools:  # a side request (a checkpoint, a memory update): answer in text
            return self._respond(Say(_side_answer(messages, self.tasks)), messages)
        view = self._view(messages)
        reading = read_context(view, self.tasks, tools)
        action = self._behave(diligent_action(reading), reading)
        return self._respond(action, view)

    def _view(self, messages: Sequence[Message]) -> Sequence[Message]:
        if self.behaviour != "forgetful":
            return messages
        head = [messages[0]] if messages else []
        if len(messages) > 1 and isinstance(messages[1], SystemMessage):
            head.append(messages[1])
        tail = messages[len(head) :][-self.window :]
        return [*head, *tail]

    def _behave(self, action: Action, reading: Reading) -> Action:
        """Apply this model's failure to what a diligent agent would do."""
        twist = getattr(self, "_" + self.behaviour.replace("-", "_"), None)
        return twist(action, reading) if twist is not None else action

    def _silent(self, action: Action, reading: Reading) -> Action:
        return Say("") if self.calls == self._silent_at else action

    def _flaky(self, action: Action, reading: Reading) -> Action:
        return self._early_finisher(action, reading) if self._slips else action

    def _early_finisher(self, action: Action, reading: Reading) -> Action:
        if is_last_completion(action, reading) and not reading.bounced:
            return _conclude(reading)
        return action

    def _looper(self, action: Action, reading: Reading) -> Action:
        last = reading.last_call
        if last is None or last.name in NOT_WORK:
            return action
        made = sum(1 for key in reading.done if key.split(" ", 1)[0] not in NOT_WORK)
        if made >= self._stuck_after:
            return CallSpec(name=last.name, arguments=_arguments(last))
        return action

    def _announcer(self, action: Action, reading: Reading) -> Action:
        if not _is_work(action):
            return action
        announcement = f"Next I will use the {action.name} tool."
        if reading.last_text != announcement and self._announces():
            return Say(announcement)
        return action

    def _churner(self, action: Action, reading: Reading) -> Action:
        last = reading.last_call
        reader = next((t for t in ("todo_read", "get_plan") if t in reading.tools), None)
        if _is_work(action) and reader and (last is None or last.name != reader):
            return CallSpec(name=reader)
        return action

    def _announces(self) -> bool:
        return self._ids == 0 or self._rng.random() < 0.5

    def _respond(self, action: Action, view: Sequence[Message]) -> ModelResponse:
        prompt = sum(len(m.content) for m in view) // 4 + 1
        if isinstance(action, Say):
            message = AssistantMessage(content=action.text)
            return ModelResponse(
                message=message,
                usage=Usage(prompt_tokens=prompt, completion_tokens=len(action.text) // 4 + 1),
                model_name=self.name,
                finish_reason="stop",
            )
        self._ids += 1
        call = ToolCall(
            id=f"call_{self.ids_after + self._ids}",
            name=action.name,
            arguments=canonical_json(dict(action.arguments)),
        )
        return ModelResponse(
            message=AssistantMessage(tool_calls=(call,)),
            usage=Usage(prompt_tokens=prompt, completion_tokens=len(call.arguments) // 4 + 5),
            model_name=self.name,
            finish_reason="tool_calls",
        )


def _side_answer(messages: Sequence[Message], tasks: Sequence[TaskSpec]) -> str:
    """What a diligent model writes when asked for text with no tools: memory or checkpoint."""
    asked = messages[0].content if messages else ""
    if "NO_CHANGE" in asked:
        return "NO_CHANGE"
    text = "\n".join(m.content for m in messages[1:])
    named = [t.title for t in _tasks_in(text, tasks)]
    return "Checkpoint. Tasks asked for so far: " + ("; ".join(named) or "none recognized") + "."


def _is_work(action: Action) -> TypeGuard[CallSpec]:
    return isinstance(action, CallSpec) and action.name not in NOT_WORK


def _arguments(call: ToolCall) -> dict[str, Any]:
    try:
        value = json.loads(call.arguments or "{}")
    except (json.JSONDecodeError, RecursionError):
        return {}
    return value if isinstance(value, dict) else {}


def _key(call: ToolCall) -> str:
    return CallSpec(name=call.name, arguments=_arguments(call)).key


def _request_index(messages: Sequence[Message], tasks: Sequence[TaskSpec]) -> int | None:
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if isinstance(message, UserMessage) and _tasks_in(message.content, tasks):
            return index
    return None


def _tasks_in(text: str, tasks: Sequence[TaskSpec]) -> tuple[TaskSpec, ...]:
    lowered = text.lower()
    found: list[tuple[int, int, TaskSpec]] = []
    for order, task in enumerate(tasks):
        positions = [lowered.find(p) for p in task.phrases if p in lowered]
        if positions:
            found.append((min(positions), order, task))
    return tuple(task for _, _, task in sorted(found, key=lambda f: (f[0], f[1])))


def _latest_plan(
    messages: Sequence[Message], tasks: Sequence[TaskSpec]
) -> tuple[SeenItem, ...] | None:
    # A pinned plan message (right after the system prompt) is always current: trust it first.
    pinned = messages[1] if len(messages) > 1 else None
    if isinstance(pinned, SystemMessage) and pinned.content.startswith(PLAN_HEADER):
        return _parse_plan(pinned.content, tasks) or None
    for message in reversed(messages):
        text = message.content
        carries_plan = PLAN_HEADER in text or text.startswith("Cannot finish")
        if isinstance(message, ToolMessage) and carries_plan:
            return _parse_plan(text, tasks)
    return None


def _parse_plan(text: str, tasks: Sequence[TaskSpec]) -> tuple[SeenItem, ...]:
    items: list[SeenItem] = []
    for line in text.splitlines():
        match = _PLAN_LINE.match(line.strip())
        if match:
            found = _tasks_in(match.group("text"), tasks)
            items.append(
                SeenItem(
                    id=match.group("id"),
                    status=_STATUS_OF_MARK[match.group("mark")],
                    task=found[0] if found else None,
                )
            )
    return tuple(items)
