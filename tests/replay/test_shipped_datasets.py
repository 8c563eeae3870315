"""The golden datasets that ship in datasets/: valid, and replayed exactly, turn by turn."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from replay import read_dataset, replay_turn, validate_dataset
from tests.conftest import REPO

DATASETS = sorted(p for p in (REPO / "datasets").iterdir() if (p / "manifest.json").is_file())


def test_at_least_three_datasets_sixty_sessions_and_150_turns_ship() -> None:
    counts = [json.loads((p / "manifest.json").read_text())["counts"] for p in DATASETS]
    assert len(DATASETS) >= 3
    assert sum(c["sessions"] for c in counts) >= 60
    assert sum(c["turns"] for c in counts) >= 150


@pytest.mark.parametrize("path", DATASETS, ids=[p.name for p in DATASETS])
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
            variant="naive",
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
        replay_turn(dataset, planned["session_id"], planned["turn_index"], variant="naive")
    )
    assert strict.error is not None and strict.error.startswith(
        "model call 1 no longer matches the recording: offered tools"
    )
