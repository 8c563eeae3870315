"""What the model is sent: the system prompt, the plan message, and the harness's own prompts.

The context of every model call is `[system] → [plan] → [session history] → [current turn]`;
the plan message is rebuilt from state on each call and is present only when the variant pins it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from plangate.harness._messages import Message, SystemMessage
from plangate.harness._variant import Variant

BASE_PROMPT = (
    "You are a careful assistant that completes every task the user asks for, using the tools "
    "provided. Call tools to do the work; do not invent results."
)

_PLAN_RULES = {
    "todo": (
        "When a request has two or more tasks, first write a todo list with todo_write, one item "
        "per task. Work on one item at a time: {start}mark it completed as soon as it is done, "
        "then move to the next.{blocked}"
    ),
    "harness": (
        "The harness keeps the plan and shows it to you. Do only the current item, then call "
        "finish; the harness will give you the next item."
    ),
}

_ENDINGS = {
    "finish_tool": (
        "The turn ends only when you call finish with a summary of what you did. Finishing while "
        "plan items are pending or in progress will be refused."
    ),
    "text": "When you are done, reply with your final answer and no tool call.",
}

NUDGE = (
    "You wrote a call to {name!r} as text, but text does not run a tool. Call the tool "
    "itself with its arguments."
)
CONTINUATION = (
    "You returned nothing, but the plan is still open. Continue with the current item, "
    "or call finish if everything is done."
)
TEXT_REMINDER = (
    "A reply without a tool call does not end the turn. Continue with the next tool call, "
    "or call finish with your answer if everything is done."
)
ITERATION_WARNING = (
    "Only {left} model calls remain in this turn. Complete the current item, mark what "
    "cannot be done as blocked with a reason, and call finish."
)
FORCED_FINISH = (
    "The iteration limit of this turn is reached. Call finish now with a summary of what "
    "was done and what remains."
)
LOOP_WARNING = (
    "[Loop guard: this is the same call with the same arguments {count} times in a row; "
    "the result will not change. Do something else, or call finish. The turn stops at "
    "{limit} identical calls.]"
)


def system_prompt(variant: Variant, instructions: str, *, planning: bool) -> str:
    """The system prompt for a variant, a domain's instructions, and whether planning is on."""
    parts = [BASE_PROMPT]
    if instructions:
        parts.append(instructions)
    dialect = variant.plan.dialect
    if planning and dialect in _PLAN_RULES:
        four = variant.plan.statuses == "four"
        parts.append(
            _PLAN_RULES[dialect].format(
                start="mark it in_progress when you start it, " if four else "",
                blocked=(
                    " If an item cannot be done without the user, mark it blocked with the reason."
                    if four
                    else ""
                ),
            )
        )
    parts.append(_ENDINGS[variant.turn.ending])
    return "\n\n".join(parts)


def build_context(
    system: SystemMessage,
    plan: SystemMessage | None,
    history: Sequence[Message],
    turn: Sequence[Message],
) -> list[Message]:
    """`[system] → [plan] → [history] → [current turn]`."""
    head: list[Message] = [system, plan] if plan is not None else [system]
    return [*head, *history, *turn]


def written_tool_call(text: str, tool_names: Iterable[str]) -> str | None:
    """The tool a text reply tries to call in prose (`name(...)` or a JSON `"name": "..."`)."""
    if not text:
        return None
    for name in tool_names:
        if re.search(rf"\b{re.escape(name)}\s*\(", text) or re.search(
            rf'"(?:name|tool|function)"\s*:\s*"{re.escape(name)}"', text
        ):
            return name
    return None
