"""latency on hand-built turns, the dataset summary and ratios, invariants, and real runs."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from plangate.evaluators import Rubric, RubricSet, evaluate
from plangate.evaluators._latency import latency_ratios, latency_summary, ratio_p50, ratio_p95
from plangate.harness import Agent, SimulatedModel, get_domain, load_variant
from plangate.replay import build_table
from plangate.replay._exporter import trace_table_provider

T0 = datetime(2026, 1, 1, tzinfo=UTC)
Span = tuple[str, float | None, float | None, int | None]
"""(kind, start, end, prompt tokens): seconds from the turn's start; tokens on LLM spans."""


def rows(spans: list[Span], session: str = "s", turn: int = 0) -> list[dict[str, Any]]:
    """One turn from (kind, start, end, tokens) spans; completion tokens are a tenth."""

    def at(seconds: float | None) -> datetime | None:
        return None if seconds is None else T0 + timedelta(seconds=seconds)

    out = []
    for n, (kind, start, end, tokens) in enumerate(spans):
        out.append(
            {"session_id": session, "turn_index": turn, "trace_id": f"{session}-{turn}",
             "span_id": f"{kind}-{n}", "span_kind": kind, "name": kind.lower(),
             "status_code": "OK", "source": "test", "start_time": at(start), "end_time": at(end),
             "tool_name": "search" if kind == "TOOL" else None,
             "tokens_prompt": tokens, "tokens_completion": None if tokens is None else tokens // 10}
        )  # fmt: skip
    return out


TURN: list[Span] = [
    ("AGENT", 0.0, 10.0, None),
    ("LLM", 0.5, 3.5, 1000),
    ("TOOL", 3.5, 5.5, None),
    ("LLM", 6.0, 9.0, 2000),
]
NO_AGENT: list[Span] = TURN[1:]
UNTIMED: list[Span] = [(kind, None, None, tokens) for kind, _, _, tokens in TURN]
PARALLEL: list[Span] = [
    ("AGENT", 0.0, 4.0, None),
    ("LLM", 0.0, 1.0, None),
    ("TOOL", 1.0, 4.0, None),
    ("TOOL", 1.0, 4.0, None),
]

CASES: list[tuple[str, list[Span], Rubric | None, tuple[float | None, bool | None, str, str]]] = [
    (
        "split into model, tool and harness time",
        TURN,
        None,
        (
            10.0,
            None,
            "no budget",
            "wall 10.00 s (agent span) = model 6.00 s + tools 2.00 s + harness 2.00 s; "
            "2 iterations, 1 tool call, 3,000 prompt + 300 completion tokens",
        ),
    ),
    (
        "without an agent span: first start to last end",
        NO_AGENT,
        None,
        (
            8.5,
            None,
            "no budget",
            "wall 8.50 s (spans) = model 6.00 s + tools 2.00 s + harness 0.50 s",
        ),
    ),
    (
        "within budget",
        TURN,
        Rubric(max_seconds=30, max_iterations=2),
        (10.0, True, "within budget", "within 30 s and 2 iterations"),
    ),
    (
        "over the time budget",
        TURN,
        Rubric(max_seconds=5),
        (10.0, False, "over budget", "10.00 s is over the budget of 5 s"),
    ),
    (
        "over the iteration budget",
        TURN,
        Rubric(max_iterations=1),
        (10.0, False, "over budget", "2 iterations are over the budget of 1"),
    ),
    (
        "no timestamps",
        UNTIMED,
        Rubric(max_seconds=5),
        (None, None, "no timing", "no timestamps in the source; 2 iterations"),
    ),
    (
        "no timestamps, but the iteration budget still holds",
        UNTIMED,
        Rubric(max_iterations=1),
        (None, False, "over budget", "2 iterations are over the budget of 1"),
    ),
    (
        "parallel tool calls: harness time is not negative",
        PARALLEL,
        None,
        (4.0, None, "no budget", "harness 0.00 s; 1 iteration, 2 tool calls, no token counts"),
    ),
    (
        "only the agent span is timed: the wall time is not split",
        [TURN[0], *UNTIMED[1:]],
        None,
        (
            10.0,
            None,
            "no budget",
            "wall 10.00 s (agent span); the model and tool spans have no timestamps",
        ),
    ),
    (
        "a turn of only an agent span",
        [("AGENT", 0.0, 1.0, None)],
        None,
        (1.0, None, "no budget", "= model 0.00 s + tools 0.00 s + harness 1.00 s; 0 iterations"),
    ),
]


@pytest.mark.parametrize(("case", "spans", "rubric", "expected"), CASES, ids=[c[0] for c in CASES])
def test_latency(
    case: str,
    spans: list[Span],
    rubric: Rubric | None,
    expected: tuple[float | None, bool, str, str],
) -> None:
    score, passed, label, fragment = expected
    row = evaluate(
        build_table(rows(spans)), RubricSet(default=rubric), names=["latency"]
    ).to_pylist()[0]
    assert (row["score"], row["passed"], row["label"]) == (score, passed, label), row["explanation"]
    assert fragment in row["explanation"]


def test_details_hold_every_number() -> None:
    row = evaluate(build_table(rows(TURN)), names=["latency"]).to_pylist()[0]
    assert json.loads(row["details"]) == {
        "wall_seconds": 10.0, "wall_from": "agent span", "model_seconds": 6.0,
        "tool_seconds": 2.0, "harness_seconds": 2.0, "iterations": 2, "tool_calls": 1,
        "tokens_prompt": 3000, "tokens_completion": 300, "max_seconds": None,
        "max_iterations": None,
    }  # fmt: skip
    untimed = evaluate(build_table(rows(UNTIMED)), names=["latency"]).to_pylist()[0]
    details = json.loads(untimed["details"])
    assert details["wall_seconds"] is None and details["model_seconds"] is None
    assert details["tokens_prompt"] == 3000


def scaled(seconds: float, session: str, tokens: int | None = 100) -> list[dict[str, Any]]:
    return rows([("AGENT", 0.0, seconds, None), ("LLM", 0.0, seconds / 2, tokens)], session)


def test_summary_over_a_dataset() -> None:
    table = build_table(
        [r for i in range(1, 101) for r in scaled(float(i), f"s{i:03}")]
        + rows([("AGENT", None, None, None)], "untimed")
    )
    scores = evaluate(table, names=["latency", "tool_call_loops"])
    summary = latency_summary(scores)
    assert summary["turns"] == 101 and summary["timed_turns"] == 100
    assert summary["p50_seconds"] == pytest.approx(50.5)
    assert summary["p95_seconds"] == pytest.approx(95.05)
    assert summary["p99_seconds"] == pytest.approx(99.01)
    assert summary["mean_iterations"] == pytest.approx(100 / 101)
    assert (summary["tokens_prompt"], summary["tokens_completion"]) == (10_000, 1_000)
    assert summary["tokens_total"] == 11_000
    assert latency_summary(scores.to_pandas()) == summary


def test_summary_of_nothing() -> None:
    empty = evaluate(build_table(rows([("AGENT", None, None, None)])), names=["latency"])
    summary = latency_summary(empty)
    assert summary["p50_seconds"] is None and summary["tokens_total"] is None
    assert summary["turns"] == 1


def test_ratios_against_a_baseline() -> None:
    baseline = evaluate(
        build_table(scaled(2.0, "a") + scaled(4.0, "b") + scaled(1.0, "only-baseline")),
        names=["latency"],
    )
    candidate = evaluate(
        build_table(scaled(3.0, "a") + scaled(2.0, "b") + scaled(5.0, "only-candidate")),
        names=["latency"],
    )
    ratios = latency_ratios(candidate, baseline)
    assert ratios.to_dict("records") == [
        {
            "session_id": "a",
            "turn_index": 0,
            "candidate_seconds": 3.0,
            "baseline_seconds": 2.0,
            "ratio": 1.5,
        },
        {
            "session_id": "b",
            "turn_index": 0,
            "candidate_seconds": 2.0,
            "baseline_seconds": 4.0,
            "ratio": 0.5,
        },
    ]
    assert ratio_p50(ratios) == pytest.approx(1.0)
    assert ratio_p95(ratios) == pytest.approx(1.45)
    none = latency_ratios(candidate.to_pandas().iloc[:0], baseline)
    assert none.empty and ratio_p50(none) is None


# -- invariants --------------------------------------------------------------------------------


@st.composite
def turns(draw: st.DrawFn) -> list[Span]:
    timed = draw(st.booleans())
    spans: list[Span] = []
    clock = 0.0
    with_agent = draw(st.booleans())
    for _ in range(draw(st.integers(0, 6))):
        kind = draw(st.sampled_from(["LLM", "TOOL", "CHAIN"]))
        clock += draw(st.floats(0.001, 5))
        length = draw(st.floats(0.001, 5))
        tokens = draw(st.none() | st.integers(0, 5000)) if kind == "LLM" else None
        spans.append((kind, clock if timed else None, clock + length if timed else None, tokens))
    end = max((s[2] or 0.0 for s in spans), default=0.0) + 0.5
    if with_agent or not spans:
        spans.insert(0, ("AGENT", -0.001 if timed else None, end if timed else None, None))
    return spans


@st.composite
def tables(draw: st.DrawFn) -> tuple[pa.Table, int]:
    count = draw(st.integers(1, 5))
    out = [r for t in range(count) for r in rows(draw(turns()), "s", t)]
    return build_table(out), count


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tables(), st.randoms(use_true_random=False), st.none() | st.floats(0.1, 20))
def test_invariants(drawn: tuple[pa.Table, int], random: Any, budget: float | None) -> None:
    table, count = drawn
    rubrics = RubricSet(default=Rubric(max_seconds=budget))
    before = table.to_pylist()
    scores = evaluate(table, rubrics, names=["latency"])
    assert table.to_pylist() == before
    assert scores.num_rows == count
    for row in scores.to_pylist():
        details = json.loads(row["details"])
        if row["score"] is None:
            assert row["label"] == "no timing" and row["outcome"] == "n/a"
            continue
        assert row["score"] >= 0 and details["harness_seconds"] >= 0
        parts = details["model_seconds"] + details["tool_seconds"] + details["harness_seconds"]
        assert parts >= row["score"] - 1e-9
        if budget is None:  # a time without a budget is a measurement, not a pass
            assert (row["passed"], row["outcome"]) == (None, "n/a")
        else:
            assert row["passed"] == (row["score"] <= budget)
    order = list(range(table.num_rows))
    random.shuffle(order)
    shuffled = evaluate(table.take(pa.array(order)), rubrics, names=["latency"])
    key = ["session_id", "turn_index"]
    pd.testing.assert_frame_equal(
        shuffled.to_pandas().sort_values(key).reset_index(drop=True),
        scores.to_pandas().sort_values(key).reset_index(drop=True),
    )


