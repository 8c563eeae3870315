"""`tokens` and `cost` on small hand-built tables: sums, n/a rules, budgets, recorded and priced cost."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from genai_prices import Usage, calc_price

from plangate.evaluators import (
    Rubric,
    RubricError,
    RubricSet,
    evaluate,
    rubric_from_dict,
    rubrics_from_dict,
)
from plangate.replay import build_table

START = datetime(2026, 3, 1, 12, tzinfo=UTC)
CACHED = "llm.token_count.prompt_details.cache_read"
COST = "llm.cost.total"


def agent(session: str = "s", turn: int = 0, **extra: Any) -> dict[str, Any]:
    return {"session_id": session, "turn_index": turn, "trace_id": f"{session}-{turn}",
            "span_id": f"{session}-{turn}-a", "span_kind": "AGENT", "name": "agent.turn",
            "status_code": "OK", "source": "test", "start_time": START, **extra}  # fmt: skip


def llm(
    number: int,
    prompt: int | None = None,
    completion: int | None = None,
    *,
    model: str | None = None,
    cost: float | None = None,
    cached: int | None = None,
    provider: str | None = None,
    session: str = "s",
    **attributes: Any,
) -> dict[str, Any]:
    """A model call's span; `cost`, `cached`, `provider` and `attributes` go in its attributes."""
    named = {COST: cost, CACHED: cached, "llm.provider": provider}
    attributes |= {key: value for key, value in named.items() if value is not None}
    return {"session_id": session, "turn_index": 0, "trace_id": f"{session}-0",
            "span_id": f"{session}-0-l{number}", "span_kind": "LLM", "name": "llm.call",
            "status_code": "OK", "source": "test", "iteration": number,
            "start_time": START + timedelta(seconds=number), "model_name": model,
            "tokens_prompt": prompt, "tokens_completion": completion,
            "attributes": json.dumps(attributes) if attributes else None}  # fmt: skip


def scores(
    rows: list[dict[str, Any]], rubrics: RubricSet | None = None
) -> dict[str, dict[str, Any]]:
    """The one turn's row of each evaluator (the table must hold one turn)."""
    table = build_table(rows)
    scored = evaluate(table, rubrics, names=["tokens", "cost"]).to_pylist()
    assert len(scored) == 2
    return {r["evaluator"]: {**r, "details": json.loads(r["details"])} for r in scored}


def budgets(**fields: Any) -> RubricSet:
    return RubricSet(default=Rubric(**fields))


def priced(
    model: str, provider: str | None, prompt: int, completion: int, cached: int = 0
) -> float:
    usage = Usage(input_tokens=prompt, output_tokens=completion, cache_read_tokens=cached)
    found = calc_price(usage, model, provider_id=provider, genai_request_timestamp=START)
    return float(found.total_price)


# -- tokens ------------------------------------------------------------------------------------


def test_tokens_sum_the_turns_calls_with_cached_tokens_and_models() -> None:
    rows = [
        agent(),
        llm(1, 1200, 80, model="gpt-4o", cached=1000, provider="openai"),
        llm(2, 300, 20, model="gpt-4o"),
        llm(3),  # no counts: a call, but not a counted one
    ]
    row = scores(rows)["tokens"]
    assert row["score"] == 1600.0
    assert (row["outcome"], row["label"]) == ("n/a", "no budget")
    assert row["details"] == {
        "llm_calls": 3, "counted_calls": 2, "lost_spans": 0, "tokens_prompt": 1500,
        "tokens_completion": 100,
        "tokens_cached": 1000, "tokens_total": 1600, "max_tokens": None,
        "models": [{"model": "gpt-4o", "provider": None},
                   {"model": "gpt-4o", "provider": "openai"}],
    }  # fmt: skip
    assert row["explanation"] == (
        "1,500 prompt (1,000 cached) + 100 completion = 1,600 tokens over 3 model calls "
        "(2 with token counts)"
    )


@pytest.mark.parametrize(
    ("rows", "explanation"),
    [
        ([agent(), llm(1), llm(2)], "no token counts on its 2 model calls"),
        ([agent()], "no model calls"),
    ],
)
def test_a_turn_without_counts_has_no_score_whatever_its_budget(
    rows: list[dict[str, Any]], explanation: str
) -> None:
    for row in scores(rows, budgets(max_tokens=10, max_cost=0.01)).values():
        assert row["score"] is None
        assert (row["outcome"], row["label"]) == ("n/a", "no counts")
        assert row["passed"] is None
    assert scores(rows)["tokens"]["explanation"] == explanation


SUMS = "1,000 prompt + 100 completion = 1,100 tokens over 1 model call"


