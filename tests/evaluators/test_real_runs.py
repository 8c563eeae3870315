"""Evaluators on real runs of the reference agent: they see what the demo matrix shows."""

from __future__ import annotations

import asyncio

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from plangate.evaluators import Rubric, RubricSet, ToolExpectation, evaluate
from plangate.harness import Agent, SimulatedModel, get_domain, load_variant
from plangate.replay import TraceTableExporter, trace_table_provider


def traced_agent(
    behaviour: str, variant: str, domain_name: str = "observability"
) -> tuple[Agent, TraceTableExporter]:
    """The reference agent on a simulated model, its spans kept as a trace table."""
    domain = get_domain(domain_name)
    provider, exporter = trace_table_provider()
    agent = Agent(
        model=SimulatedModel(behaviour, domain.tasks),  # type: ignore[arg-type]
        variant=load_variant(variant),
        tools=domain.make_tools,
        instructions=domain.instructions,
        tracer_provider=provider,
    )
    return agent, exporter


def run(
    behaviour: str, variant: str, domain_name: str = "observability"
) -> tuple[dict[str, dict[str, object]], RubricSet]:
    domain = get_domain(domain_name)
    agent, exporter = traced_agent(behaviour, variant, domain_name)
    asyncio.run(agent.session(f"{behaviour}-{variant}").run_turn(domain.demo_request))
    request = domain.demo_request.lower()
    expected = [c for t in domain.tasks if any(p in request for p in t.phrases) for c in t.calls]
    rubric = Rubric(
        required_tools=tuple(
            ToolExpectation(name=c.name, arguments=dict(c.arguments), match="exact")
            for c in expected
        )
    )
    rubrics = RubricSet(default=rubric)
    scores = evaluate(exporter.table(), rubrics)
    return {r["evaluator"]: r for r in scores.to_pylist()}, rubrics


@pytest.mark.parametrize("variant", ["alyx", "harness-plan"])
def test_diligent_passes_everything(variant: str) -> None:
    scores, _ = run("diligent", variant)
    for name in ("task_completion", "plan_adherence", "tool_call_loops", "trajectory_match"):
        assert scores[name]["passed"], (name, scores[name]["explanation"])


def test_forgetful_naive_fails_task_completion_with_the_missing_calls() -> None:
    scores, _ = run("forgetful", "naive")
    completion = scores["task_completion"]
    assert not completion["passed"]
    explanation = str(completion["explanation"])
    assert (
        'required call aggregate_latency({"group_by": "name", "percentile": 95}) was never made'
        in explanation
    )
    assert "find_bottlenecks" not in explanation  # it did start the second task before forgetting


def test_looper_is_a_loop_and_early_finisher_without_gate_leaves_an_item_open() -> None:
    looper, _ = run("looper", "alyx")
    assert looper["tool_call_loops"]["label"] == "loop"
    assert looper["task_completion"]["explanation"].startswith("stopped by loop_guard")  # type: ignore[union-attr]
    early, _ = run("early-finisher", "todo-basic")
    assert not early["task_completion"]["passed"]
    assert "1 plan item(s) left open" in str(early["task_completion"]["explanation"])


def test_churner_is_flagged_for_bookkeeping() -> None:
    scores, _ = run("churner", "alyx")
    assert scores["plan_adherence"]["label"] == "bookkeeping"
    assert scores["task_completion"]["passed"]


def test_a_turn_approved_in_a_second_trace_is_judged_and_two_runs_of_one_turn_are_not() -> None:
    """An approved plan goes on in a new trace; a second run under the same key is an error."""
    agent, exporter = traced_agent("diligent", "flux-review")
    session = agent.session("reviewed")

    async def propose_then_approve() -> None:
        await session.run_turn(get_domain("observability").demo_request)
        await session.approve()

    asyncio.run(propose_then_approve())
    table = exporter.table()
    agents = table.filter(pc.equal(table["span_kind"], "AGENT"))
    assert agents["stop_reason"].to_pylist() == ["awaiting_approval", "finished"]
    assert len(set(agents["trace_id"].to_pylist())) == 2  # one turn, two traces
    once = evaluate(table)
    assert "error" not in once["outcome"].to_pylist()

    again = table  # the same run under new ids: as if imported twice
    for column in ("trace_id", "span_id", "parent_span_id"):
        renamed = pc.binary_join_element_wise(table[column], "-again", "")
        again = again.set_column(again.schema.get_field_index(column), column, renamed)
    twice = evaluate(pa.concat_tables([table, again.cast(table.schema)]))
    assert set(twice["outcome"].to_pylist()) == {"error"}
    said = twice["explanation"][0].as_py()
    assert said.startswith("not judged: the turn holds 2 runs, each ending it (AGENT spans of ")
