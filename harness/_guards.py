"""The guards: what the harness does when a turn goes wrong, each a function that decides.

The loop asks each guard at its place and applies what it returns; a guard reads values (the
variant's settings, the turn's counts, a reply's text) and never changes the turn itself. What
the guards tell the model is here too.

- `iteration_guard`, before each model call: stop at the limit, force a finish on the last
  call (`ForceFinish`), warn a few calls before it (`Prompt`);
- `loop_guard`, before each tool call: stop a run of identical calls that got the same result
  back, or warn about it (a `Repetition`; the warning is added to the call's result);
  identical calls whose results changed are progress, never counted (the rule is
  `call_runs`', in `_call_runs`);
- `text_guard`, on a reply without tool calls: nudge a tool call written as text, prompt the
  model to go on when its reply does not end the turn, or end the turn;
- `finish_gate`, on `finish`: refuse it while plan items are open (`Bounce`), up to
  `max_bounces` times, else `Accept`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from plangate.harness._call_runs import split_result, trailing_run
from plangate.harness._turn import EventKind, Stop
from plangate.harness._variant import GuardSettings, TurnSettings, Variant
from plangate.harness.plans import PlanItem, render_item

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


@dataclass(frozen=True, slots=True, kw_only=True)
class Prompt:
    """Decision: tell the model `text` (a user message, also an event) and call it again."""

    kind: EventKind
    """The event it is recorded as (`nudge`, `continuation`, `iteration_warning`, …)."""
    text: str
    """What the model is told."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ForceFinish:
    """Decision: the coming model call is the turn's last; offer only `finish`, and say so."""

    text: str
    """What the model is told (a user message, also a `forced_finish` event)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Repetition:
    """A run of identical calls that the loop guard acts on."""

    detail: str
    """The evidence: how many identical calls in a row, and the call."""
    stop: bool
    """Stop the turn instead of running the call."""
    warning: str = ""
    """Added to the call's result when the turn goes on."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Bounce:
    """Decision: refuse `finish`; the model is told which plan items are still open."""

    items: str
    """The open items, one line each (the `gate_bounce` event's detail)."""
    text: str
    """What `finish` answers (an error result the model can act on)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Accept:
    """Decision: `finish` ends the turn."""

    exhausted: str = ""
    """Set when the gate accepted only because its bounces ran out (a `gate_exhausted` event)."""


ACCEPT = Accept()


def iteration_guard(iterations: int, settings: TurnSettings) -> Stop | ForceFinish | Prompt | None:
    """Before a model call, `iterations` made so far: stop, force a finish, warn, or nothing."""
    upcoming = iterations + 1
    if upcoming > settings.max_iterations:
        return Stop(reason="max_iterations", detail=f"{settings.max_iterations} model calls")
    left = settings.max_iterations - upcoming + 1
    if settings.forced_finish and left == 1 and settings.ending == "finish_tool":
        return ForceFinish(text=FORCED_FINISH)
    if settings.iteration_warning and left == settings.iteration_warning:
        return Prompt(kind="iteration_warning", text=ITERATION_WARNING.format(left=left))
    return None


def loop_guard(keys: Sequence[str], guards: GuardSettings) -> Repetition | None:
    """Before the last call of `keys` (the turn's call keys) runs: stop it, warn, or nothing.

    A key that carries its call's result (`with_result`) is compared by result too: the run
    that counts is the identical calls since the result last changed, this one included.
    """
    if not guards.loop_guard or not keys:
        return None
    calls, results = zip(*map(split_result, keys[-guards.loop_stop_after :]), strict=True)
    repeats = trailing_run(calls, results)
    stop = repeats >= guards.loop_stop_after
    if not stop and repeats < guards.loop_warn_after:
        return None
    same = " with the same result" if any(r is not None for r in results[-repeats:]) else ""
    detail = f"{repeats} identical calls in a row{same}: {calls[-1]}"
    if stop:
        return Repetition(detail=detail, stop=True)
    warning = LOOP_WARNING.format(count=repeats, limit=guards.loop_stop_after)
    return Repetition(detail=detail, stop=False, warning=warning)


def text_guard(
    text: str, tool_names: Iterable[str], variant: Variant, *, plan_open: bool
) -> Prompt | Stop:
    """A reply without tool calls: a nudge, a prompt to go on, or the end of the turn."""
    guards = variant.guards
    written = written_tool_call(text, tool_names) if guards.nudge else None
    if written is not None:
        return Prompt(kind="nudge", text=NUDGE.format(name=written))
    if variant.turn.ending == "finish_tool":
        return Prompt(kind="continuation", text=TEXT_REMINDER if text.strip() else CONTINUATION)
    if not text.strip() and guards.continuation and plan_open:
        return Prompt(kind="continuation", text=CONTINUATION)
    return Stop(reason="finished")


def finish_gate(
    open_items: Sequence[PlanItem], *, bounces: int, settings: TurnSettings
) -> Bounce | Accept:
    """`finish` with `open_items` left, after `bounces` refusals: refuse it again, or accept."""
    if not open_items or not settings.finish_gate:
        return ACCEPT
    if bounces >= settings.max_bounces:
        return Accept(exhausted=f"finish accepted after {bounces} bounces")
    listed = "\n".join(f"{render_item(i, current=False)} ({i.status})" for i in open_items)
    count = f"{len(open_items)} plan item{'s are' if len(open_items) > 1 else ' is'}"
    return Bounce(
        items=listed,
        text=(
            f"Cannot finish: {count} not completed:\n{listed}\n"
            "Complete them and mark them completed, or mark them blocked with a reason, "
            "then call finish again."
        ),
    )


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
