"""The support desk both framework examples share: its tools, its state, and a task list.

Framework-free, so that only the framework glue differs between the two examples:

- The desk is plangate's support desk (`plangate.harness.domains.support`), a fresh copy per
  session. Its ten tools (`find_customer` ... `escalate`) keep their names, descriptions and
  JSON schemas when a framework wraps them.
- Its state is rebuilt, never stored: `Desk.for_turn(history)` starts from a fresh desk and runs
  again, in order, every desk call of the conversation before the turn. That history is what
  plangate hands every turn, recorded or replayed, so a refund made in turn 0 is still made in
  turn 1 and the same refund id comes back. The desk is deterministic (its "today" is fixed), so
  the rebuilt desk is the one the model saw, and the agent's `state` stays free.
- The task list, a variant setting: plangate's todo dialect (`todo_write`, `todo_update`,
  `todo_read`), one list per turn, rendered as a `# Plan` message that the agent pins right after
  the system prompt before every model call. A model that loses the request from its context
  (like `sim:forgetful`, which sees only the last six messages) still sees which tasks are open.

`Clients` keeps one OpenAI client per model endpoint across turns (plangate names the same
endpoint, a slot's route, turn after turn; a new client a turn costs a new connection pool).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from openai import AsyncOpenAI

from plangate.harness import Tool, ToolRetry, get_domain, render_result
from plangate.harness.plans import TodoList, render_plan, todo_tools
from plangate.replay.agents import TurnInput

DOMAIN = get_domain("support")
INSTRUCTIONS = DOMAIN.instructions
"""The support desk's system prompt (its policy: refund limits, escalation)."""
TASK_LIST_INSTRUCTIONS = (
    "When a request asks for two or more things, first write them as a todo list with "
    "todo_write. Then work through it: mark an item in_progress, do it, mark it completed (or "
    "blocked, with the reason). The current list is pinned after these instructions."
)
"""What the system prompt adds when the task list is on."""


def instructions(*, task_list: bool) -> str:
    """The system prompt of a variant."""
    return f"{INSTRUCTIONS}\n\n{TASK_LIST_INSTRUCTIONS}" if task_list else INSTRUCTIONS


@dataclass(slots=True)
class Desk:
    """One turn's view of a session's desk: its tools (and the task list's), by name."""

    tools: dict[str, Tool]
    """The tools the model is offered, by name: the desk's, then the task list's."""
    plan: TodoList | None
    """The turn's task list (None when the variant has none)."""

    @classmethod
    def for_turn(cls, history: Sequence[Mapping[str, Any]], *, task_list: bool) -> Desk:
        """A fresh desk with the history's desk calls run again; a new, empty task list."""
        desk = {t.name: t for t in DOMAIN.make_tools()}
        for name, arguments in desk_calls(history, desk):
            run_tool(desk[name], arguments)
        plan = TodoList() if task_list else None
        tools = dict(desk)
        if plan is not None:
            tools.update((t.name, t) for t in todo_tools(plan, show_plan=False))
        return cls(tools=tools, plan=plan)

    def call(self, name: str, arguments: str | Mapping[str, Any]) -> str:
        """Run one call; a mistake the model can fix comes back as the result's text."""
        found = self.tools.get(name)
        if found is None:
            return f"Unknown tool {name!r}. Available tools: {', '.join(self.tools)}."
        return run_tool(found, arguments)

    def pinned_plan(self) -> str | None:
        """The `# Plan` message to pin after the system prompt (None without a task list)."""
        return render_plan(self.plan.items()) if self.plan is not None else None


def desk_calls(
    history: Sequence[Mapping[str, Any]], desk: Mapping[str, Tool]
) -> Iterator[tuple[str, str]]:
    """The desk calls the assistant made in `history` (OpenAI chat messages), in order."""
    for message in history:
        if message.get("role") != "assistant":
            continue
        for call in message.get("tool_calls") or ():
            function = call.get("function") or {}
            if function.get("name") in desk:
                yield function["name"], function.get("arguments") or "{}"


def run_tool(found: Tool, arguments: str | Mapping[str, Any]) -> str:
    """Run `found` with the model's arguments; the text the model sees, errors included."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments or "{}")
        except json.JSONDecodeError as exc:
            return f"The arguments of {found.name!r} are not valid JSON ({exc.msg}). Call again."
    if not isinstance(arguments, Mapping) or not found.accepts(dict(arguments)):
        return f"Invalid arguments for {found.name!r}: follow its JSON schema and call again."
    try:
        return render_result(found.function(**arguments))
    except ToolRetry as exc:
        return str(exc)
    except Exception as exc:  # a tool bug is the model's to route around, as in plangate
        return f"Tool {found.name!r} failed: {type(exc).__name__}: {exc}. Try another way."


@dataclass(slots=True)
class Clients:
    """The OpenAI client of each model endpoint the turns name, made once, closed by `aclose`."""

    made: dict[tuple[str, str], AsyncOpenAI] = field(default_factory=dict)

    def of(self, turn: TurnInput) -> AsyncOpenAI:
        """The client for the endpoint and key `turn` names."""
        key = (turn.model_base_url, turn.model_api_key)
        if key not in self.made:
            self.made[key] = AsyncOpenAI(base_url=key[0], api_key=key[1])
        return self.made[key]

    async def aclose(self) -> None:
        """Close every client."""
        made, self.made = list(self.made.values()), {}
        for client in made:
            await client.close()
