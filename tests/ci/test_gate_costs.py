"""The gate sees what a change costs: every task still done, a third more tokens, a fail.

The candidate turns on the plan message and status reminders (`alyx`) over a baseline without
them (`todo-basic`): on the same simulated model every turn of the golden dataset still ends
finished and judged complete, but the context the model reads grows, by about a third. The
cost evaluator prices both sides' tokens as one real model (`price_as`), so the reports carry
the cost change too.
"""

from __future__ import annotations

import json
from pathlib import Path

from plangate.ci.gate import gate_with_reports
from tests.conftest import REPO

DATASET = REPO / "datasets" / "observability-core"
PRICE_AS = "gpt-4.1-mini"


def test_a_third_more_tokens_fails_the_gate_with_every_task_still_done(tmp_path: Path) -> None:
    gate = tmp_path / "gate.toml"
    gate.write_text(
        f"""
[gate]
repeats = 1
noise_floor = false
[[datasets]]
path = "{DATASET}"
[baseline]
variant = "todo-basic"
model = "sim:diligent"
tools = "live"
[candidate]
variant = "alyx"
model = "sim:diligent"
tools = "live"
[evaluators.task_completion]
min_pass_rate = 1.0
[evaluators.tokens]
max_ratio = 1.2
[evaluators.cost]
params = {{ price_as = "{PRICE_AS}" }}
allow_not_applicable = true
""",
        encoding="utf-8",
    )
    verdict, files = gate_with_reports(gate, tmp_path / "out")
    by_name = {v.evaluator: v for v in verdict.evaluators}
    completion, tokens, cost = by_name["task_completion"], by_name["tokens"], by_name["cost"]

    # Every task is still done on both sides: the grade sees nothing wrong.
    assert not completion.failed and completion.candidate_pass_rate == 1.0
    assert completion.regressed == 0
    # The tokens' ratio does: about a third more, its whole interval above 1.2.
    assert tokens.ratio is not None and 1.25 < tokens.ratio.low <= tokens.ratio.high < 1.45
    assert tokens.failed and "above the maximum 1.2×" in tokens.reason
    assert verdict.exit_code == 1
    # The cost of the same tokens on a real model moves with them, and is reported, not failed.
    assert cost.ratio is not None and cost.ratio.low > 1.0 and not cost.failed
    assert cost.baseline_total is not None and cost.candidate_total is not None
    assert 0 < cost.baseline_total < cost.candidate_total

    report = json.loads(files["json"].read_text(encoding="utf-8"))
    cost_json = next(e for e in report["evaluators"] if e["evaluator"] == "cost")
    assert cost_json["ratio"]["low"] == cost.ratio.low
    assert cost_json["candidate_total"] == cost.candidate_total
    assert cost_json["measured_cases"] == cost.measured == 44
    summary = files["markdown"].read_text(encoding="utf-8")
    cost_row = next(line for line in summary.splitlines() if line.startswith("| cost | $"))
    assert f"{cost.ratio.mean:.2f}× [{cost.ratio.low:.2f}, {cost.ratio.high:.2f}]" in cost_row
    assert f"${cost.candidate_total:,.4f}" in cost_row
    html = files["html"].read_text(encoding="utf-8")
    assert "candidate / baseline (95% CI)" in html
