"""What the framework examples' tests share: the golden's sessions, and checks on them.

Each turn names its tasks in the support domain's words (so the simulated models know them)
and carries a rubric of the tools those tasks need. Beside the request, a turn says how many
tasks it asks for and how many desk calls they take: that, and nothing recorded, decides which
turns a variant must lose (`needs_over`, `work_over`).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from plangate.evaluators import RubricSet, evaluate, rubric_from_dict
from plangate.replay import GoldenDataset, SessionRequest, replay_turn
from plangate.replay.agents import AgentDriver, AgentSpec
from tests.conftest import REPO
from tests.helpers import plangate


@dataclass(frozen=True, slots=True)
class Turn:
    request: str
    required: tuple[str, ...]
    """The tools the turn's rubric requires."""
    tasks: int
    """How many of the domain's tasks the request names."""
    work: int
    """How many desk calls those tasks take."""

    def last_work_call(self) -> int:
        """Which model call makes the turn's last desk call, for a diligent model with the task
        list on: after the plan and each task marked in progress (and the ones before it marked
        completed); with one task, no plan."""
        return self.work if self.tasks == 1 else self.work + 2 * self.tasks


TRACK = Turn("Where is order O-7003? Track the shipment.", ("track_shipment",), 1, 1)
POLICY = Turn("What is your refund policy for damaged items?", ("get_refund_policy",), 1, 1)
HISTORY = Turn("Show Grace Liu's order history.", ("find_customer", "list_orders"), 1, 2)
CANCEL = Turn("Cancel the espresso machine order O-7004 for Priya Raman.", ("cancel_order",), 1, 1)
EVERYTHING = Turn(
    "Show Grace Liu's order history, track the shipment of order O-7003, cancel the espresso "
    "machine order O-7004, update Aiko Tanaka's shipping address to 12 Harbor Lane, Portland "
    "97201, and check the refund policy.",
    ("list_orders", "track_shipment", "cancel_order", "update_address", "get_refund_policy"),
    5,
    7,
)
DANA = Turn(
    "Look up Dana Whitfield's latest order, check the refund policy, refund the damaged "
    "blender, and email Dana a refund confirmation.",
    ("get_order", "get_refund_policy", "refund_item", "send_email"),
    4,
    6,
)
DANA_SHORT = Turn(
    "Look up Dana Whitfield's latest order, refund the damaged blender, and email Dana a refund "
    "confirmation.",
    ("get_order", "refund_item", "send_email"),
    3,
    5,
)
TRACK_POLICY = Turn(
    "Track the shipment of order O-7003, then tell me the refund policy.",
    ("track_shipment", "get_refund_policy"),
    2,
    2,
)
TELEVISION = Turn(
    "Samuel Okafor's television from order O-7002 arrived broken: check the refund policy and "
    "refund the television.",
    ("escalate", "get_refund_policy"),
    2,
    2,
)
MOVED = Turn(
    "Aiko Tanaka moved: please update her address to 12 Harbor Lane, Portland 97201, then track "
    "the shipment of order O-7003 and check the refund policy.",
    ("update_address", "track_shipment", "get_refund_policy"),
    3,
    4,
)
CANCEL_TRACK = Turn(
    "Cancel the espresso machine order O-7004 and track the shipment of order O-7003.",
    ("cancel_order", "track_shipment"),
    2,
    2,
)
GRACE_AIKO = Turn(
    "Show Grace Liu's order history, update Aiko Tanaka's shipping address to 12 Harbor Lane, "
    "Portland 97201, and check the refund policy.",
    ("list_orders", "update_address", "get_refund_policy"),
    3,
    5,
)
WINDOW_HISTORY = Turn(
    "What is the return window? Also show Grace Liu's order history.",
    ("get_refund_policy", "list_orders"),
    2,
    3,
)

CONVERSATIONS: tuple[tuple[Turn, ...], ...] = (
    (EVERYTHING, TRACK),
    (DANA, POLICY),
    (TRACK_POLICY, HISTORY),
    (TELEVISION, CANCEL),
    (MOVED, HISTORY),
    (DANA_SHORT, TRACK),
    (CANCEL_TRACK, GRACE_AIKO),
    (WINDOW_HISTORY,),
    (POLICY, DANA_SHORT, TRACK_POLICY),
    (TRACK, MOVED),
)
SESSIONS: list[SessionRequest] = [
    SessionRequest(
        session_id=f"desk-{i:02d}",
        requests=tuple(t.request for t in turns),
        rubrics=tuple({"required_tools": list(t.required)} for t in turns),
    )
    for i, turns in enumerate(CONVERSATIONS)
]
TURNS = {(f"desk-{i:02d}", k): t for i, ts in enumerate(CONVERSATIONS) for k, t in enumerate(ts)}
SOME = ("desk-03", "desk-04", "desk-06", "desk-07")
"""A few sessions with turns on both sides of each variant's limit, for the quicker checks."""


def some_sessions() -> list[SessionRequest]:
    return [s for s in SESSIONS if s.session_id in SOME]


