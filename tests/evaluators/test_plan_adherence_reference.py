"""plan_adherence against a plain reference: one turn at a time, in Python, on generated tables.

The evaluator works column-wise over the whole table; `judge_turn` below reads one turn's spans
as dicts, walks its plan snapshots in order and says what the evaluator must say: the outcome,
score and label, and the evidence in the details. The hypothesis test compares the two row for
row on the shared generated tables (`trace_tables`) and on tables with wilder plans (named ids,
repeated texts, items without ids, `content` instead of `text`, plans that are not lists, plans
on LLM and AGENT spans, carried across turns).
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from plangate.evaluators import Rubric, RubricSet, evaluate
from plangate.replay import SCHEMA, build_table
from plangate.replay.schema import CONTROL_TOOLS, PLAN_TOOLS
from tests.evaluators.tables import trace_tables
from tests.evaluators.test_plan_adherence import CASES, Step, rows

Span = dict[str, Any]
Item = dict[str, Any]
DEFAULTS = {"max_bookkeeping_ratio": 1.5, "min_tracked_share": 0.5}
CLOSED = ("completed", "blocked", "failed")
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

# -- the reference ------------------------------------------------------------------------------


@dataclass
class Snapshot:
    """A plan as it stood after span `seq` of the turn (-1: the plan carried from earlier turns)."""

    seq: int
    items: list[Item]
    inherited: bool
    calls_before: int = 0
    """Tool calls made up to and including this span."""


@dataclass
class Occurrence:
    """One item in one snapshot, with the status it had in the item's previous snapshot."""

    snapshot: int
    item: Item
    key: str
    previous: str = ""


@dataclass
class Evidence:
    """What the components count, and the evidence lists the details carry."""

    work_calls: int = 0
    tracked_calls: int = 0
    untracked: list[str] = field(default_factory=list)
    several: list[str] = field(default_factory=list)
    max_in_progress: int = 0
    completions: int = 0
    unworked: list[str] = field(default_factory=list)
    plan_calls: int = 0
    items: int = 0
    dropped: list[str] = field(default_factory=list)
    checks: int = 0
    out_of_order: list[str] = field(default_factory=list)


def parse(text: str) -> list[Item]:
    try:
        value = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        return []
    return [i for i in value if isinstance(i, dict)] if isinstance(value, list) else []


def tool_of(span: Span) -> str:
    if span["tool_name"] is not None:
        return str(span["tool_name"])
    name = str(span["name"])
    return name[len("tool.") :] if name.startswith("tool.") else name


def ident(item: Item) -> str:
    return str(item.get("id", ""))


def words(item: Item) -> str:
    return str(item.get("text", item.get("content", "")))


def status(item: Item) -> str:
    return str(item.get("status", ""))


def needs(item: Item) -> list[str]:
    value = item.get("depends_on")
    if isinstance(value, str):
        return [value]
    return [str(v) for v in value] if isinstance(value, list) else []


def name(item: Item) -> str:
    return f"{ident(item)} {words(item)!r}" if ident(item) else repr(words(item))


def is_work(tool: str) -> bool:
    return tool not in PLAN_TOOLS and tool not in CONTROL_TOOLS


def occurrences(snapshots: list[Snapshot]) -> list[Occurrence]:
    """Every item of every snapshot, keyed, in key order then snapshot order."""
    items = [i for s in snapshots for i in s.items]
    named = any(needs(i) or (ident(i) and not ident(i).isdecimal()) for i in items)
    found: list[Occurrence] = []
    for index, snapshot in enumerate(snapshots):
        seen: dict[str, int] = defaultdict(int)
        for item in snapshot.items:
            base = ident(item) if named and ident(item) else words(item)
            found.append(Occurrence(index, item, f"{base}#{seen[base]}"))
            seen[base] += 1
    found.sort(key=lambda o: (o.key, o.snapshot))
    for before, after in zip(found, found[1:], strict=False):
        if before.key == after.key:
            after.previous = status(before.item)
    return found


def judge_turn(
    spans: list[Span],
    carried: str | None,
    four_status: bool,
    plan_expected: bool,
    limits: dict[str, float] = DEFAULTS,
) -> tuple[str, float | None, str, dict[str, Any]]:
    """One turn's (outcome, score, label, details) from its spans in order.

    From the session: the plan `carried` from its earlier turns and whether its plans ever show
    an item in progress (`four_status`); from the rubric: whether a plan is expected.
    """
    own = [
        Snapshot(seq, parse(s["plan"]), False)
        for seq, s in enumerate(spans)
        if s["plan"] is not None and s["span_kind"] != "AGENT"
    ]
    snapshots = ([Snapshot(-1, parse(carried), True)] if carried is not None else []) + own
    calls = [(seq, tool_of(s)) for seq, s in enumerate(spans) if s["span_kind"] == "TOOL"]
    for snapshot in snapshots:
        snapshot.calls_before = sum(1 for seq, _ in calls if seq <= snapshot.seq)
    found = occurrences(snapshots)
    seen = evidence(snapshots, found, calls, four_status)
    if not own or seen.items == 0:
        outcome = "fail" if plan_expected else "n/a"
        return outcome, None, "no plan", {"plan": False, "plan_expected": plan_expected}
    return verdict(seen, len(own), four_status, limits)


