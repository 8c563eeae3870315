"""`plangate record`, `dataset validate`, `dataset from-traces`, `replay`, `eval --rubric DATASET`."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.helpers import plangate

REQUESTS = [
    {
        "session_id": "s1",
        "turns": [
            {
                "request": "Sort the LLM spans by latency, identify the bottlenecks, and write a "
                "report with suggested improvements.",
                "rubric": {"required_tools": ["find_bottlenecks"]},
            },
            "Which model uses the most tokens? Show me the token usage by model.",
        ],
    },
    {
        "session_id": "s2",
        "turns": ["What is the p95 latency per span kind?"],
        "model": "sim:looper",
    },
]


@pytest.fixture(scope="module")
def golden(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A dataset recorded through the command line."""
    folder = tmp_path_factory.mktemp("cli")
    requests = folder / "requests.json"
    requests.write_text(json.dumps(REQUESTS))
    done = plangate(
        "record", "--variant", "alyx", "--model", "sim:diligent", "--requests", str(requests),
        "-o", str(folder / "golden"), "--redact", r"ACME-\d{6}",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "2 sessions, 3 turns" in done.stdout and "secrets redacted" in done.stdout
    return folder / "golden"


def test_validate_then_replay_is_identical(golden: Path, tmp_path: Path) -> None:
    done = plangate("dataset", "validate", str(golden))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "valid: 2 sessions, 3 turns" in done.stdout
    table = tmp_path / "replay.parquet"
    done = plangate("replay", str(golden), "-o", str(table), "--jobs", "2")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("identical") >= 3 and "3 of 3 turns identical" in done.stdout
    assert re.search(r"3 of 3 turns identical \([\d,]+\.\d turns/s\)", done.stdout)
    assert table.is_file()


def test_replay_with_another_variant_diverges(golden: Path) -> None:
    done = plangate(
        "replay", str(golden), "--session", "s1", "--turn", "0", "--variant", "naive",
        "--model", "sim:diligent",
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert "s1 turn 0: diverged at step 0" in done.stdout
    assert "call todo_write" in done.stdout


def test_replay_json_and_shards(golden: Path) -> None:
    first = plangate("replay", str(golden), "--json", "--shard", "1/2")
    second = plangate("replay", str(golden), "--json", "--shard", "2/2")
    assert first.returncode == second.returncode == 0, first.stderr + second.stderr
    ones, twos = json.loads(first.stdout), json.loads(second.stdout)
    pairs = {(r["session_id"], r["turn_index"]) for r in ones + twos}
    assert len(ones) == 2 and len(twos) == 1 and len(pairs) == 3
    assert all(r["identical"] for r in ones + twos)
    assert all(0 < r["seconds"] < 60 for r in ones + twos)  # each turn's own replay time


def test_bad_input_exits_2_naming_it(
    tmp_path: Path, golden: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from plangate.ci.cli import main

    missing = tmp_path / "nowhere"
    assert main(["replay", str(missing)]) == 2
    assert str(missing) in capsys.readouterr().err
    for shard in ("3/2", "²/3", "1/²"):  # superscripts are digits to str.isdigit, not to int
        assert main(["replay", str(golden), "--shard", shard]) == 2
        assert f"--shard {shard!r}: expected i/n" in capsys.readouterr().err
    assert main(["replay", str(golden), "-o", ""]) == 2  # not "no -o": nothing written, exit 0
    assert "an empty path where a trace table goes" in capsys.readouterr().err
    assert main(["replay", str(golden), "--session", "nope"]) == 2
    assert "no session 'nope'" in capsys.readouterr().err
    # No folder is nothing to validate: unusable input, not a dataset with problems (exit 1).
    assert main(["dataset", "validate", str(missing)]) == 2
    assert f"{missing}: no such folder" in capsys.readouterr().err


def test_from_traces_and_eval_with_the_dataset_rubrics(golden: Path, tmp_path: Path) -> None:
    again = tmp_path / "again"
    done = plangate(
        "dataset", "from-traces", str(golden / "spans.parquet"), "--session", "s1",
        "-o", str(again),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "1 sessions, 2 turns" in done.stdout
    assert plangate("dataset", "validate", str(again)).returncode == 0
    done = plangate(
        "eval", str(golden / "spans.parquet"), "--rubric", str(golden), "--json",
        "--evaluator", "trajectory_match",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["evaluators"][0]["evaluator"] == "trajectory_match"
