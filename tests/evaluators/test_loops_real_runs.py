"""tool_call_loops on the reference agent's own traces: a scroll that moves on, one that is stuck.

The harness records what the model saw as a call's result: the tool's text plus the loop
guard's warning (which counts the repeats), the plan status reminder, or a numbered reference in
place of a long result. None of that may pass for progress.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from plangate.evaluators import evaluate
from plangate.harness import Agent, ScriptedModel, get_domain, load_variant
from plangate.replay import trace_table_provider
from tests.evaluators.test_real_runs import traced_agent
from tests.harness.test_progress import feed, scrolls
from tests.helpers import call

SHOWN = '\'scroll {"direction":"down"}\''


def loops(pages: list[str], count: int, variant: str = "alyx") -> dict[str, Any]:
    """tool_call_loops on a traced turn that scrolls `count` times through `pages`."""
    scroll, _ = feed(pages)
    provider, exporter = trace_table_provider()
    script = [*scrolls(count), call("finish", "f", summary="read")]
    model = ScriptedModel(script)
    agent = Agent(
        model=model,
        variant=load_variant(variant),
        tools=lambda: (scroll,),
        tracer_provider=provider,
    )
    result = asyncio.run(agent.session("feed").run_turn("Read the feed"))
    row = evaluate(exporter.table(), names=["tool_call_loops"]).to_pylist()[0]
    return row | {"details": json.loads(row["details"]), "stop_reason": result.stop_reason}


def test_a_traced_scroll_through_new_pages_passes_as_progress() -> None:
    found = loops([f"page {i}" for i in range(1, 7)], 6)
    assert (found["stop_reason"], found["outcome"], found["label"]) == ("finished", "pass", "ok")
    assert (
        f"6 identical calls to {SHOWN} from call 1 whose results changed each time: "
        "progress, not a loop"
    ) in found["explanation"]


@pytest.mark.parametrize("variant", ["alyx", "alyx-context"])
def test_a_traced_stuck_scroll_is_a_loop_despite_the_harness_notes(variant: str) -> None:
    # The fourth call's recorded output carries the guard's warning ("3 times", "4 times") and,
    # in alyx-context, each result is a new reference (ref-1, ref-2, …): still the same result.
    found = loops(["the end of the feed " * 40], 5, variant)
    assert (found["stop_reason"], found["outcome"], found["label"]) == (
        "loop_guard",
        "fail",
        "loop",
    )
    assert (
        f"{SHOWN} repeated 4 times in a row from call 1 of 4 with the same result"
        in (found["explanation"])
    )
    assert found["details"]["progress_calls"] == 0


def test_the_simulated_looper_is_still_a_loop_with_the_same_result() -> None:
    agent, exporter = traced_agent("looper", "alyx")
    asyncio.run(agent.session("looper").run_turn(get_domain("observability").demo_request))
    row = evaluate(exporter.table(), names=["tool_call_loops"]).to_pylist()[0]
    assert row["label"] == "loop"
    assert "4 times in a row" in row["explanation"]
    assert "with the same result" in row["explanation"]
