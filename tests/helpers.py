"""Shared builders for tests."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from plangate.harness import (
    Agent,
    Model,
    ScriptedModel,
    Tool,
    ToolCall,
    TurnResult,
    load_variant,
    tool,
)


@tool
def add(a: int, b: int) -> int:
    """Add two whole numbers.

    Args:
        a: The first number.
        b: The second number.
    """
    return a + b


@tool
def explode(reason: str) -> str:
    """A tool that always fails with a bug (to test that tool exceptions never end the run).

    Args:
        reason: What to say in the exception.
    """
    raise RuntimeError(reason)


WORK_TOOLS: tuple[Tool, ...] = (add, explode)


def call(name: str, call_id: str | None = None, /, **arguments: Any) -> ToolCall:
    """A tool call with canonical JSON arguments."""
    return ToolCall.of(name, call_id, **arguments)


def agent(
    model: Model, variant: str = "alyx", tools: Sequence[Tool] = WORK_TOOLS, **kw: Any
) -> Agent:
    """An agent over the test tools with a shipped variant."""
    return Agent(model=model, variant=load_variant(variant), tools=lambda: tools, **kw)


async def run(
    script: Sequence[Any], request: str, variant: str = "alyx", **kw: Any
) -> tuple[TurnResult, ScriptedModel]:
    """Run one turn on a scripted model; checks that the script was used up."""
    model = ScriptedModel(list(script))
    result = await agent(model, variant, **kw).session("test-session").run_turn(request)
    model.assert_complete()
    return result, model


def turn_rows(
    session: str,
    turn: int = 0,
    calls: Sequence[tuple[str, dict[str, Any]] | tuple[str, dict[str, Any], str]] = (),
    *,
    stop_reason: str | None = "finished",
    answer: str | None = "done",
    plans: dict[int, list[dict[str, Any]]] | None = None,
    reward: float | None = None,
    task_id: str | None = None,
    trial: int | None = None,
    start: float | None = 0.0,
    call_seconds: float = 1.0,
    source: str = "test",
) -> list[dict[str, Any]]:
    """Trace-table rows of one turn: an AGENT span, then per call an LLM span and a TOOL span.

    `calls` are (tool, arguments) or (tool, arguments, status); `plans` maps a call position to
    the plan snapshot after that call. With `start=None` the rows have no timestamps.
    """
    from datetime import UTC, datetime, timedelta

    from plangate.replay import canonical_arguments

    def at(offset: float) -> datetime | None:
        return (
            None
            if start is None
            else datetime(2026, 1, 1, tzinfo=UTC) + timedelta(seconds=start + offset)
        )

    trace = f"{session}-{turn}"
    root = f"{trace}-agent"
    total = len(calls) * call_seconds * 2 + 1
    rows: list[dict[str, Any]] = [
        {
            "session_id": session, "turn_index": turn, "trace_id": trace, "span_id": root,
            "span_kind": "AGENT", "name": "agent.turn", "status_code": "OK", "source": source,
            "start_time": at(0), "end_time": at(total), "stop_reason": stop_reason,
            "output_value": answer, "reward": reward, "task_id": task_id, "trial": trial,
        }
    ]  # fmt: skip
    for position, spec in enumerate(calls):
        name, arguments = spec[0], spec[1]
        status = spec[2] if len(spec) > 2 else "OK"  # type: ignore[misc]
        begin = 0.5 + position * call_seconds * 2
        rows.append(
            {
                "session_id": session, "turn_index": turn, "trace_id": trace,
                "span_id": f"{trace}-llm-{position}", "parent_span_id": root, "span_kind": "LLM",
                "name": "llm.call", "status_code": "OK", "source": source, "iteration": position + 1,
                "start_time": at(begin), "end_time": at(begin + call_seconds),
                "tokens_prompt": 100, "tokens_completion": 10, "model_name": "m",
            }
        )  # fmt: skip
        rows.append(
            {
                "session_id": session, "turn_index": turn, "trace_id": trace,
                "span_id": f"{trace}-tool-{position}", "parent_span_id": root, "span_kind": "TOOL",
                "name": f"tool.{name}", "status_code": status, "source": source,
                "iteration": position + 1, "tool_name": name, "tool_call_id": f"c{position}",
                "tool_args": canonical_arguments(arguments), "tool_output": "ok",
                "start_time": at(begin + call_seconds), "end_time": at(begin + 2 * call_seconds),
                "plan": json.dumps((plans or {})[position]) if position in (plans or {}) else None,
            }
        )  # fmt: skip
    return rows


def plangate(
    *args: str, cwd: Path | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """Run the real `plangate` command line in a child process."""
    return subprocess.run(
        [sys.executable, "-m", "plangate", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        check=False,
    )


def readme_agent(folder: Path) -> Path:
    """README's "Gate your own agent" script, written to `folder` (so the walk-through stays true)."""
    import re

    text = (Path(__file__).parent.parent / "README.md").read_text(encoding="utf-8")
    section = text[text.index("## Gate your own agent") :]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert code is not None, "README's walk-through has no python block"
    path = folder / "support_agent.py"
    path.write_text(code.group(1), encoding="utf-8")
    return path
