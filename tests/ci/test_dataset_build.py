"""`plangate dataset build`: the shipped goldens, recorded again from their request files."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from plangate.ci.cli import main
from plangate.replay import read_dataset
from tests.conftest import REPO

SHIPPED = REPO / "datasets"


def test_a_rebuild_reproduces_the_shipped_golden(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shutil.copytree(SHIPPED / "requests", tmp_path / "requests")
    assert main(["dataset", "build", "context-management", "-o", str(tmp_path)]) == 0
    assert "context-management:" in capsys.readouterr().out
    rebuilt = read_dataset(tmp_path / "context-management")
    shipped = read_dataset(SHIPPED / "context-management")
    for column in ("session_id", "turn_index", "request", "steps", "rubric"):
        assert rebuilt.turns[column].to_pylist() == shipped.turns[column].to_pylist(), column
    assert rebuilt.model_cassette.num_rows == shipped.model_cassette.num_rows
    assert not (tmp_path / "observability-core").exists()  # only what was named


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["nope"], "unknown dataset(s): nope; choose from context-management"),
        ([], "no requests/ folder; -o names the datasets folder to build"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    argv: list[str], needle: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["dataset", "build", *argv, "-o", str(tmp_path / "empty")]) == 2
    assert needle in capsys.readouterr().err
