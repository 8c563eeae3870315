"""`plangate compare`: variants side by side on every evaluator, with paired intervals."""

from __future__ import annotations

import json
from pathlib import Path

from tests.ci.test_gate import gate_file
from tests.conftest import REPO
from tests.helpers import plangate

SIDE = 'variant = "alyx"\nmodel = "sim:forgetful"\ntools = "live"'


def test_variants_side_by_side_with_intervals(tmp_path: Path) -> None:
    gate = gate_file(tmp_path, SIDE, SIDE)
    copy = tmp_path / "alyx-copy.toml"
    text = (REPO / "harness" / "variants" / "alyx.toml").read_text(encoding="utf-8")
    copy.write_text(text.replace('name = "alyx"', 'name = "alyx-copy"'), encoding="utf-8")
    done = plangate("compare", "alyx", "naive", str(copy), "--gate", str(gate), "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["variants"] == ["alyx", "naive", str(copy)]
    assert result["model"] == "sim:forgetful" and result["repeats"] == 2
    rows = {(r["variant"], r["evaluator"]): r for r in result["scores"][:2]}
    alyx, naive = rows["alyx", "task_completion"], rows["naive", "task_completion"]
    # Without a pinned plan the forgetful model drops tasks: worse on several cases, none better.
    assert alyx["pass_rate"]["mean"] == 1.0 and alyx["change"] is None
    assert naive["worse"] >= 3 and naive["better"] == 0 and naive["p_value"] < 0.25
    assert naive["change"]["high"] < 0 <= 1 - naive["pass_rate"]["mean"]
    low, mean, high = (naive["pass_rate"][k] for k in ("low", "mean", "high"))
    assert 0 <= low <= mean <= high <= 1
    # The same settings under another name replay the same seeds: no change at all.
    again = result["scores"][2]
    assert again["variant"] == str(copy) and (again["worse"], again["better"]) == (0, 0)
    assert again["change"]["mean"] == 0.0 and again["p_value"] == 1.0


def test_the_table_and_the_mistakes(tmp_path: Path) -> None:
    gate = gate_file(tmp_path, SIDE, SIDE, repeats=1)
    table = plangate(
        "compare", "alyx", "todo-basic", "--gate", str(gate), "--evaluator", "task_completion"
    )
    assert table.returncode == 0, table.stderr
    assert "task_completion: 18 cases × 1 repeats, sim:forgetful" in table.stdout
    assert "change vs alyx" in table.stdout and "tool_call_loops" not in table.stdout

    unknown = plangate("compare", "alyx", "nope", "--gate", str(gate))
    assert unknown.returncode == 2 and "nope" in unknown.stderr and "alyx" in unknown.stderr
    assert "Traceback" not in unknown.stderr
    twice = plangate("compare", "alyx", "alyx", "--gate", str(gate))
    assert twice.returncode == 2 and "'alyx' is given twice" in twice.stderr
    bad = plangate("compare", "alyx", "--gate", str(gate), "--evaluator", "speed")
    assert bad.returncode == 2 and "unknown evaluator 'speed'; choose from:" in bad.stderr