def some(turns: set[tuple[str, int]]) -> set[tuple[str, int]]:
    return {key for key in turns if key[0] in SOME}


def needs_over(calls: int) -> set[tuple[str, int]]:
    """The turns whose desk calls a diligent model with the task list cannot all make in
    `calls` model calls."""
    return {key for key, turn in TURNS.items() if turn.last_work_call() > calls}


def work_over(calls: int) -> set[tuple[str, int]]:
    """The turns whose tasks take more than `calls` desk calls (what `sim:forgetful` can do
    before the request leaves its window, unless the task list keeps it in view)."""
    return {key for key, turn in TURNS.items() if turn.work > calls}


def check_trajectories(dataset: GoldenDataset) -> None:
    """Every turn finished and called every tool its rubric requires; task_completion passes."""
    turns = dataset.turns.to_pylist()
    assert [(t["session_id"], t["turn_index"]) for t in turns] == sorted(TURNS)
    for row in turns:
        called = {s.split()[1] for s in json.loads(row["steps"]) if s.startswith("call ")}
        turn = TURNS[row["session_id"], row["turn_index"]]
        assert row["stop_reason"] == "finished", row
        assert set(turn.required) <= called, (row["session_id"], row["turn_index"], called)
    assert failed_turns(dataset) == set()


def failed_turns(dataset: GoldenDataset) -> set[tuple[str, int]]:
    """The turns task_completion fails, under the rubrics recorded with them."""
    rubrics = RubricSet(
        turns={
            (t["session_id"], t["turn_index"]): rubric_from_dict(json.loads(t["rubric"]))
            for t in dataset.turns.to_pylist()
        }
    )
    scores = evaluate(dataset.spans, rubrics, names=["task_completion"]).to_pylist()
    assert len(scores) == dataset.turns.num_rows
    return {(s["session_id"], s["turn_index"]) for s in scores if s["outcome"] != "pass"}


async def replay_all(
    dataset: GoldenDataset, agent: AgentSpec, model: str = "cassette", jobs: int = 2
) -> list[Any]:
    """Every turn replayed through `agent`, `jobs` at a time (default: the strict cassette)."""
    keys = [(t["session_id"], t["turn_index"]) for t in dataset.turns.to_pylist()]
    async with AgentDriver(agent, jobs=jobs) as driver:
        return await asyncio.gather(
            *(replay_turn(dataset, s, k, agent=driver, model=model) for s, k in keys)
        )


def why_stopped(results: Iterable[Any]) -> list[str]:
    """Each turn that did not finish, with its AGENT row's status message (what failed)."""
    told = []
    for r in results:
        if r.stop_reason == "finished":
            continue
        rows = [] if r.table is None else r.table.to_pylist()
        status = [row["status_message"] for row in rows if row["span_kind"] == "AGENT"]
        told.append(f"{r.session_id} turn {r.turn_index}: {r.stop_reason}: {status or r.error}")
    return told


def gate(
    folder: Path,
    golden: Path,
    agent: str,
    model: str,
    candidate: str,
    sessions: Iterable[str] | None = None,
    both: str = "",
) -> dict[str, Any]:
    """Run `plangate gate` (the real command line): baseline `agent` against `candidate`.

    `candidate` holds the candidate side's extra TOML lines; `both` the lines both sides share
    (an agent's `mcp` table, say). Two repeats a side, and no noise floor: the simulated models
    are deterministic, so the baseline's extra runs against itself would tell nothing and double
    its cost.
    """
    chosen = f"sessions = {json.dumps(list(sessions))}" if sessions is not None else ""
    path = folder / "gate.toml"
    path.write_text(
        f"""
[gate]
repeats = 2
noise_floor = false
[[datasets]]
path = "{golden}"
{chosen}
[baseline]
agent = "{agent}"
model = "{model}"
{both}
[candidate]
agent = "{agent}"
model = "{model}"
{both}
{candidate}
[evaluators.task_completion]
""",
        encoding="utf-8",
    )
    done = plangate("gate", str(path), "-o", str(folder / "out"), cwd=REPO)
    verdict = json.loads((folder / "out" / "verdict.json").read_text(encoding="utf-8"))
    return {"exit": done.returncode, "output": done.stdout + done.stderr, **verdict}


def assert_caught(verdict: dict[str, Any], expected: set[tuple[str, int]]) -> None:
    """The gate failed on task completion, regressing exactly the `expected` turns."""
    assert verdict["exit"] == 1, verdict["output"]
    (completion,) = [e for e in verdict["evaluators"] if e["evaluator"] == "task_completion"]
    assert completion["failed"] is True
    assert regressed(verdict) == expected
    assert completion["regressed"] == len(expected)


def regressed(verdict: dict[str, Any]) -> set[tuple[str, int]]:
    """The cases whose task_completion regressed."""
    return {
        (c["session_id"], c["turn_index"])
        for c in verdict["cases"]
        if c["evaluator"] == "task_completion" and c["status"] == "regressed"
    }


def keys(rows: Iterable[Any]) -> list[tuple[str, int]]:
    return [(r.session_id, r.turn_index) for r in rows]