# -- real runs ---------------------------------------------------------------------------------


async def real_run(behaviour: str) -> tuple[pa.Table, Any]:
    domain = get_domain("observability")
    provider, exporter = trace_table_provider()
    agent = Agent(
        model=SimulatedModel(behaviour, domain.tasks, seed=0),  # type: ignore[arg-type]
        variant=load_variant("alyx"),
        tools=domain.make_tools,
        instructions=domain.instructions,
        tracer_provider=provider,
    )
    result = await agent.session("same-session").run_turn(domain.demo_request)
    return exporter.table(), result


async def test_real_runs_split_their_time_and_count_what_the_agent_did() -> None:
    diligent_table, diligent = await real_run("diligent")
    churner_table, churner = await real_run("churner")
    rows_ = [evaluate(t, names=["latency"]) for t in (diligent_table, churner_table)]
    calm, busy = (json.loads(r.to_pylist()[0]["details"]) for r in rows_)
    for details, result in ((calm, diligent), (busy, churner)):
        assert details["wall_from"] == "agent span" and details["wall_seconds"] > 0
        assert details["iterations"] == result.iterations
        assert details["tool_calls"] == len(result.tool_calls)
        assert details["tokens_prompt"] == result.usage.prompt_tokens
        assert details["tokens_completion"] == result.usage.completion_tokens
        total = details["model_seconds"] + details["tool_seconds"] + details["harness_seconds"]
        assert total == pytest.approx(details["wall_seconds"])
    assert busy["iterations"] > calm["iterations"]
    assert busy["tokens_prompt"] > calm["tokens_prompt"]
    ratios = latency_ratios(rows_[1], rows_[0])
    assert len(ratios) == 1 and ratios["ratio"].iloc[0] > 0
    summary = latency_summary(pa.concat_tables(rows_))
    assert summary["p50_seconds"] <= summary["p95_seconds"] <= summary["p99_seconds"]