@pytest.mark.parametrize(
    ("limit", "outcome", "label", "explanation"),
    [
        (1000, "fail", "over budget", f"1,100 tokens are over the budget of 1,000; {SUMS}"),
        (1100, "pass", "within budget", f"{SUMS}; within 1,100 tokens"),
        (None, "n/a", "no budget", SUMS),
    ],
)
def test_max_tokens_fails_a_turn_above_it(
    limit: int | None, outcome: str, label: str, explanation: str
) -> None:
    rows = [agent(), llm(1, 1000, 100)]
    row = scores(rows, budgets(max_tokens=limit))["tokens"]
    assert (row["outcome"], row["label"], row["score"]) == (outcome, label, 1100.0)
    assert row["explanation"] == explanation
    assert row["details"]["max_tokens"] == limit


def test_a_turns_own_rubric_wins_over_the_default() -> None:
    rows = [agent(), llm(1, 100, 10), agent("t"), llm(1, 100, 10, session="t")]
    rubrics = RubricSet(default=Rubric(max_tokens=50), turns={("t", 0): Rubric(max_tokens=500)})
    scored = evaluate(build_table(rows), rubrics, names=["tokens"])
    assert {r["session_id"]: r["outcome"] for r in scored.to_pylist()} == {"s": "fail", "t": "pass"}


# -- cost --------------------------------------------------------------------------------------


def test_a_recorded_cost_is_used_as_it_is() -> None:
    rows = [
        agent(),
        llm(1, 1000, 100, model="gpt-4o", cost=0.125),
        llm(2, 5, 5, model="no-such-model", cost=0.25),
    ]
    row = scores(rows)["cost"]
    assert row["score"] == 0.375
    assert row["details"]["cost_from"] == "calls"
    assert (row["details"]["recorded_calls"], row["details"]["priced_calls"]) == (2, 0)
    assert row["explanation"] == "$0.375 for 2 model calls, recorded by the source"


def test_the_agent_spans_recorded_cost_is_the_turns_cost() -> None:
    rows = [
        agent(attributes=json.dumps({"agent_cost": 0.0421})),
        llm(1, 1000, 100, model="gpt-4o", cost=99.0),
    ]
    row = scores(rows)["cost"]
    assert row["score"] == 0.0421
    assert row["details"]["cost_from"] == "agent span"
    assert row["explanation"] == "$0.0421 for 1 model call, recorded by the source for the turn"


def test_a_cost_without_a_recorded_one_is_genai_prices_own() -> None:
    rows = [
        agent(),
        llm(1, 1200, 80, model="gpt-4o", cached=1000, provider="openai"),
        llm(2, 300, 20, model="gpt-4o", **{"gen_ai.system": "openai"}),
    ]
    row = scores(rows)["cost"]
    expected = priced("gpt-4o", "openai", 1200, 80, 1000) + priced("gpt-4o", "openai", 300, 20)
    assert row["score"] == pytest.approx(expected, rel=1e-12)
    assert row["details"]["priced_calls"] == 2
    assert row["details"]["price_table"].startswith("genai-prices ")
    assert row["explanation"].endswith("priced from token counts with genai-prices")


def test_recorded_and_priced_calls_add_up() -> None:
    rows = [
        agent(),
        llm(1, 1000, 10, model="gpt-4o", cost=1.0),
        llm(2, 1000, 10, model="gpt-4o"),
    ]
    row = scores(rows)["cost"]
    assert row["score"] == pytest.approx(1.0 + priced("gpt-4o", None, 1000, 10), rel=1e-12)
    assert "1 recorded by the source, 1 priced with genai-prices" in row["explanation"]


def test_a_tiered_model_is_priced_per_call_at_the_calls_time() -> None:
    rows = [agent(), llm(1, 250_000, 1000, model="claude-sonnet-4-5")]
    moment = START + timedelta(seconds=1)
    usage = Usage(input_tokens=250_000, output_tokens=1000)
    expected = calc_price(usage, "claude-sonnet-4-5", genai_request_timestamp=moment)
    assert scores(rows)["cost"]["score"] == pytest.approx(float(expected.total_price), rel=1e-12)


@pytest.mark.parametrize(
    ("model", "provider", "explanation"),
    [
        ("no-such-model-7", None, "no price known for model 'no-such-model-7'"),
        (
            "gpt-4o",
            "no-such-cloud",
            "no price known for model 'gpt-4o' from provider 'no-such-cloud'",
        ),
        (None, None, "no model named, so its token counts cannot be priced"),
    ],
)
def test_a_call_that_cannot_be_priced_leaves_the_cost_unknown(
    model: str | None, provider: str | None, explanation: str
) -> None:
    rows = [agent(), llm(1, 10, 10, model="gpt-4o"), llm(2, 10, 10, model=model, provider=provider)]
    row = scores(rows, budgets(max_cost=1.0))["cost"]
    assert row["score"] is None
    assert (row["outcome"], row["label"], row["explanation"]) == ("n/a", "no price", explanation)
    assert scores(rows)["tokens"]["score"] == 40.0  # the tokens are still counted


