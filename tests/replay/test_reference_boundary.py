"""plangate's own agent behind the agent boundary (`python:plangate.replay.agents:reference`).

Through the boundary it knows only the `TurnInput`: its model at the turn's endpoint, its
domain's tools `hermetic`, its session as the opaque state, its spans sent over OTLP. Recorded
that way, the support desk's sessions (44 turns, later ones restored from the state the one
before returned) give the same trajectories and the same verdict on every evaluator as the reference
agent run in process, for both variants and both models; every turn replays identically under
the strict cassette; and `compare` tells the variants apart exactly as it does in process.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from plangate.evaluators import RubricSet, evaluate, rubric_from_dict
from plangate.replay import GoldenDataset, load_requests, record, replay_turn, write_dataset
from plangate.replay.agents import AgentDriver, AgentSpec, record_agent
from tests.conftest import REPO
from tests.helpers import plangate

REFERENCE = "python:plangate.replay.agents:reference"
SESSIONS = load_requests(
    (REPO / "datasets" / "requests" / "support-desk.json").read_text(encoding="utf-8"), "desk"
)
TURNS = sum(len(s.requests) for s in SESSIONS)


def behind(variant: str) -> AgentSpec:
    return AgentSpec.of(REFERENCE, {"kwargs": {"variant": variant}})


def through_boundary(variant: str, model: str) -> GoldenDataset:
    recorded = record_agent(SESSIONS, name="desk-boundary", agent=behind(variant), model=model)
    return asyncio.run(recorded)


def in_process(variant: str, model: str) -> GoldenDataset:
    recorded = record(SESSIONS, name="desk", variant=variant, model=model, domain="support")
    return asyncio.run(recorded)


def steps(dataset: GoldenDataset, plans: bool = True) -> dict[tuple[str, int], list[str]]:
    """Each turn's steps; without `plans`, the plan snapshots only the harness itself sees."""
    return {
        (t["session_id"], t["turn_index"]): [
            s for s in json.loads(t["steps"]) if plans or not s.startswith("plan ")
        ]
        for t in dataset.turns.to_pylist()
    }


def verdicts(dataset: GoldenDataset) -> dict[tuple[str, int, str], str]:
    """Every evaluator's outcome on every turn, under the rubrics recorded with the turns."""
    rubrics = RubricSet(
        turns={
            (t["session_id"], t["turn_index"]): rubric_from_dict(json.loads(t["rubric"]))
            for t in dataset.turns.to_pylist()
            if t["rubric"]
        }
    )
    return {
        (r["session_id"], r["turn_index"], r["evaluator"]): r["outcome"]
        for r in evaluate(dataset.spans, rubrics).to_pylist()
    }


@pytest.mark.parametrize(
    ("variant", "model"), [("alyx", "sim:diligent"), ("naive", "sim:forgetful")]
)
def test_the_same_trajectories_and_verdicts_as_in_process(variant: str, model: str) -> None:
    boundary, native = through_boundary(variant, model), in_process(variant, model)
    assert steps(boundary) == steps(native, plans=False)
    assert len(steps(boundary)) == TURNS == 44
    assert verdicts(boundary) == verdicts(native)
    assert {"pass", "fail"} <= set(verdicts(boundary).values())  # not a vacuous match
    # Its own spans, not the endpoint's view: every span the harness makes in process is there.
    names = set(boundary.spans.column("name").to_pylist())
    assert set(native.spans.column("name").to_pylist()) <= names


def test_every_turn_replays_identically_under_the_strict_cassette() -> None:
    golden = through_boundary("alyx", "sim:diligent")

    async def replay_all() -> list[object]:
        keys = [(t["session_id"], t["turn_index"]) for t in golden.turns.to_pylist()]
        async with AgentDriver(behind("alyx"), jobs=2) as driver:
            return await asyncio.gather(*(replay_turn(golden, s, k, agent=driver) for s, k in keys))

    results = asyncio.run(replay_all())
    assert [(r.error, r.divergence) for r in results] == [(None, None)] * TURNS  # type: ignore[attr-defined]


def test_compare_tells_the_variants_apart_as_in_process(tmp_path: Path) -> None:
    golden = write_dataset(through_boundary("alyx", "sim:diligent"), tmp_path / "boundary")
    native = write_dataset(in_process("alyx", "sim:diligent"), tmp_path / "native")
    sides = []
    for variant in ("alyx", "naive"):
        side = tmp_path / f"{variant}.toml"
        side.write_text(f'agent = "{REFERENCE}"\n[kwargs]\nvariant = "{variant}"\n')
        sides.append(str(side))

    def compare(dataset: Path, *chosen: str) -> dict[str, object]:
        gate = tmp_path / f"gate-{dataset.name}.toml"
        gate.write_text(
            f'[gate]\nrepeats = 1\n[[datasets]]\npath = "{dataset}"\n[baseline]\nvariant = "alyx"\n'
            '[candidate]\nvariant = "alyx"\n[evaluators.task_completion]\n'
        )
        done = plangate(
            "compare", *chosen, "--gate", str(gate), "--model", "sim:forgetful", "--json",
            cwd=REPO,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)  # type: ignore[no-any-return]

    through = compare(golden, *sides)["scores"][1]
    direct = compare(native, "alyx", "naive")["scores"][1]
    assert (through["worse"], through["better"]) == (direct["worse"], direct["better"])  # type: ignore[index]
    assert through["worse"] >= 2 and through["better"] == 0  # type: ignore[index,operator]
