"""`tokens` and `cost` against a plain reference: one turn at a time, in Python, on generated tables.

The evaluators work column-wise over the whole table and price each model once; `judge` below
reads one turn's LLM spans as dicts, prices each call with genai-prices' own `calc_price`, and
says what the evaluators must say. The tables are the shared generated ones (`trace_tables`),
their LLM spans given drawn counts, models, providers, cached tokens and recorded costs, some of
them attributes lost at the sender (`otel.dropped_attributes_count`), their kind too at times.
"""

from __future__ import annotations

import json
from collections import defaultdict
from datetime import datetime
from typing import Any

import pyarrow as pa
import pytest
from genai_prices import Usage, calc_price
from hypothesis import given, settings
from hypothesis import strategies as st

from plangate.evaluators import Rubric, RubricSet, evaluate
from plangate.replay import build_table
from tests.evaluators.tables import trace_tables

Span = dict[str, Any]
MODELS = {"gpt-4o": "openai", "gpt-4.1-mini": "openai", "claude-sonnet-4-5": "anthropic"}
"""Models with prices, flat and tiered, and their providers."""
RARELY = 40
"""One call in about this many cannot be priced (a turn with one such call is n/a)."""
DROPPED = "otel.dropped_attributes_count"


@st.composite
def priced_tables(draw: st.DrawFn) -> pa.Table:
    """A generated trace table whose LLM spans carry drawn usage, models and costs."""
    rows = draw(trace_tables()).to_pylist()
    for row in rows:
        if row["span_kind"] == "LLM":
            row.update(draw(_llm_fields()))
            if draw(st.integers(0, 12)) == 0:  # its kind lost (or never known)
                row["span_kind"] = "UNKNOWN"
        elif row["span_kind"] == "AGENT" and draw(st.integers(0, 5)) == 0:
            row["attributes"] = json.dumps({"agent_cost": draw(st.sampled_from([0.0, 0.5]))})
    return build_table(rows)


@st.composite
def _llm_fields(draw: st.DrawFn) -> Span:
    def rarely() -> bool:
        return draw(st.integers(0, RARELY)) == 0

    counted = "none" if draw(st.integers(0, 9)) == 0 else "prompt" if rarely() else "both"
    prompt = draw(st.integers(0, 300_000)) if counted != "none" else None
    completion = draw(st.integers(0, 5_000)) if counted == "both" else None
    model = draw(st.sampled_from(sorted(MODELS)))
    provider = draw(st.sampled_from([None, MODELS[model]]))
    if rarely():
        model, provider = draw(st.sampled_from([(None, None), ("not-a-model", None),
                                                ("gpt-4o", "anthropic")]))  # fmt: skip
    attributes: dict[str, Any] = {}
    if prompt is not None and draw(st.booleans()):
        attributes["llm.token_count.prompt_details.cache_read"] = draw(st.integers(0, prompt))
    if provider is not None:
        attributes[draw(st.sampled_from(["llm.provider", "gen_ai.system"]))] = provider
    if draw(st.integers(0, 4)) == 0:
        attributes["llm.cost.total"] = draw(st.sampled_from([0.0, 0.001, 0.25]))
    if draw(st.integers(0, 5)) == 0:
        attributes[DROPPED] = draw(st.sampled_from([0, 3, 12]))
    if rarely():  # not a provider's name: left out (and Python, not Arrow, reads the text)
        attributes["llm.system"] = 7
    text = json.dumps(attributes) if attributes else None
    if rarely():
        text = draw(st.sampled_from(["[]", "not JSON", ""]))  # no attributes to read
    return {"tokens_prompt": prompt, "tokens_completion": completion, "model_name": model,
            "attributes": text}  # fmt: skip


# -- the reference ------------------------------------------------------------------------------


def attributes_of(span: Span) -> dict[str, Any]:
    """A span's attributes: its JSON object, else none."""
    try:
        value = json.loads(span["attributes"] or "{}")
    except json.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def call_cost(span: Span) -> tuple[float | None, str | None]:
    """One call's cost (recorded, else genai-prices'), or why it has none."""
    attributes = attributes_of(span)
    if "llm.cost.total" in attributes:
        return attributes["llm.cost.total"], None
    prompt, completion = span["tokens_prompt"], span["tokens_completion"]
    if prompt is None and completion is None:
        return None, None
    if prompt is None or completion is None:
        return None, "part"
    if span["model_name"] is None:
        return None, "no model"
    provider = attributes.get("llm.provider", attributes.get("gen_ai.system"))
    usage = Usage(input_tokens=prompt, output_tokens=completion,
                  cache_read_tokens=attributes.get("llm.token_count.prompt_details.cache_read"))  # fmt: skip
    at: datetime = span["start_time"]
    try:
        found = calc_price(
            usage, span["model_name"], provider_id=provider, genai_request_timestamp=at
        )
    except LookupError:
        return None, "unknown"
    return float(found.total_price), None


