"""trajectory_match on hand-built turns, invariants, and real runs of the reference agent."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from plangate.evaluators import Rubric, RubricSet, ToolExpectation, evaluate
from plangate.harness import Agent, SimulatedModel, get_domain, load_variant
from plangate.replay import build_table, canonical_arguments
from plangate.replay._exporter import trace_table_provider
from tests.bench.bench_evaluators import synthetic_table

T0 = datetime(2026, 1, 1, tzinfo=UTC)
Call = tuple[str, dict[str, Any]]


def rows(calls: list[Call], session: str = "s", turn: int = 0) -> list[dict[str, Any]]:
    """One turn: an AGENT span and one TOOL span per call, a second apart."""
    base = {"session_id": session, "turn_index": turn, "trace_id": f"{session}-{turn}",
            "status_code": "OK", "source": "test"}  # fmt: skip
    out = [{**base, "span_id": "agent", "span_kind": "AGENT", "name": "agent.turn",
            "start_time": T0, "end_time": T0 + timedelta(seconds=len(calls) + 1)}]  # fmt: skip
    for n, (name, arguments) in enumerate(calls):
        start = T0 + timedelta(seconds=n + 0.5)
        out.append(
            {**base, "span_id": f"tool-{n}", "span_kind": "TOOL", "name": f"tool.{name}",
             "tool_name": name, "tool_args": canonical_arguments(arguments),
             "start_time": start, "end_time": start + timedelta(seconds=0.5)}
        )  # fmt: skip
    return out


def expect(name: str, match: str = "subset", **arguments: Any) -> ToolExpectation:
    return ToolExpectation(name=name, arguments=arguments or None, match=match)  # type: ignore[arg-type]


SEARCH: Call = ("search_flights", {"from": "SFO", "to": "JFK"})
BOOK: Call = ("book_reservation", {"flight": "UA1", "seats": 1})
CANCEL: Call = ("cancel_order", {"order": "O-1"})
PLAN: Call = ("todo_write", {"todos": [{"content": "search"}, {"content": "book"}]})
FINISH: Call = ("finish", {"summary": "done"})
E_SEARCH = expect("search_flights", to="JFK")
E_BOOK = expect("book_reservation", flight="UA1")

Case = tuple[
    str, list[Call], Rubric | None, dict[str, Any], tuple[float | None, bool | None, str, str]
]
CASES: list[Case] = [
    ("no rubric", [SEARCH], None, {}, (None, None, "no rubric", "not applicable: no rubric")),
    (
        "rubric without required tools",
        [SEARCH],
        Rubric(max_seconds=3),
        {},
        (None, None, "no rubric", "not applicable: no rubric"),
    ),
    (
        "strict: same sequence, plan and finish left out",
        [PLAN, SEARCH, BOOK, FINISH],
        Rubric(required_tools=(E_SEARCH, E_BOOK), order="strict"),
        {},
        (1.0, True, "match", "2 of 2 expected calls matched (strict) in 2 calls (2 plan/control"),
    ),
    (
        "strict: wrong call at a position",
        [PLAN, SEARCH, SEARCH, BOOK],
        Rubric(required_tools=(E_SEARCH, E_BOOK), order="strict"),
        {},
        (
            1 / 3,
            False,
            "mismatch",
            'call 3 is search_flights({"from":"SFO","to":"JFK"}) but the rubric expects '
            'book_reservation({"flight": "UA1"})',
        ),
    ),
    (
        "strict: too short",
        [SEARCH],
        Rubric(required_tools=(E_SEARCH, E_BOOK), order="strict"),
        {},
        (1 / 2, False, "mismatch", 'missing book_reservation({"flight": "UA1"})'),
    ),
    (
        "strict: too long",
        [SEARCH, BOOK, CANCEL],
        Rubric(required_tools=(E_SEARCH, E_BOOK), order="strict"),
        {},
        (2 / 3, False, "mismatch", 'unexpected call cancel_order({"order":"O-1"}) (call 3)'),
    ),
    (
        "unordered: any order",
        [BOOK, SEARCH],
        Rubric(required_tools=(E_SEARCH, E_BOOK), order="unordered"),
        {},
        (1.0, True, "match", "2 of 2 expected calls matched (unordered)"),
    ),
    (
        "unordered: one-to-one, so an extra call fails",
        [BOOK, SEARCH, SEARCH],
        Rubric(required_tools=(E_SEARCH, E_BOOK), order="unordered"),
        {},
        (
            2 / 3,
            False,
            "mismatch",
            'unexpected call search_flights({"from":"SFO","to":"JFK"}) (call 3)',
        ),
    ),
    (
        "unordered: the matching backtracks",
        # The loose expectation first takes the first call, which the strict one needs.
        [("search_flights", {"to": "JFK"}), ("search_flights", {"to": "BOS"})],
        Rubric(required_tools=(expect("search_flights"), E_SEARCH), order="unordered"),
        {},
        (1.0, True, "match", "2 of 2 expected calls matched"),
    ),
    (
        "subset: only expected calls, repeats allowed",
        [SEARCH, SEARCH],
        Rubric(required_tools=(E_SEARCH, E_BOOK), order="subset"),
        {},
        (1.0, True, "match", "1 of 2 expected calls matched (subset) in 2 calls"),
    ),
    (
        "subset: an unexpected call",
        [SEARCH, CANCEL],
        Rubric(required_tools=(E_SEARCH, E_BOOK), order="subset"),
        {},
        (1 / 2, False, "mismatch", 'unexpected call cancel_order({"order":"O-1"}) (call 2)'),
    ),
    (
        "subset: no calls at all",
        [],
        Rubric(required_tools=(E_SEARCH,), order="subset"),
        {},
        (1.0, True, "match", "0 of 1 expected calls matched (subset) in 0 calls"),
    ),
    (
        "superset: extra calls are fine",
        [CANCEL, SEARCH, BOOK],
        Rubric(required_tools=(E_SEARCH, E_BOOK), order="superset"),
        {},
        (1.0, True, "match", "2 of 2 expected calls matched (superset) in 3 calls"),
    ),
    (
        "superset: each expectation needs its own call",
        [SEARCH],
        Rubric(required_tools=(E_SEARCH, expect("search_flights")), order="superset"),
        {},
        (1 / 2, False, "mismatch", "missing search_flights;"),
    ),
    (
        "arguments: exact",
        [SEARCH],
        Rubric(required_tools=(expect("search_flights", "exact", to="JFK"),)),
        {},
        (0.0, False, "mismatch", 'missing search_flights({"to": "JFK"})'),
    ),
    (
        "arguments: ignored",
        [SEARCH],
        Rubric(required_tools=(expect("search_flights", "ignore", to="LAX"),)),
        {},
        (1.0, True, "match", "1 of 1 expected calls matched"),
    ),
    (
        "arguments: subset compares the expected keys only",
        [SEARCH],
        Rubric(required_tools=(expect("search_flights", to="LAX"),)),
        {},
        (0.0, False, "mismatch", 'missing search_flights({"to": "LAX"})'),
    ),
    (
        "ignore_tools is a parameter",
        [PLAN, SEARCH],
        Rubric(required_tools=(E_SEARCH,), order="strict"),
        {"ignore_tools": []},
        (0.0, False, "mismatch", "call 1 is todo_write("),
    ),
]


@pytest.mark.parametrize(
    ("case", "calls", "rubric", "params", "expected"), CASES, ids=[c[0] for c in CASES]
)
def test_trajectory_match(
    case: str,
    calls: list[Call],
    rubric: Rubric | None,
    params: dict[str, Any],
    expected: tuple[float | None, bool | None, str, str],
) -> None:
    score, passed, label, fragment = expected
    row = evaluate(
        build_table(rows(calls)),
        RubricSet(default=rubric),
        names=["trajectory_match"],
        params={"trajectory_match": params},
    ).to_pylist()[0]
    assert (row["passed"], row["label"]) == (passed, label), row["explanation"]
    assert fragment in row["explanation"]
    if score is None:
        assert row["score"] is None
    else:
        assert row["score"] == pytest.approx(score)


def test_details_list_both_sequences_and_every_mismatch() -> None:
    rubric = Rubric(required_tools=(E_SEARCH, E_BOOK), order="unordered")
    row = evaluate(
        build_table(rows([PLAN, CANCEL, CANCEL])),
        RubricSet(default=rubric),
        names=["trajectory_match"],
    ).to_pylist()[0]
    details = json.loads(row["details"])
    assert details["expected"] == [
        'search_flights({"to": "JFK"})',
        'book_reservation({"flight": "UA1"})',
    ]
    assert details["actual"] == ['cancel_order({"order":"O-1"})'] * 2
    assert details["ignored_calls"] == 1 and details["matched"] == 0
    assert len(details["mismatches"]) == 4
    assert row["explanation"].endswith("3 more mismatches")


def test_each_turn_gets_its_own_rubric() -> None:
    table = build_table(rows([SEARCH], "a") + rows([BOOK], "b") + rows([], "c"))
    rubrics = RubricSet(
        default=Rubric(required_tools=(E_SEARCH,)),
        turns={("b", 0): Rubric(required_tools=(E_BOOK,))},
    )
    result = {
        r["session_id"]: r for r in evaluate(table, rubrics, names=["trajectory_match"]).to_pylist()
    }
    assert result["a"]["passed"] and result["b"]["passed"]
    assert not result["c"]["passed"] and result["c"]["score"] == 0.0


def test_a_key_whose_session_is_not_a_string_matches_no_turn() -> None:
    table = build_table(rows([SEARCH], "a") + rows([BOOK], "b"))
    rubrics = RubricSet(
        turns={("b", 0): Rubric(required_tools=(E_BOOK,)), (0, 0): Rubric(required_tools=(E_BOOK,))}  # type: ignore[dict-item]
    )
    result = {
        r["session_id"]: r for r in evaluate(table, rubrics, names=["trajectory_match"]).to_pylist()
    }
    assert result["b"]["passed"] and result["a"]["label"] == "no rubric"


@pytest.mark.parametrize("first_band", [1, 3])
def test_strict_prefixes_do_not_depend_on_the_band_widths(
    first_band: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    table, _ = synthetic_table(12, 6, 5)
    rubric = Rubric(
        required_tools=tuple(expect("search", query=f"q{c}", limit=10) for c in range(6)),
        order="strict",
    )
    wide = evaluate(table, RubricSet(default=rubric), names=["trajectory_match"])
    monkeypatch.setattr("plangate.evaluators._trajectory.FIRST_BAND", first_band)
    narrow = evaluate(table, RubricSet(default=rubric), names=["trajectory_match"])
    assert narrow.equals(wide)
    assert 0 < pa.compute.sum(narrow["passed"]).as_py() < 12


# -- invariants --------------------------------------------------------------------------------

NAMES = ["search", "book", "cancel", "todo_update", "finish"]
call_strategy = st.tuples(
    st.sampled_from(NAMES), st.fixed_dictionaries({}, optional={"x": st.integers(0, 2)})
)
expectation_strategy = st.builds(
    ToolExpectation,
    name=st.sampled_from(NAMES[:3]),
    arguments=st.none() | st.fixed_dictionaries({}, optional={"x": st.integers(0, 2)}),
    match=st.sampled_from(["exact", "ignore", "subset"]),
)
rubric_strategy = st.none() | st.builds(
    Rubric,
    required_tools=st.lists(expectation_strategy, max_size=4).map(tuple),
    order=st.sampled_from(["strict", "unordered", "subset", "superset"]),
)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.lists(call_strategy, max_size=6), min_size=1, max_size=4),
    rubric_strategy,
    st.randoms(use_true_random=False),
)
def test_invariants(turns: list[list[Call]], rubric: Rubric | None, random: Any) -> None:
    table = build_table([r for i, calls in enumerate(turns) for r in rows(calls, "s", i)])
    rubrics = RubricSet(default=rubric)
    before = table.to_pylist()
    scores = evaluate(table, rubrics, names=["trajectory_match"])
    assert table.to_pylist() == before
    assert scores.num_rows == len(turns)
    for row in scores.to_pylist():
        if rubric is None or not rubric.required_tools:
            assert (row["score"], row["passed"], row["outcome"]) == (None, None, "n/a")
            continue
        assert 0.0 <= row["score"] <= 1.0
        assert row["passed"] == (row["score"] == 1.0)
    order = list(range(table.num_rows))
    random.shuffle(order)
    shuffled = evaluate(table.take(pa.array(order)), rubrics, names=["trajectory_match"])
    assert by_turn(shuffled) == by_turn(scores)


def by_turn(scores: pa.Table) -> list[dict[str, Any]]:
    return sorted(scores.to_pylist(), key=lambda r: (r["session_id"], r["turn_index"]))


# -- real runs ---------------------------------------------------------------------------------


async def real_run(behaviour: str, variant: str) -> tuple[pa.Table, Rubric]:
    domain = get_domain("observability")
    provider, exporter = trace_table_provider()
    agent = Agent(
        model=SimulatedModel(behaviour, domain.tasks, seed=0),  # type: ignore[arg-type]
        variant=load_variant(variant),
        tools=domain.make_tools,
        instructions=domain.instructions,
        tracer_provider=provider,
    )
    await agent.session(behaviour).run_turn(domain.demo_request)
    request = domain.demo_request.lower()
    wanted = [t for t in domain.tasks if any(p in request for p in t.phrases)]
    expected = tuple(
        ToolExpectation(name=c.name, arguments=dict(c.arguments), match="exact")
        for t in wanted
        for c in t.calls
    )
    return exporter.table(), Rubric(required_tools=expected, order="strict")


async def test_diligent_makes_the_expected_calls_and_the_forgetful_naive_agent_does_not() -> None:
    diligent_table, rubric = await real_run("diligent", "alyx")
    forgetful_table, _ = await real_run("forgetful", "naive")
    rubrics = RubricSet(default=rubric)
    diligent = evaluate(diligent_table, rubrics, names=["trajectory_match"]).to_pylist()[0]
    forgetful = evaluate(forgetful_table, rubrics, names=["trajectory_match"]).to_pylist()[0]
    assert diligent["passed"] and diligent["score"] == 1.0, diligent["explanation"]
    assert json.loads(diligent["details"])["ignored_calls"] > 0
    assert not forgetful["passed"]
    assert forgetful["score"] < diligent["score"]
    assert forgetful["explanation"].startswith("missing ")
