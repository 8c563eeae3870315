"""The golden datasets that ship in datasets/: valid, and replayed exactly, turn by turn."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pyarrow.compute as pc
import pytest

from plangate.replay import ReferenceAgent, read_dataset, replay_turn, validate_dataset
from tests.conftest import REPO

DATASETS = sorted(p for p in (REPO / "datasets").iterdir() if (p / "manifest.json").is_file())
RECORDED = [p for p in DATASETS if p.name != "third-party"]  # recorded with our harness


def test_at_least_three_datasets_sixty_sessions_and_150_turns_ship() -> None:
    counts = [json.loads((p / "manifest.json").read_text())["counts"] for p in DATASETS]
    assert len(DATASETS) >= 3
    assert sum(c["sessions"] for c in counts) >= 60
    assert sum(c["turns"] for c in counts) >= 150


@pytest.mark.parametrize("path", RECORDED, ids=[p.name for p in RECORDED])
def test_every_turn_replays_exactly_with_its_recording_variant_and_the_strict_cassette(
    path: Path,
) -> None:
    assert validate_dataset(path) == []
    dataset = read_dataset(path)
    turns = [(r["session_id"], r["turn_index"]) for r in dataset.turns.to_pylist()]

    async def replay_all() -> list[tuple[tuple[str, int], object, object]]:
        out = []
        for session_id, turn_index in turns:
            result = await replay_turn(dataset, session_id, turn_index)
            out.append(((session_id, turn_index), result.divergence, result.error))
        return out

    failures = [
        (key, d, e) for key, d, e in asyncio.run(replay_all()) if d is not None or e is not None
    ]
    assert failures == []


def test_another_variant_diverges_and_the_report_names_the_first_step() -> None:
    dataset = read_dataset(REPO / "datasets" / "observability-core")
    planned = next(
        r
        for r in dataset.turns.to_pylist()
        if json.loads(r["steps"])[0].startswith("call todo_write")
    )
    result = asyncio.run(
        replay_turn(
            dataset,
            planned["session_id"],
            planned["turn_index"],
            agent=ReferenceAgent("naive"),
            model="sim:diligent",
        )
    )
    assert result.divergence is not None and result.divergence.step == 0
    assert result.divergence.recorded is not None and result.divergence.recorded.startswith(
        "call todo_write"
    )
    assert result.divergence.replayed is not None and not result.divergence.replayed.startswith(
        "call todo_write"
    )
    strict = asyncio.run(
        replay_turn(
            dataset, planned["session_id"], planned["turn_index"], agent=ReferenceAgent("naive")
        )
    )
    assert strict.error is not None and strict.error.startswith(
        "model call 1 no longer matches the recording: offered tools"
    )


def test_third_party_goldens_validate_and_keep_the_publishers_outcomes() -> None:
    from plangate.evaluators import evaluate, repeat_scores

    path = REPO / "datasets" / "third-party"
    assert validate_dataset(path) == []
    dataset = read_dataset(path)
    sources = set(dataset.sessions["source"].to_pylist())
    assert sources == {"tau-bench", "tau2", "swe-agent"}
    tau = dataset.spans.filter(pc.equal(dataset.spans["source"], "tau-bench"))
    hats = [
        round(r.pass_hat_k or 0, 3) for r in repeat_scores(evaluate(tau, names=["task_completion"]))
    ]
    assert hats == [0.42, 0.273, 0.22, 0.2]


def test_the_context_golden_holds_large_results_by_reference_and_checkpoints() -> None:
    dataset = read_dataset(REPO / "datasets" / "context-management")
    messages = [m for r in dataset.turns.to_pylist() for m in json.loads(r["messages"])]
    assert sum("[Stored as ref-" in m["content"] for m in messages) >= 3
    agents = [r for r in dataset.spans.to_pylist() if r["span_kind"] == "AGENT"]
    assert sum('"checkpoint"' in (r["events"] or "") for r in agents) >= 2
    # The state before each turn is what it was then, not what the turn made of it.
    first_turns = [r for r in dataset.turns.to_pylist() if r["turn_index"] == 0]
    assert all(
        json.loads(r["features_before"])["result_references"]["results"] == {} for r in first_turns
    )