def dropped(span: Span) -> bool:
    """Whether the sender dropped some of the span's attributes."""
    count = attributes_of(span).get(DROPPED, 0)
    return int(count) > 0


def judge(
    agent: Span | None, llms: list[Span], unknown: list[Span], rubric: Rubric | None
) -> dict[str, Any]:
    """What the two evaluators must say about one turn."""
    prompts = [s["tokens_prompt"] for s in llms if s["tokens_prompt"] is not None]
    completions = [s["tokens_completion"] for s in llms if s["tokens_completion"] is not None]
    counted = [
        s for s in llms if s["tokens_prompt"] is not None or s["tokens_completion"] is not None
    ]
    total = sum(prompts) + sum(completions) if counted else None
    lost = [s for s in unknown if dropped(s)]
    lost_counts = lost + [
        s for s in llms
        if dropped(s) and (s["tokens_prompt"] is None or s["tokens_completion"] is None)
    ]  # fmt: skip
    lost_costs = lost + [
        s for s in llms
        if dropped(s) and s["tokens_prompt"] is None and s["tokens_completion"] is None
        and "llm.cost.total" not in attributes_of(s)
    ]  # fmt: skip
    agent_cost = attributes_of(agent or {"attributes": None}).get("agent_cost")
    costs = [call_cost(s) for s in llms]
    if agent_cost is not None:
        cost, label, lost_costs = agent_cost, None, []
    elif any(reason not in (None,) for _, reason in costs):
        cost, label, lost_costs = None, "no price", []
    else:
        known = [c for c, _ in costs if c is not None]
        cost, label = (sum(known), None) if known else (None, "no counts")
    return {
        "tokens": measured(total, rubric and rubric.max_tokens, "no counts", lost_counts),
        "cost": measured(cost, rubric and rubric.max_cost, label or "no counts", lost_costs),
        "details": {"llm_calls": len(llms), "counted_calls": len(counted),
                    "lost_spans": len(lost_counts),
                    "tokens_prompt": sum(prompts) if prompts else None,
                    "tokens_completion": sum(completions) if completions else None},
    }  # fmt: skip


def measured(
    value: float | None, limit: float | None, missing: str, lost: list[Span]
) -> tuple[float | None, tuple[str, str]]:
    """The score and verdict of a measurement; with spans lost, `value` is only a lower bound."""
    if not lost:
        return value, verdict(value, limit, missing)
    if value is not None and limit is not None and value > limit:
        return None, ("fail", "over budget")
    return None, ("n/a", "lost counts")


def verdict(value: float | None, limit: float | None, missing: str) -> tuple[str, str]:
    if value is None:
        return "n/a", missing
    if limit is None:
        return "n/a", "no budget"
    return ("fail", "over budget") if value > limit else ("pass", "within budget")


def expected(table: pa.Table, rubrics: RubricSet) -> dict[tuple[str, int], dict[str, Any]]:
    spans: dict[tuple[str, int], list[Span]] = defaultdict(list)
    for row in table.to_pylist():
        spans[(row["session_id"], row["turn_index"])].append(row)
    judged = {}
    for key, turn in spans.items():
        agents = [s for s in turn if s["span_kind"] == "AGENT"]
        llms = sorted((s for s in turn if s["span_kind"] == "LLM"), key=lambda s: s["span_id"])
        unknown = [s for s in turn if s["span_kind"] == "UNKNOWN"]
        judged[key] = judge(agents[0] if agents else None, llms, unknown, rubrics.lookup(*key))
    return judged


# -- the comparison -----------------------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(
    table=priced_tables(),
    max_tokens=st.sampled_from([None, 0, 200_000]),
    max_cost=st.sampled_from([None, 0.0, 0.5]),
)
def test_the_evaluators_say_what_the_reference_says(
    table: pa.Table, max_tokens: int | None, max_cost: float | None
) -> None:
    rubrics = RubricSet(default=Rubric(max_tokens=max_tokens, max_cost=max_cost))
    reference = expected(table, rubrics)
    scored = evaluate(table, rubrics, names=["tokens", "cost"]).to_pylist()
    assert len(scored) == 2 * len(reference)
    for row in scored:
        key = (row["session_id"], row["turn_index"])
        if row["outcome"] == "error":  # an infrastructure stop: not judged by anyone
            continue
        score, (outcome, label) = reference[key][row["evaluator"]]
        assert (row["outcome"], row["label"]) == (outcome, label), (key, row)
        if score is None:
            assert row["score"] is None
        else:
            assert row["score"] == pytest.approx(score, rel=1e-9, abs=1e-15)
        details = json.loads(row["details"])
        if row["evaluator"] == "tokens":
            for name, value in reference[key]["details"].items():
                assert details[name] == value, (name, key)
