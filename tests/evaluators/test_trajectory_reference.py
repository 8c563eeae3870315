"""trajectory_match, computed column-wise, equals a plain per-turn reference on generated tables.

The reference reads one turn's spans as dicts, orders them as the frame does (start time, spans
without one last, then row), and compares the kept calls with the rubric in the simplest way:
a prefix loop, a maximum matching by augmenting paths, `any` over the expectations.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from plangate.evaluators import Rubric, RubricSet, ToolExpectation, evaluate
from plangate.replay import build_table
from plangate.replay.schema import CONTROL_TOOLS, PLAN_TOOLS
from tests.bench.bench_evaluators import synthetic_table
from tests.evaluators.tables import PLAN_CALLS, WORK_TOOLS, trace_tables

NAME = "trajectory_match"
DEFAULT_IGNORED = PLAN_TOOLS | CONTROL_TOOLS
T0 = datetime(2026, 1, 1, tzinfo=UTC)
Key = tuple[str, int]


# -- the reference -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Expected:
    """What the evaluator must say about one turn."""

    outcome: str
    score: float | None
    label: str
    details: dict[str, Any]
    """Details keys and their values (all but the mismatches where several maximum matchings
    would list different ones)."""
    mismatches: int
    """How many mismatches the details list."""
    explanation: str | None = None
    """The whole explanation, where it is determined."""
    fragments: list[str] = field(default_factory=list)
    """Texts the explanation must contain."""


def tool_of(span: Mapping[str, Any]) -> str:
    if span["tool_name"] is not None:
        return str(span["tool_name"])
    name = str(span["name"])
    return name[len("tool.") :] if name.startswith("tool.") else name


def arguments_of(text: str) -> dict[str, Any] | None:
    try:
        value = json.loads(text) if text else None
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def fits(call: tuple[int, str, str], expectation: ToolExpectation) -> bool:
    _, tool, text = call
    if tool != expectation.name:
        return False
    if expectation.arguments is None or expectation.match == "ignore":
        return True
    actual = arguments_of(text) or {}
    if expectation.match == "exact":
        return actual == dict(expectation.arguments)
    return all(k in actual and actual[k] == v for k, v in expectation.arguments.items())


def describe(call: tuple[int, str, str]) -> str:
    _, tool, text = call
    return f"{tool}({text if len(text) <= 80 else text[:79] + '…'})"


def largest_matching(fit: list[list[bool]]) -> int:
    """Size of a maximum matching of expectations (rows) to calls (columns)."""
    owner: dict[int, int] = {}

    def augment(j: int, seen: set[int]) -> bool:
        for i, ok in enumerate(fit[j]):
            if ok and i not in seen:
                seen.add(i)
                if i not in owner or augment(owner[i], seen):
                    owner[i] = j
                    return True
        return False

    return sum(augment(j, set()) for j in range(len(fit)))


def strict_mismatch(
    calls: list[tuple[int, str, str]], wanted: list[ToolExpectation], k: int
) -> str:
    if k < len(calls) and k < len(wanted):
        return (
            f"call {calls[k][0]} is {describe(calls[k])} but the rubric expects "
            f"{wanted[k].describe()}"
        )
    if k < len(wanted):
        return f"missing {wanted[k].describe()}"
    return f"unexpected call {describe(calls[k])} (call {calls[k][0]})"


def compare(
    calls: list[tuple[int, str, str]], wanted: list[ToolExpectation], order: str
) -> tuple[float, int, int]:
    """(score, matched, mismatches) of one turn."""
    n, m = len(calls), len(wanted)
    fit = [[fits(c, e) for c in calls] for e in wanted]
    if order == "strict":
        k = 0
        while k < min(n, m) and fit[k][k]:
            k += 1
        return k / max(n, m), k, int(k < n or k < m)
    if order == "subset":
        fitting = sum(any(fit[j][i] for j in range(m)) for i in range(n))
        used = sum(any(row) for row in fit)
        return (fitting / n if n else 1.0), used, n - fitting
    pairs = largest_matching(fit)
    if order == "superset":
        return pairs / m, pairs, m - pairs
    return pairs / max(n, m), pairs, (m - pairs) + (n - pairs)


def reference(
    spans: Sequence[dict[str, Any]], rubric: Rubric | None, ignored: frozenset[str], counted: bool
) -> Expected:
    """One turn's verdict from its spans (each with its table `row`).

    `counted`: whether any rubric of the set names tools; when none does, no call is looked at
    and a turn's details count none.
    """
    ordered = sorted(
        spans, key=lambda s: (s["start_time"] is None, s["start_time"] or T0, s["row"])
    )
    tools = [s for s in ordered if s["span_kind"] == "TOOL"]
    every = [(p + 1, tool_of(s), s["tool_args"] or "") for p, s in enumerate(tools)]
    calls = [c for c in every if c[1] not in ignored]
    counts = {"calls": len(calls), "ignored_calls": len(every) - len(calls)}
    if not counted:
        counts = {"calls": 0, "ignored_calls": 0}
    if rubric is None or not rubric.required_tools:
        text = "not applicable: no rubric names the tools this turn must call"
        return Expected("n/a", None, "no rubric", counts, 0, text)
    wanted = list(rubric.required_tools)
    score, matched, wrong = compare(calls, wanted, rubric.order)
    summary = (
        f"{matched} of {len(wanted)} expected calls matched ({rubric.order}) in {len(calls)} calls"
    )
    if counts["ignored_calls"]:
        summary += f" ({counts['ignored_calls']} plan/control calls left out)"
    details = {**counts, "order": rubric.order, "matched": matched,
               "expected": [e.describe() for e in wanted], "actual": [describe(c) for c in calls]}  # fmt: skip
    if not wrong:
        return Expected("pass", score, "match", {**details, "mismatches": []}, 0, summary)
    if rubric.order == "strict":
        said = strict_mismatch(calls, wanted, matched)
        return Expected(
            "fail", score, "mismatch", {**details, "mismatches": [said]}, 1, f"{said}; {summary}"
        )
    more = [f"; {wrong - 1} more mismatches"] if wrong > 1 else []
    return Expected("fail", score, "mismatch", details, wrong, None, [f"; {summary}", *more])


# -- comparing ---------------------------------------------------------------------------------


def check(table: pa.Table, rubrics: RubricSet, ignored: frozenset[str] | None) -> None:
    params = {} if ignored is None else {"ignore_tools": sorted(ignored)}
    scores = evaluate(table, rubrics, names=[NAME], params={NAME: params}).to_pylist()
    turns: dict[Key, list[dict[str, Any]]] = {}
    for row, span in enumerate(table.to_pylist()):
        turns.setdefault((span["session_id"], span["turn_index"]), []).append({**span, "row": row})
    assert sorted((r["session_id"], r["turn_index"]) for r in scores) == sorted(turns)
    for row in scores:
        if row["outcome"] == "error":  # an infrastructure failure: the registry's verdict
            continue
        key = (row["session_id"], row["turn_index"])
        rubric = rubrics.lookup(*key)
        kept = DEFAULT_IGNORED if ignored is None else ignored
        want = reference(turns[key], rubric, kept, rubrics.uses("required_tools"))
        verdict = (row["outcome"], row["label"], row["score"])
        assert verdict == (want.outcome, want.label, want.score), (key, row, want)
        assert row["passed"] == {"pass": True, "fail": False, "n/a": None}[want.outcome]
        details = json.loads(row["details"])
        assert {k: details[k] for k in want.details} == want.details, (key, details)
        assert len(details.get("mismatches", ())) == want.mismatches
        if want.explanation is not None:
            assert row["explanation"] == want.explanation
        for fragment in want.fragments:
            assert fragment in row["explanation"], (fragment, row["explanation"])


# -- strategies --------------------------------------------------------------------------------

TOOLS = (*WORK_TOOLS, *PLAN_CALLS, "finish", "absent")
ARGUMENTS = st.sampled_from([{"q": 0}, {"q": 1}, {"q": 2}, {}, {"q": 1, "extra": True}, {"q": 1.0}])
expectations = st.builds(
    ToolExpectation,
    name=st.sampled_from(WORK_TOOLS) | st.sampled_from(TOOLS),  # often the same tool twice
    arguments=st.none() | ARGUMENTS,
    match=st.sampled_from(["exact", "ignore", "subset"]),
)
rubric = st.builds(
    Rubric,
    required_tools=st.lists(expectations, max_size=4).map(tuple),
    order=st.sampled_from(["strict", "unordered", "subset", "superset"]),
)
ignores = st.none() | st.frozensets(st.sampled_from(TOOLS), max_size=4)


@st.composite
def rubric_sets(draw: st.DrawFn, keys: Sequence[Key]) -> RubricSet:
    """A default (or none) and own rubrics for some turns, drawn from a small shared pool.

    The pool holds equal copies too, as a rubric file gives (equal rubrics, not one object).
    """
    drawn = draw(st.lists(rubric, min_size=1, max_size=3))
    pool = [*drawn, *(copy.deepcopy(r) for r in drawn)]
    chosen = st.sampled_from([*keys, ("ghost", 0)])
    own = draw(st.dictionaries(chosen, st.sampled_from(range(len(pool))), max_size=len(keys) + 1))
    default = draw(st.none() | st.sampled_from(pool))
    return RubricSet(default=default, turns={key: pool[i] for key, i in own.items()})


def keys_of(table: pa.Table) -> list[Key]:
    return sorted(
        set(zip(table["session_id"].to_pylist(), table["turn_index"].to_pylist(), strict=True))
    )


SETTINGS = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@SETTINGS
@given(st.data())
def test_equals_the_reference_on_generated_tables(data: st.DataObject) -> None:
    table = data.draw(trace_tables())
    check(table, data.draw(rubric_sets(keys_of(table))), data.draw(ignores))


TEXTS = [None, "", "not json", "[1, 2]", '{"q": 1}', '{"q":1}', '{"q": 1.0}', '{"q": true}',
         '{"q": 2, "note": "caf\\u00e9"}', json.dumps({"q": 0, "text": 'é"\\\n\t' * 30}),
         json.dumps({"q": 1, "long": "x" * 100}, ensure_ascii=False)]  # fmt: skip


@st.composite
def raw_tables(
    draw: st.DrawFn, tools: Sequence[str] = TOOLS, texts: Sequence[str | None] = TEXTS
) -> pa.Table:
    """Turns whose arguments are any text (null, not JSON, long, quoted, non-ASCII)."""
    rows: list[dict[str, Any]] = []
    for turn in range(draw(st.integers(1, 4))):
        session = draw(st.sampled_from(["s", "t"]))
        base = {"session_id": session, "turn_index": turn, "trace_id": f"{session}{turn}",
                "status_code": "OK", "source": "test"}  # fmt: skip
        rows.append({**base, "span_id": f"a{turn}", "span_kind": "AGENT", "name": "agent.turn"})
        for n in range(draw(st.integers(0, 5))):
            tool = draw(st.sampled_from(tools))
            at = draw(st.none() | st.integers(0, 5).map(lambda s: T0 + timedelta(seconds=s)))
            rows.append({**base, "span_id": f"c{turn}-{n}", "span_kind": "TOOL", "name": f"tool.{tool}",
                         "tool_name": draw(st.sampled_from([tool, None])),
                         "tool_args": draw(st.sampled_from(texts)), "start_time": at})  # fmt: skip
    return build_table(draw(st.permutations(rows)))


@SETTINGS
@given(st.data())
def test_equals_the_reference_on_any_argument_text(data: st.DataObject) -> None:
    table = data.draw(raw_tables())
    check(table, data.draw(rubric_sets(keys_of(table))), data.draw(ignores))


one_tool = st.builds(
    Rubric,
    required_tools=st.lists(
        st.builds(ToolExpectation, name=st.just("search"), arguments=st.none() | ARGUMENTS,
                  match=st.sampled_from(["exact", "ignore", "subset"])),
        min_size=1, max_size=4,
    ).map(tuple),
    order=st.sampled_from(["unordered", "superset", "subset"]),
)  # fmt: skip


@SETTINGS
@given(
    raw_tables(tools=("search",), texts=('{"q": 0}', '{"q": 1}', '{"q": 2}', "{}")),
    st.lists(one_tool, min_size=1, max_size=3),
    st.data(),
)
def test_equals_the_reference_when_a_rubric_checks_one_tool_several_ways(
    table: pa.Table, pool: list[Rubric], data: st.DataObject
) -> None:
    """Matchings: the count per tool where each tool is checked one way, Python otherwise."""
    keys = keys_of(table)
    chosen = data.draw(
        st.lists(st.sampled_from(range(len(pool))), min_size=len(keys), max_size=len(keys))
    )
    check(table, RubricSet(turns={k: pool[i] for k, i in zip(keys, chosen, strict=True)}), None)


@settings(max_examples=10, deadline=None)
@given(st.integers(1, 40), st.integers(1, 8), st.integers(0, 3), rubric)
def test_equals_the_reference_on_repeated_turns(
    turns: int, calls: int, seed: int, extra: Rubric
) -> None:
    """Bench-like tables: many turns share their calls (judged once), a strict rubric on most."""
    table, _ = synthetic_table(turns, calls, seed)
    strict = Rubric(
        required_tools=tuple(ToolExpectation(name="search", arguments={"query": f"q{c}", "limit": 10},
                                             match="exact") for c in range(calls)),
        order="strict",
    )  # fmt: skip
    keys = keys_of(table)
    rubrics = RubricSet(default=extra, turns=dict.fromkeys(keys[: 2 * len(keys) // 3], strict))
    check(table, rubrics, None)
