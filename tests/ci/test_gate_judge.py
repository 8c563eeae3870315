"""The gate asks the LLM judge through a local endpoint once, then replays it from the cassette.

A copy of a golden dataset whose turns ask the judge a question; both sides replay the
recording, so both show the judge the same turn: the first side's questions are asked and
recorded, the second side's are served from the cassette. With the endpoint gone the gate gives
the same verdict from the cassette alone.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from plangate.ci.gate import GateFileError, gate_with_reports, load_gate
from plangate.replay import read_dataset, write_dataset
from tests.chat_server import ChatServer, completion
from tests.conftest import REPO

SESSION = "sup-001"
QUESTION = "Did the agent answer what the user asked?"


def judged_dataset(folder: Path) -> Path:
    """support-desk with a judge question on every turn of `SESSION`."""
    dataset = read_dataset(REPO / "datasets" / "support-desk")
    rubrics = []
    for session, text in zip(
        dataset.turns["session_id"].to_pylist(), dataset.turns["rubric"].to_pylist(), strict=True
    ):
        rubric = json.loads(text) if text else {}
        if session == SESSION:
            rubric["judge"] = {"question": QUESTION, "model": "openai:judge-1"}
        rubrics.append(json.dumps(rubric))
    turns = dataset.turns.set_column(
        dataset.turns.schema.get_field_index("rubric"), "rubric", pa.array(rubrics, pa.string())
    )
    return write_dataset(dataclasses.replace(dataset, turns=turns), folder / "judged")


def gate_file(folder: Path, dataset: Path) -> Path:
    """A gate on one dataset: the judge's cassette is the dataset's `judge.jsonl`."""
    gate = folder / "gate.toml"
    gate.write_text(
        f"""
[gate]
repeats = 1
noise_floor = false
[[datasets]]
path = "{dataset}"
sessions = ["{SESSION}"]
[baseline]
variant = "alyx"
[candidate]
variant = "alyx"
[evaluators.judge]
min_pass_rate = 1.0
params = {{ jobs = 1 }}
""",
        encoding="utf-8",
    )
    return gate


def verdict(word: str) -> Any:
    return completion(json.dumps({"verdict": word, "reason": f"it did ({word})"}))


def test_the_gate_records_the_judge_once_and_replays_it_without_the_endpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dataset = judged_dataset(tmp_path)
    turns = sum(s == SESSION for s in read_dataset(dataset).turns["session_id"].to_pylist())
    gate = gate_file(tmp_path, dataset)
    with ChatServer() as server:
        monkeypatch.setenv("PLANGATE_OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("PLANGATE_OPENAI_API_KEY", "test-key")
        server.enqueue(*(verdict("pass") for _ in range(turns)))
        recorded, _ = gate_with_reports(gate, tmp_path / "recorded", judge={"mode": "record"})
        assert len(server.requests) == turns  # the candidate's identical turns: from the cassette
    assert len((dataset / "judge.jsonl").read_text().splitlines()) == turns
    judge = next(v for v in recorded.evaluators if v.evaluator == "judge")
    assert (judge.cases, judge.candidate_pass_rate, judge.regressed) == (turns, 1.0, 0)
    assert recorded.exit_code == 0

    replayed, _ = gate_with_reports(gate, tmp_path / "replayed")  # replay: the default
    again = next(v for v in replayed.evaluators if v.evaluator == "judge")
    assert dataclasses.asdict(again) == dataclasses.asdict(judge)
    assert replayed.exit_code == 0


def test_judge_flags_need_a_gate_that_runs_the_judge(tmp_path: Path) -> None:
    gate = tmp_path / "gate.toml"
    gate.write_text(
        f'[[datasets]]\npath = "{REPO / "datasets" / "support-desk"}"\n'
        '[baseline]\nvariant = "alyx"\n[candidate]\nvariant = "alyx"\n[evaluators.task_completion]\n',
        encoding="utf-8",
    )
    with pytest.raises(GateFileError, match=r"the gate runs no judge; add \[evaluators.judge\]"):
        gate_with_reports(gate, tmp_path / "out", judge={"mode": "live"})


def test_a_cassette_named_in_the_gate_file_is_relative_to_its_folder(tmp_path: Path) -> None:
    folder = tmp_path / "ci"
    folder.mkdir()
    gate = folder / "gate.toml"
    dataset = REPO / "datasets" / "support-desk"
    gate.write_text(
        f'[[datasets]]\npath = "{dataset}"\n[[datasets]]\npath = "{dataset}"\n'
        '[baseline]\nvariant = "alyx"\n[candidate]\nvariant = "alyx"\n'
        '[evaluators.judge]\nparams = { cassette = "goldens/judge.jsonl" }\n',
        encoding="utf-8",
    )
    assert load_gate(gate).evaluators["judge"].params["cassette"] == str(
        folder / "goldens" / "judge.jsonl"
    )
