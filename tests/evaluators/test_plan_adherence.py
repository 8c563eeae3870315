"""plan_adherence on hand-built turns and real runs of the reference agent."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pyarrow as pa
import pytest

from plangate.evaluators import Rubric, RubricSet, evaluate
from plangate.harness import Agent, SimulatedModel, get_domain, load_variant
from plangate.replay import build_table, canonical_arguments
from plangate.replay._exporter import trace_table_provider

T0 = datetime(2026, 1, 1, tzinfo=UTC)
Plan = list[dict[str, Any]]
Step = tuple[str, Plan | None]


def item(
    key: str, status: str, *, deps: list[str] | None = None, reason: str = ""
) -> dict[str, Any]:
    """A plan item: numeric keys make todo items `task <n>`, named keys are dependency steps."""
    data: dict[str, Any] = {"id": key, "text": f"task {key}", "status": status}
    if deps is not None:
        data["depends_on"] = deps
    if reason:
        data["reason"] = reason
    return data


def todo(*states: str) -> Plan:
    """`todo("in_progress", "pending")` → items 1 and 2 with those statuses."""
    return [item(str(i), s) for i, s in enumerate(states, start=1)]


def rows(
    steps: list[Step], session: str = "s", turn: int = 0, offset: float = 0.0
) -> list[dict[str, Any]]:
    """One turn: an AGENT span, then per step an LLM span and a TOOL span carrying the plan."""
    trace = f"{session}-{turn}"

    def at(seconds: float) -> datetime:
        return T0 + timedelta(seconds=offset + seconds)

    out: list[dict[str, Any]] = [
        {"session_id": session, "turn_index": turn, "trace_id": trace, "span_id": "agent",
         "span_kind": "AGENT", "name": "agent.turn", "status_code": "OK", "source": "test",
         "start_time": at(0), "end_time": at(2 * len(steps) + 1)}
    ]  # fmt: skip
    for n, (name, plan) in enumerate(steps):
        common = {"session_id": session, "turn_index": turn, "trace_id": trace,
                  "parent_span_id": "agent", "status_code": "OK", "source": "test",
                  "iteration": n + 1}  # fmt: skip
        out.append(
            {**common, "span_id": f"llm-{n}", "span_kind": "LLM", "name": "llm.call",
             "start_time": at(2 * n + 0.1), "end_time": at(2 * n + 1)}
        )  # fmt: skip
        out.append(
            {**common, "span_id": f"tool-{n}", "span_kind": "TOOL", "name": f"tool.{name}",
             "tool_name": name, "tool_args": canonical_arguments({"n": n}),
             "start_time": at(2 * n + 1.1), "end_time": at(2 * n + 2),
             "plan": json.dumps(plan) if plan is not None else None}
        )  # fmt: skip
    return out


W: Step = ("search", None)
FINISH: Step = ("finish", None)
READ: Step = ("todo_read", None)


def write(plan: Plan) -> Step:
    return ("todo_write", plan)


def update(plan: Plan) -> Step:
    return ("todo_update", plan)


DILIGENT: list[Step] = [
    write(todo("pending", "pending")),
    update(todo("in_progress", "pending")),
    W,
    W,
    update(todo("completed", "pending")),
    update(todo("completed", "in_progress")),
    W,
    W,
    update(todo("completed", "completed")),
    FINISH,
]

A_B = [item("a", "pending", deps=[]), item("b", "pending", deps=["a"])]

CASES: list[tuple[str, list[Step], dict[str, Any], tuple[float | None, bool | None, str, str]]] = [
    ("no plan", [W, W, FINISH], {}, (None, None, "no plan", "not applicable: no plan")),
    (
        "diligent",
        DILIGENT,
        {},
        (1.0, True, "adherent", "4 of 4 work calls made while an item was in progress"),
    ),
    (
        "work before any item is in progress",
        [write(todo("pending")), W, W, update(todo("in_progress")), W, update(todo("completed"))],
        {},
        (
            (1 / 3 + 4) / 5,
            False,
            "untracked work",
            "1 of 3 work calls made while an item was in progress (untracked: call 2 search, "
            "call 3 search), below 0.5",
        ),
    ),
    (
        "min_tracked_share is a parameter",
        [write(todo("pending")), W, W, update(todo("in_progress")), W, update(todo("completed"))],
        {"min_tracked_share": 0.3},
        ((1 / 3 + 4) / 5, True, "adherent", "1 of 3 work calls"),
    ),
    (
        "two items in progress at once",
        [write(todo("in_progress", "in_progress")), W, W, update(todo("completed", "completed"))],
        {},
        (
            (1 + 1 / 2 + 1 + 1 + 1) / 5,
            False,
            "several in progress",
            "1 of 2 snapshots had several items in progress (after call 1: items 1, 2 in progress)",
        ),
    ),
    (
        "completed without work",
        [
            write(todo("pending", "pending")),
            update(todo("in_progress", "pending")),
            update(todo("completed", "pending")),
            update(todo("completed", "in_progress")),
            W,
            update(todo("completed", "completed")),
        ],
        {},
        (
            (1 + 1 + 1 / 2 + 1.5 / 5 + 1) / 5,
            False,
            "completed without work",
            "1 of 2 completed items were worked on (not: item 1 'task 1' completed at call 3 "
            "with no work call since it went in progress at call 2)",
        ),
    ),
    (
        "bookkeeping above the limit",
        [
            write(todo("pending")),
            update(todo("in_progress")),
            READ,
            READ,
            W,
            update(todo("completed")),
        ],
        {},
        (
            (1 + 1 + 1 + 1.5 / 5 + 1) / 5,
            False,
            "bookkeeping",
            "5 plan calls for 1 work call (ratio 5.00, above the limit 1.5)",
        ),
    ),
    (
        "max_bookkeeping_ratio is a parameter",
        [
            write(todo("pending")),
            update(todo("in_progress")),
            READ,
            READ,
            W,
            update(todo("completed")),
        ],
        {"max_bookkeeping_ratio": 5},
        (1.0, True, "adherent", "(ratio 5.00, within the limit 5)"),
    ),
    (
        "an item dropped without a word",
        [
            write(todo("pending", "pending")),
            update(todo("in_progress", "pending")),
            W,
            W,
            write([item("1", "completed")]),
        ],
        {},
        (
            (1 + 1 + 1 + 1 + 1 / 2) / 5,
            False,
            "dropped items",
            "1 of 2 items dropped without being completed, blocked or failed: 2 'task 2' (last pending)",
        ),
    ),
    (
        "a blocked item may leave the list",
        [
            write(todo("in_progress", "pending")),
            W,
            W,
            update([item("1", "completed"), item("2", "blocked", reason="needs approval")]),
            write([item("1", "completed")]),
        ],
        {},
        (1.0, True, "adherent", "no item dropped (2 items)"),
    ),
    (
        "a rewrite that renumbers the list drops nothing",
        [
            write(todo("in_progress", "pending")),
            W,
            # "task 2" is now item 1, "task 1" item 2: items are matched by text.
            write(
                [
                    {"id": "1", "text": "task 2", "status": "in_progress"},
                    {"id": "2", "text": "task 1", "status": "completed"},
                ]
            ),  # fmt: skip
            W,
            update(
                [
                    {"id": "1", "text": "task 2", "status": "completed"},
                    {"id": "2", "text": "task 1", "status": "completed"},
                ]
            ),  # fmt: skip
        ],
        {},
        (1.0, True, "adherent", "2 of 2 completed items were worked on"),
    ),
    (
        "two items with the same text stay apart",
        [
            write(
                [
                    {"id": "1", "text": "check", "status": "in_progress"},
                    {"id": "2", "text": "check", "status": "pending"},
                ]
            ),  # fmt: skip
            W,
            update(
                [
                    {"id": "1", "text": "check", "status": "completed"},
                    {"id": "2", "text": "check", "status": "in_progress"},
                ]
            ),  # fmt: skip
            W,
            update(
                [
                    {"id": "1", "text": "check", "status": "completed"},
                    {"id": "2", "text": "check", "status": "completed"},
                ]
            ),  # fmt: skip
        ],
        {},
        (1.0, True, "adherent", "2 of 2 completed items were worked on; 3 plan calls for 2 work"),
    ),
    (
        "two-status plan: work counts while an item is open",
        [
            write(todo("pending", "pending")),
            W,
            update(todo("completed", "pending")),
            W,
            update(todo("completed", "completed")),
        ],  # fmt: skip
        {},
        (1.0, True, "adherent", "2 of 2 work calls made while an item was open"),
    ),
    (
        "two-status plan: work after everything is closed",
        [write(todo("pending")), W, update(todo("completed")), W, W],
        {},
        (
            (1 / 3 + 4) / 5,
            False,
            "untracked work",
            "1 of 3 work calls made while an item was open (untracked: call 4 search, call 5 search)",
        ),
    ),
    (
        "two-status plan: completed with no work since the last plan change",
        [
            write(todo("pending", "pending")),
            W,
            update(todo("completed", "pending")),
            update(todo("completed", "completed")),
        ],  # fmt: skip
        {},
        (
            (1 + 1 + 1 / 2 + 1 / 2 + 1) / 5,
            False,
            "completed without work",
            "item 2 'task 2' completed at call 4 with no work call since the plan changed at call 3",
        ),
    ),
    (
        "dependency started before it was ready",
        [
            ("create_plan", A_B),
            ("start_step", [A_B[0], {**A_B[1], "status": "in_progress"}]),
            W,
            ("mark_step_done", [A_B[0], {**A_B[1], "status": "completed"}]),
            (
                "start_step",
                [{**A_B[0], "status": "in_progress"}, {**A_B[1], "status": "completed"}],
            ),
            W,
            (
                "mark_step_done",
                [{**A_B[0], "status": "completed"}, {**A_B[1], "status": "completed"}],
            ),
        ],
        {"max_bookkeeping_ratio": 3},
        (
            5 / 6,
            False,
            "dependency order",
            "2 of 2 starts and completions came before their dependencies completed: "
            "item b started at call 2 before a (pending), item b completed at call 4 before a (pending)",
        ),
    ),
    (
        "dependency order respected",
        [
            ("create_plan", A_B),
            ("start_step", [{**A_B[0], "status": "in_progress"}, A_B[1]]),
            W,
            ("mark_step_done", [{**A_B[0], "status": "completed"}, A_B[1]]),
            (
                "start_step",
                [{**A_B[0], "status": "completed"}, {**A_B[1], "status": "in_progress"}],
            ),
            W,
            (
                "mark_step_done",
                [{**A_B[0], "status": "completed"}, {**A_B[1], "status": "completed"}],
            ),
        ],
        {"max_bookkeeping_ratio": 3},
        (1.0, True, "adherent", "dependency order respected in 2 starts and completions"),
    ),
]


@pytest.mark.parametrize(("case", "steps", "params", "expected"), CASES, ids=[c[0] for c in CASES])
def test_plan_adherence(
    case: str,
    steps: list[Step],
    params: dict[str, Any],
    expected: tuple[float | None, bool | None, str, str],
) -> None:
    score, passed, label, fragment = expected
    row = evaluate(
        build_table(rows(steps)), names=["plan_adherence"], params={"plan_adherence": params}
    ).to_pylist()[0]
    assert (row["passed"], row["label"]) == (passed, label), row["explanation"]
    assert fragment in row["explanation"]
    if score is None:
        assert row["score"] is None
    else:
        assert row["score"] == pytest.approx(score)


def test_every_component_is_in_the_details() -> None:
    row = evaluate(build_table(rows(DILIGENT)), names=["plan_adherence"]).to_pylist()[0]
    details = json.loads(row["details"])
    assert details["components"] == {
        "tracked_work": 1.0, "one_at_a_time": 1.0, "worked_on": 1.0, "bookkeeping": 1.0,
        "kept": 1.0, "dependency_order": None,
    }  # fmt: skip
    assert details["tracked_share"] == 1.0
    assert details["bookkeeping_ratio"] == 1.25
    assert (details["work_calls"], details["plan_calls"], details["completions"]) == (4, 5, 2)
    assert (details["snapshots"], details["max_in_progress"], details["items"]) == (5, 1, 2)
    assert details["statuses"] == "four"


@pytest.mark.parametrize(("plan_expected", "passed"), [(True, False), (False, None), (None, None)])
def test_a_turn_without_a_plan_fails_only_when_the_rubric_expects_one(
    plan_expected: bool | None, passed: bool | None
) -> None:
    """Expected and missing is a failure; otherwise there is nothing to adhere to: n/a."""
    rubrics = RubricSet(default=Rubric(plan_expected=plan_expected))
    row = evaluate(build_table(rows([W, FINISH])), rubrics, names=["plan_adherence"]).to_pylist()[0]
    assert (row["score"], row["passed"], row["label"]) == (None, passed, "no plan")
    assert ("the rubric expects one" in row["explanation"]) is (plan_expected is True)


def test_the_plan_carries_over_from_the_sessions_earlier_turns() -> None:
    # Session "a": turn 1 works on item 2, which turn 0 left in progress, before any plan call.
    a0 = [write(todo("in_progress", "pending")), W, W, update(todo("completed", "in_progress"))]
    a1 = [W, W, update(todo("completed", "completed"))]
    # Session "b": turn 1 writes a new list; item 2, left pending by turn 0, silently vanishes.
    b0 = [write(todo("in_progress", "pending")), W, W, update(todo("completed", "pending"))]
    b1 = [write([item("9", "in_progress")]), W, W, update([item("9", "completed")])]
    table = build_table(
        rows(a0, "a") + rows(a1, "a", turn=1, offset=100)
        + rows(b0, "b") + rows(b1, "b", turn=1, offset=100)
    )  # fmt: skip
    result = {
        (r["session_id"], r["turn_index"]): r
        for r in evaluate(table, names=["plan_adherence"]).to_pylist()
    }
    assert [result[k]["passed"] for k in [("a", 0), ("a", 1), ("b", 0)]] == [True, True, True]
    assert "2 of 2 work calls made while an item was in progress" in result[("a", 1)]["explanation"]
    assert "1 of 1 completed items were worked on" in result[("a", 1)]["explanation"]
    assert result[("b", 1)]["label"] == "dropped items"
    assert "2 'task 2' (last pending)" in result[("b", 1)]["explanation"]


# -- real runs ---------------------------------------------------------------------------------


async def real_run(behaviour: str, variant: str = "alyx") -> pa.Table:
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
    return exporter.table()


async def test_diligent_adheres_and_the_churner_spends_more_on_bookkeeping() -> None:
    diligent = evaluate(await real_run("diligent"), names=["plan_adherence"]).to_pylist()[0]
    churner = evaluate(await real_run("churner"), names=["plan_adherence"]).to_pylist()[0]
    assert diligent["passed"], diligent["explanation"]
    assert diligent["label"] == "adherent"
    calm, busy = json.loads(diligent["details"]), json.loads(churner["details"])
    assert busy["bookkeeping_ratio"] > calm["bookkeeping_ratio"]
    assert busy["plan_calls"] > calm["plan_calls"]
    assert busy["work_calls"] == calm["work_calls"]
    assert churner["score"] < diligent["score"]