def evidence(
    snapshots: list[Snapshot], found: list[Occurrence], calls: list[tuple[int, str]], four: bool
) -> Evidence:
    seen = Evidence(plan_calls=sum(1 for _, tool in calls if tool in PLAN_TOOLS))
    track(seen, snapshots, calls, four)
    one_at_a_time(seen, snapshots, found)
    worked_on(seen, snapshots, found, calls)
    kept(seen, snapshots, found)
    dependency_order(seen, snapshots, found)
    return seen


def track(seen: Evidence, snapshots: list[Snapshot], calls: list[tuple[int, str]], four: bool):
    for number, (seq, tool) in enumerate(calls, start=1):
        if not is_work(tool):
            continue
        seen.work_calls += 1
        before = [s for s in snapshots if s.seq < seq]
        wanted = ("in_progress",) if four else ("pending", "in_progress")
        if before and any(status(i) in wanted for i in before[-1].items):
            seen.tracked_calls += 1
        else:
            seen.untracked.append(f"call {number} {tool}")


def one_at_a_time(seen: Evidence, snapshots: list[Snapshot], found: list[Occurrence]) -> None:
    for index, snapshot in enumerate(snapshots):
        if snapshot.inherited:
            continue
        active = [
            ident(o.item) or words(o.item)
            for o in found
            if o.snapshot == index and status(o.item) == "in_progress"
        ]
        seen.max_in_progress = max(seen.max_in_progress, len(active))
        if len(active) > 1:
            seen.several.append(
                f"after call {snapshot.calls_before}: items {', '.join(active)} in progress"
            )


def worked_on(
    seen: Evidence,
    snapshots: list[Snapshot],
    found: list[Occurrence],
    calls: list[tuple[int, str]],
) -> None:
    since: dict[str, int] = {}
    for o in found:
        snapshot, state = snapshots[o.snapshot], status(o.item)
        if state == "in_progress" and (o.previous != "in_progress" or snapshot.inherited):
            since[o.key] = o.snapshot
        if state != "completed" or o.previous == "completed" or snapshot.inherited:
            continue
        seen.completions += 1
        start = since[o.key] if o.previous == "in_progress" else o.snapshot - 1
        begin = snapshots[start] if start >= 0 else None
        lower = begin.seq if begin else -1
        work = [t for seq, t in calls if lower < seq <= snapshot.seq and is_work(t)]
        if work:
            continue
        at = begin.calls_before if begin else 0
        if at == 0:
            why = "since the turn began"
        elif o.previous == "in_progress":
            why = f"since it went in progress at call {at}"
        else:
            why = f"since the plan changed at call {at}"
        seen.unworked.append(
            f"item {name(o.item)} completed at call {snapshot.calls_before} with no work call {why}"
        )


def kept(seen: Evidence, snapshots: list[Snapshot], found: list[Occurrence]) -> None:
    last = len(snapshots) - 1
    for key in sorted({o.key for o in found}):
        mine = [o for o in found if o.key == key]
        closed = any(status(o.item) in CLOSED for o in mine)
        if closed and all(snapshots[o.snapshot].inherited for o in mine):
            continue  # closed in an earlier turn and not mentioned in this one
        seen.items += 1
        if not closed and all(o.snapshot != last for o in mine):
            seen.dropped.append(f"{name(mine[-1].item)} (last {status(mine[-1].item)})")


def dependency_order(seen: Evidence, snapshots: list[Snapshot], found: list[Occurrence]) -> None:
    for o in found:
        state, wanted = status(o.item), needs(o.item)
        started = state == "in_progress" and o.previous != "in_progress"
        done = state == "completed" and o.previous != "completed"
        if not (started or done) or not wanted or snapshots[o.snapshot].inherited:
            continue
        seen.checks += 1
        peers = [p.item for p in found if p.snapshot == o.snapshot]
        unmet = []
        for dependency in wanted:
            match = next((status(p) for p in peers if ident(p) == dependency), "missing")
            if match != "completed":
                unmet.append(f"{dependency} ({match})")
        if unmet:
            event = "completed" if done else "started"
            at = snapshots[o.snapshot].calls_before
            seen.out_of_order.append(
                f"item {ident(o.item)} {event} at call {at} before {', '.join(unmet)}"
            )


