"""The system prompt: the base rules, the domain's instructions, the plan rules, the ending.

The loop (`TurnLoop._context`) puts the context of every model call together as
`[system] → [plan] → [features' messages] → [session history] → [current turn]`; the plan
message (`plans.plan_message`) is rebuilt from state on each call and is present only when the
variant pins it. What the guards tell the model is in `_guards`.
"""

from __future__ import annotations

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
