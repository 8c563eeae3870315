"""What a gate run leaves on disk: its reports, and both sides' score tables to compare later."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from plangate.ci._budget import BudgetLimits
from plangate.ci.gate._gate import run_gate
from plangate.ci.gate._gate_file import GateFile, GateFileError, load_gate
from plangate.ci.gate._replays import SpanProcessors
from plangate.ci.gate._reports import write_reports
from plangate.ci.gate._verdict import Verdict
from plangate.harness import EndpointSettings


def write_outputs(verdict: Verdict, output: str | Path) -> dict[str, Path]:
    """The reports, and both sides' score tables in `output`/scores, as one set."""
    return write_reports(verdict, output, scores=verdict.scores)


def gate_with_reports(
    gate_file: str | Path,
    output: str | Path,
    *,
    repeats: int | None = None,
    span_processors: SpanProcessors | None = None,
    endpoint: EndpointSettings | None = None,
    budget: BudgetLimits | None = None,
    judge: Mapping[str, Any] | None = None,
) -> tuple[Verdict, dict[str, Path]]:
    """Run a gate file; write its reports and both sides' score tables into `output`.

    Args:
        gate_file: The gate file (TOML).
        output: The folder for the reports and score tables.
        repeats: Instead of the gate file's `gate.repeats` (at least 1).
        span_processors: Where else replayed spans go (see `run_gate`).
        endpoint: An `openai:` model's settings that win over the gate file's (a command's
            flags); what neither sets comes from the environment.
        budget: The run's budget; each limit it sets wins over the gate file's (a command's
            flags).
        judge: The `judge` evaluator's parameters that win over the gate file's
            `[evaluators.judge]` (`--judge live`, say); the gate file must run the judge.
    """
    gate = load_gate(gate_file)
    if repeats is not None:
        if repeats < 1:
            raise GateFileError(f"repeats must be a whole number >= 1, not {repeats!r}")
        gate = dataclasses.replace(gate, repeats=repeats)
    if endpoint is not None:
        gate = dataclasses.replace(gate, endpoint=endpoint.over(gate.endpoint))
    if budget is not None:
        gate = dataclasses.replace(gate, budget=budget.over(gate.budget))
    if gate.budget.price_as is not None and gate.budget.max_usd is None:
        raise GateFileError(
            f"{gate.path}: price_as prices model calls for a dollar budget, and there is none: "
            "give --budget-usd (or gate.budget_usd), or leave price_as out"
        )
    if judge:
        gate = _with_judge(gate, judge)
    verdict = asyncio.run(run_gate(gate, span_processors=span_processors))
    return verdict, write_outputs(verdict, output)


def _with_judge(gate: GateFile, judge: Mapping[str, Any]) -> GateFile:
    """The gate with the judge's parameters over its file's."""
    rule = gate.evaluators.get("judge")
    if rule is None:
        raise GateFileError(
            f"{gate.path}: --judge… given, but the gate runs no judge; add [evaluators.judge] "
            "(with its cassette) to the gate file"
        )
    judged = dataclasses.replace(rule, params={**rule.params, **judge})
    return dataclasses.replace(gate, evaluators={**gate.evaluators, "judge": judged})