def verdict(
    seen: Evidence, snapshots: int, four: bool, limits: dict[str, float]
) -> tuple[str, float | None, str, dict[str, Any]]:
    work, plan = seen.work_calls, seen.plan_calls
    limit, least = limits["max_bookkeeping_ratio"], limits["min_tracked_share"]
    ratio = plan / work if work else None
    completed = seen.completions - len(seen.unworked)
    components: list[tuple[str, float | None, bool, str]] = [
        (
            "tracked_work",
            seen.tracked_calls / work if work else None,
            not work or seen.tracked_calls / work >= least,
            "untracked work",
        ),
        (
            "one_at_a_time",
            1 - len(seen.several) / snapshots,
            not seen.several,
            "several in progress",
        ),
        (
            "worked_on",
            completed / seen.completions if seen.completions else None,
            not seen.unworked,
            "completed without work",
        ),
        (
            "bookkeeping",
            None if ratio is None else 1.0 if ratio <= limit else limit / ratio,
            ratio is None or ratio <= limit,
            "bookkeeping",
        ),
        ("kept", 1 - len(seen.dropped) / seen.items, not seen.dropped, "dropped items"),
        (
            "dependency_order",
            1 - len(seen.out_of_order) / seen.checks if seen.checks else None,
            not seen.out_of_order,
            "dependency order",
        ),
    ]
    scores = [c[1] for c in components if c[1] is not None]
    failed = [c[3] for c in components if not c[2]]
    details = {
        "plan": True, "statuses": "four" if four else "two",
        "work_calls": work, "tracked_calls": seen.tracked_calls, "untracked": seen.untracked,
        "tracked_share": seen.tracked_calls / work if work else None,
        "snapshots": snapshots, "max_in_progress": seen.max_in_progress,
        "several_in_progress": seen.several, "completions": seen.completions,
        "worked_on": completed, "unworked": seen.unworked, "plan_calls": plan,
        "bookkeeping_ratio": ratio, "items": seen.items, "dropped": seen.dropped,
        "dependency_checks": seen.checks, "out_of_order": seen.out_of_order,
        "components": {c[0]: c[1] for c in components},
    }  # fmt: skip
    score = sum(scores) / len(scores) if scores else None
    return ("fail" if failed else "pass"), score, (failed[0] if failed else "adherent"), details


def reference(
    table: pa.Table, rubrics: RubricSet, limits: dict[str, float] = DEFAULTS
) -> dict[tuple[str, int], tuple[Any, ...]]:
    """Every turn's verdict, judged one turn at a time in session order."""
    turns: dict[tuple[str, int], list[tuple[int, Span]]] = defaultdict(list)
    for row, span in enumerate(table.to_pylist()):
        turns[(span["session_id"], span["turn_index"])].append((row, span))
    ordered = {
        key: [s for _, s in sorted(rows, key=_span_order)] for key, rows in sorted(turns.items())
    }
    four = defaultdict(bool)
    for (session, _), spans in ordered.items():
        plans = [s["plan"] for s in spans if s["plan"] is not None and s["span_kind"] != "AGENT"]
        four[session] |= any(status(i) == "in_progress" for p in plans for i in parse(p))
    carried: dict[str, str] = {}
    out = {}
    for key, spans in ordered.items():
        rubric = rubrics.lookup(*key)
        expected = rubric is not None and rubric.plan_expected is True
        out[key] = judge_turn(spans, carried.get(key[0]), four[key[0]], expected, limits)
        plans = [s["plan"] for s in spans if s["plan"] is not None and s["span_kind"] != "AGENT"]
        if plans:
            carried[key[0]] = plans[-1]
    return out


def _span_order(row_span: tuple[int, Span]) -> tuple[bool, datetime, int]:
    row, span = row_span
    return span["start_time"] is None, span["start_time"] or EPOCH, row


# -- generated tables with wilder plans ---------------------------------------------------------

STATUSES = ["pending", "in_progress", "completed", "blocked", "failed", "", "done"]
TOOLS = ["search", "open", "todo_write", "todo_update", "todo_read", "start_step", "finish"]
START = datetime(2026, 1, 1, tzinfo=UTC)


@st.composite
def wild_items(draw: st.DrawFn) -> Item:
    data: Item = {"status": draw(st.sampled_from(STATUSES))}
    ident = draw(st.sampled_from(["1", "2", "3", "a", "b", "", 4, None, "missing"]))
    if ident != "missing":
        data["id"] = ident
    words = draw(st.sampled_from(["check", "check", "a", "a b", "a#1", "1", "é 'quoted'"]))
    data[draw(st.sampled_from(["text", "text", "content"]))] = words
    deps = draw(st.sampled_from([None, [], ["a"], ["1", "b"], "2", ["z", "a"], [1]]))
    if deps is not None:
        data["depends_on"] = deps
    return data