@pytest.mark.parametrize(
    ("limit", "outcome", "label"),
    [(0.1, "fail", "over budget"), (0.5, "pass", "within budget"), (None, "n/a", "no budget")],
)
def test_max_cost_fails_a_turn_above_it(limit: float | None, outcome: str, label: str) -> None:
    rows = [agent(), llm(1, 10, 10, cost=0.25)]
    row = scores(rows, budgets(max_cost=limit))["cost"]
    assert (row["outcome"], row["label"], row["score"]) == (outcome, label, 0.25)
    assert row["details"]["max_cost"] == limit
    if outcome == "fail":
        assert row["explanation"].startswith("$0.25 is over the budget of $0.1; ")


# -- counts lost at the sender -----------------------------------------------------------------

DROPPED = {"otel.dropped_attributes_count": 40}
"""What a reader writes on a span whose sender dropped 40 attributes over its limit."""
LOST = "1 span lost attributes at the sender (over its limit) and may have held more "


def test_a_model_call_that_lost_its_counts_makes_the_sum_a_lower_bound() -> None:
    rows = [agent(), llm(1, 1000, 100, model="gpt-4o", cost=0.01), llm(2, **DROPPED)]
    scored = scores(rows, budgets(max_tokens=50_000, max_cost=1.0))
    tokens, cost = scored["tokens"], scored["cost"]
    for row in (tokens, cost):  # within the budget by what is known: not a pass
        assert (row["outcome"], row["label"], row["score"]) == ("n/a", "lost counts", None)
        assert row["details"]["lost_spans"] == 1
    assert tokens["explanation"] == (
        "1,000 prompt + 100 completion = 1,100 tokens over 2 model calls (1 with token counts); "
        f"{LOST}token counts: at least 1,100 tokens; cannot tell whether within 50,000 tokens"
    )
    assert cost["explanation"] == (
        f"$0.01 for 2 model calls, recorded by the source; {LOST}token counts or costs: at least "
        "$0.01; cannot tell whether within $1"
    )


def test_a_lower_bound_over_the_budget_still_fails() -> None:
    rows = [agent(), llm(1, 1000, 100), llm(2, 50, **DROPPED)]  # its completion count lost
    row = scores(rows, budgets(max_tokens=1000))["tokens"]
    assert (row["outcome"], row["label"], row["score"]) == ("fail", "over budget", None)
    assert row["explanation"].startswith("1,150 tokens are over the budget of 1,000; ")


def test_a_span_that_lost_its_kind_may_have_been_a_model_call() -> None:
    lost_kind = {**llm(2, 500, 50, **DROPPED), "span_kind": "UNKNOWN"}
    row = scores([agent(), llm(1, 1000, 100), lost_kind], budgets(max_tokens=5000))["tokens"]
    assert (row["outcome"], row["label"], row["details"]["lost_spans"]) == (
        "n/a", "lost counts", 1
    )  # fmt: skip
    plain = {**llm(2, 500, 50), "span_kind": "UNKNOWN"}  # nothing dropped: not a model call
    row = scores([agent(), llm(1, 1000, 100), plain], budgets(max_tokens=5000))["tokens"]
    assert (row["outcome"], row["score"], row["details"]["lost_spans"]) == ("pass", 1100.0, 0)


def test_what_was_kept_is_not_lost() -> None:
    """A span that lost other attributes but kept its counts, or whose cost is recorded."""
    rows = [agent(), llm(1, 1000, 100, model="gpt-4o", **DROPPED), llm(2, cost=0.5, **DROPPED)]
    scored = scores(rows, budgets(max_cost=1.0))
    assert scored["cost"]["details"]["lost_spans"] == 0
    assert scored["tokens"]["details"]["lost_spans"] == 1  # no counts on the second: lost
    whole = [agent(attributes=json.dumps({"agent_cost": 0.25})), llm(1, **DROPPED)]
    cost = scores(whole, budgets(max_cost=1.0))["cost"]  # the turn's cost is recorded whole
    assert (cost["outcome"], cost["score"], cost["details"]["lost_spans"]) == ("pass", 0.25, 0)


# -- the rubric --------------------------------------------------------------------------------


def test_the_budgets_round_trip_through_the_rubric() -> None:
    rubric = rubric_from_dict({"max_tokens": 50_000, "max_cost": 0.25})
    assert (rubric.max_tokens, rubric.max_cost) == (50_000, 0.25)
    assert rubric_from_dict(rubric.to_dict()) == rubric
    assert rubrics_from_dict({"default": {"max_cost": 1}}).default == Rubric(max_cost=1)


@pytest.mark.parametrize(
    ("field", "value"),
    [("max_tokens", 1.5), ("max_tokens", "many"), ("max_tokens", True), ("max_tokens", -1),
     ("max_cost", "1"), ("max_cost", -0.5), ("max_cost", float("nan")), ("max_cost", False)],
)  # fmt: skip
def test_a_bad_budget_is_an_error_that_names_the_field(field: str, value: Any) -> None:
    with pytest.raises(RubricError, match=rf"turns\[0\]\.{field}: "):
        rubrics_from_dict({"turns": [{"session_id": "s", "turn_index": 0, field: value}]})
