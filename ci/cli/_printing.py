"""What several commands print: a turn's trajectory, and text cut to one short line."""

from __future__ import annotations

import json

from rich.console import Console

from plangate.ci.cli._stderr import say
from plangate.harness import TurnResult, infrastructure_failure

EXIT_INFRASTRUCTURE_FAILED = 2
"""A turn whose model or tools failed for good (`model_error`, `tool_error`): nothing the
agent did can be judged."""


class _Console(Console):
    def on_broken_pipe(self) -> None:  # rich's own exits 1, the code of a regression
        self.quiet = True
        raise BrokenPipeError  # the command ends quietly with 141, as `print` does


def terminal(width: int = 160) -> Console:
    """Rich's console for stdout: the terminal's width, or `width` columns in a log or a pipe.

    In a log or a pipe each row stays on one line. A reader that goes away (`| head`) ends the
    command with 141.
    """
    terminal = _Console()
    return terminal if terminal.is_terminal else _Console(width=width)


def report_turn(result: TurnResult, *, as_json: bool) -> int:
    """Print the turn as JSON or as its trajectory; return its exit code.

    0, or 2 with one line on stderr when the model or the tools failed (`model_error`,
    `tool_error`).
    """
    if as_json:
        print(json.dumps(result.to_dict(), ensure_ascii=False))
    else:
        print_trajectory(result)
    failure = infrastructure_failure(result.stop_reason, result.stop_detail)
    if failure is not None:
        say("error", failure)
        return EXIT_INFRASTRUCTURE_FAILED
    return 0


def print_trajectory(result: TurnResult) -> None:
    """A readable account of a turn: each call and its result, events, the plan, the stop."""
    print(f"request: {result.request}")
    for call in result.tool_calls:
        mark = {"ok": "→", "error": "✗", "not_run": "·"}[call.status]
        print(f"  {call.iteration:>2} {mark} {call.name} {short(call.arguments)}")
        print(f"       {short(call.content)}")
    for event in result.events:
        if event.kind not in ("plan_updated", "stop"):
            print(f"  [{event.kind} at call {event.iteration}] {short(event.detail)}")
    if result.plan:
        print("plan:")
        for item in result.plan:
            reason = f" ({item.reason})" if item.reason else ""
            print(f"  {item.status:11s} {item.id}. {item.text}{reason}")
    detail = f" ({result.stop_detail})" if result.stop_detail else ""
    print(f"stop: {result.stop_reason}{detail} after {result.iterations} model calls")
    if result.answer:
        print(f"answer: {result.answer}")


def short(text: str, limit: int = 110) -> str:
    """`text` on one line (whitespace runs made one space), cut to `limit` with an ellipsis."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