@st.composite
def wild_plans(draw: st.DrawFn) -> str:
    shape = draw(st.integers(0, 12))
    if shape == 0:
        return draw(st.sampled_from(["not json", '{"id": 1}', "[1, 2]", "null"]))
    return json.dumps(draw(st.lists(wild_items(), max_size=4)))


@st.composite
def wild_tables(draw: st.DrawFn) -> pa.Table:
    rows: list[Span] = []
    for s in range(draw(st.integers(1, 2))):
        for t in range(draw(st.integers(1, 3))):
            rows += draw(_wild_turn(f"s{s}", t))
    if draw(st.booleans()):
        rows = draw(st.permutations(rows))
    return pa.Table.from_pydict({n: [r.get(n) for r in rows] for n in SCHEMA.names}, SCHEMA)


@st.composite
def _wild_turn(draw: st.DrawFn, session: str, turn: int) -> list[Span]:
    base = {"session_id": session, "turn_index": turn, "trace_id": f"{session}-{turn}",
            "status_code": "OK", "source": "test"}  # fmt: skip
    at = START + timedelta(hours=turn)
    plan = st.none() | wild_plans() if draw(st.booleans()) else st.none()
    spans = [{**base, "span_id": "a", "span_kind": "AGENT", "name": "agent.turn",
              "start_time": at, "plan": draw(st.none() | wild_plans())}]  # fmt: skip
    for n, tool in enumerate(draw(st.lists(st.sampled_from(TOOLS), max_size=8))):
        at += timedelta(seconds=1)
        kind = draw(st.sampled_from(["TOOL", "TOOL", "TOOL", "LLM", "CHAIN"]))
        spans.append(
            {**base, "span_id": f"x{n}", "span_kind": kind,
             "name": draw(st.sampled_from([f"tool.{tool}", tool])),
             "tool_name": tool if draw(st.booleans()) else None, "plan": draw(plan),
             "start_time": at if draw(st.integers(0, 6)) else None}
        )  # fmt: skip
    return spans


@st.composite
def rubric_sets(draw: st.DrawFn) -> RubricSet:
    default = draw(st.none() | st.builds(Rubric, plan_expected=st.sampled_from([None, True])))
    turns = draw(
        st.dictionaries(
            st.tuples(st.sampled_from(["s0", "s1", "a0", "b1"]), st.integers(0, 2)),
            st.builds(Rubric, plan_expected=st.sampled_from([None, True, False])),
            max_size=3,
        )
    )
    return RubricSet(default=default, turns=turns)


# -- the comparison -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("case", "steps", "expected"),
    [(c[0], c[1], c[3]) for c in CASES if not c[2]],
    ids=[c[0] for c in CASES if not c[2]],
)
def test_the_reference_scores_the_hand_built_turns_as_expected(
    case: str, steps: list[Step], expected: tuple[float | None, bool | None, str, str]
) -> None:
    score, passed, label, _ = expected
    row = reference(build_table(rows(steps)), RubricSet())[("s", 0)]
    outcome = {True: "pass", False: "fail", None: "n/a"}[passed]
    assert row[:3] == (outcome, pytest.approx(score) if score is not None else None, label)


LIMITS = st.sampled_from([{}, {"max_bookkeeping_ratio": 0.5, "min_tracked_share": 0.9}])


@settings(max_examples=80, deadline=None)
@given(st.one_of(trace_tables(), wild_tables()), rubric_sets(), LIMITS)
def test_the_evaluator_agrees_with_the_reference(
    table: pa.Table, rubrics: RubricSet, limits: dict[str, float]
) -> None:
    expected = reference(table, rubrics, {**DEFAULTS, **limits})
    scores = evaluate(
        table, rubrics, names=["plan_adherence"], params={"plan_adherence": limits}
    ).to_pylist()
    assert sorted((r["session_id"], r["turn_index"]) for r in scores) == sorted(expected)
    for row in scores:
        outcome, score, label, details = expected[(row["session_id"], row["turn_index"])]
        assert json.loads(row["details"]) == details, row["explanation"]
        if row["outcome"] == "error":  # an infrastructure failure, marked by the registry
            continue
        assert (row["outcome"], row["label"]) == (outcome, label), row["explanation"]
        if score is None:
            assert row["score"] is None
        else:
            assert row["score"] == pytest.approx(score, rel=1e-12, abs=1e-12)
