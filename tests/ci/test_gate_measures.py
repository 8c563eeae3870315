"""Measures (latency, tokens, cost) in the gate: totals per side, a ratio, and `max_ratio`.

The baseline is replayed once and stored; the candidate is the same score table with every
measurement scaled, so the ratio the gate must find is known exactly.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from plangate.ci.gate import gate_with_reports
from plangate.ci.gate._gate import run_gate
from plangate.ci.gate._gate_file import GateFileError, load_gate
from plangate.ci.gate._reports import markdown
from tests.conftest import REPO

DATASET = REPO / "datasets" / "observability-core"


def gate_file(folder: Path, baseline: str, candidate: str, rule: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "gate.toml"
    path.write_text(
        f"""
[gate]
repeats = 1
noise_floor = false
[[datasets]]
path = "{DATASET}"
sessions = ["obs-008", "obs-009", "obs-010"]
[baseline]
{baseline}
[candidate]
{candidate}
[evaluators.latency]
allow_not_applicable = true
{rule}
""",
        encoding="utf-8",
    )
    return path


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The baseline's scores, replayed once: alyx on the diligent simulated model."""
    folder = tmp_path_factory.mktemp("measures")
    side = 'variant = "alyx"\nmodel = "sim:diligent"\ntools = "live"'
    _, files = gate_with_reports(gate_file(folder, side, side, ""), folder / "main")
    return Path(files["baseline scores"])


def scaled(stored: Path, factor: float, folder: Path) -> Path:
    """The stored scores with every latency score multiplied by `factor`."""
    table = pq.read_table(stored)
    latency = pc.equal(table["evaluator"], "latency")
    score = pc.if_else(latency, pc.multiply(table["score"], factor), table["score"])
    path = folder / f"scaled-{factor}.parquet"
    pq.write_table(table.set_column(table.schema.get_field_index("score"), "score", score), path)
    return path


@pytest.mark.parametrize(
    ("factor", "most", "code"),
    [(1.5, 1.2, 1), (1.5, 2.0, 0), (1.0, 1.2, 0), (1.1, 1.05, 1)],
)
def test_a_measure_fails_only_when_its_whole_interval_is_above_max_ratio(
    stored: Path, tmp_path: Path, factor: float, most: float, code: int
) -> None:
    candidate = scaled(stored, factor, tmp_path)
    path = gate_file(
        tmp_path / "pr", f'scores = "{stored}"', f'scores = "{candidate}"', f"max_ratio = {most}"
    )
    verdict = asyncio.run(run_gate(load_gate(path)))
    (latency,) = verdict.evaluators
    assert latency.ratio is not None and latency.ratio.mean == pytest.approx(factor)
    assert latency.measured == latency.ratio.n == 7  # 3 sessions, 7 turns
    assert latency.candidate_total == pytest.approx(factor * (latency.baseline_total or 0))
    assert verdict.exit_code == code
    if code:
        assert f"above the maximum {most:g}×" in latency.reason
    summary = markdown(verdict)
    assert "| measure | baseline total | candidate total |" in summary
    assert f"| {factor:.2f}× [" in summary


def test_max_ratio_without_any_measurement_cannot_decide(stored: Path, tmp_path: Path) -> None:
    table = pq.read_table(stored)
    blank = table.set_column(
        table.schema.get_field_index("score"), "score", pa.nulls(table.num_rows, pa.float64())
    )
    path = tmp_path / "blank.parquet"
    pq.write_table(blank, path)
    gate = gate_file(
        tmp_path / "pr", f'scores = "{stored}"', f'scores = "{path}"', "max_ratio = 1.2"
    )
    verdict = asyncio.run(run_gate(load_gate(gate)))
    assert verdict.exit_code == 2
    assert "'latency' has a max_ratio but no case measured on both sides" in str(verdict.undecided)


@pytest.mark.parametrize(
    ("evaluator", "rule", "needle"),
    [
        ("task_completion", "max_ratio = 1.2", "max_ratio applies to a measure only"),
        ("latency", "max_ratio = 0", "max_ratio must be a number above 0"),
        ("latency", 'max_ratio = "1.2"', "max_ratio must be a number above 0"),
    ],
)
def test_max_ratio_mistakes_name_the_key(
    tmp_path: Path, evaluator: str, rule: str, needle: str
) -> None:
    path = tmp_path / "g.toml"
    path.write_text(
        f"[[datasets]]\npath = '{DATASET}'\n[baseline]\nvariant = 'alyx'\n[candidate]\n"
        f"variant = 'alyx'\n[evaluators.{evaluator}]\n{rule}\n",
        encoding="utf-8",
    )
    with pytest.raises(GateFileError) as raised:
        load_gate(path)
    message = str(raised.value)
    assert needle in message and f"evaluators.{evaluator}.max_ratio" in message
    assert str(path) in message
