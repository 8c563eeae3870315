"""`plangate gate GATE.toml`: the verdict, its reports, the stored scores, and the exit code."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import SpanProcessor
from rich.table import Table

from plangate.ci._budget import BudgetLimits
from plangate.ci._json import json_text
from plangate.ci.cli._exporting import exporting
from plangate.ci.cli._flags import endpoint_flags, judge_params
from plangate.ci.cli._printing import short, terminal
from plangate.ci.cli._stderr import say
from plangate.ci.gate import (
    DEFAULT_GATE,
    REPORT_MARKER,
    REPORT_OWNS,
    Comparison,
    DatasetSelection,
    EvaluatorRule,
    GateFileError,
    ReplayRun,
    SpanProcessors,
    Verdict,
    figure,
    gate_with_reports,
    load_gate,
    side_of,
    write_outputs,
)
from plangate.ci.gate import compare as compare_variants
from plangate.ci.phoenix import PhoenixExport, publish_verdict, replay_processor
from plangate.evaluators import EvaluatorError, evaluators
from plangate.harness import check_output


def gate(args: argparse.Namespace) -> int:
    """`plangate gate GATE.toml`: 0 pass, 1 regression, 2 unusable input or no verdict."""
    check_output(
        args.output, force=args.force, what="a gate's report set", marker=REPORT_MARKER,
        owns=REPORT_OWNS,
    )  # fmt: skip
    with exporting(args) as export:
        verdict, files = gate_with_reports(
            args.gate_file,
            args.output,
            repeats=args.repeats,
            span_processors=replays_to(export),
            endpoint=endpoint_flags(args),
            budget=BudgetLimits(
                max_tokens=args.budget_tokens, max_usd=args.budget_usd, price_as=args.price_as
            ),
            judge=judge_params(args, None),
        )
    if export is not None:
        # The scores as annotations, and each case's Phoenix link into the reports.
        published = publish_verdict(export, verdict)
        verdict = published.verdict
        for problem in published.problems:
            say("phoenix", f"annotations not logged: {problem}")
        if published.runs and not published.problems:
            print(
                f"phoenix: {published.span_annotations} span annotations logged "
                f"({published.runs} runs)"
            )
        files = write_outputs(verdict, args.output)
    print_verdict(verdict, files)
    return verdict.exit_code


def compare(args: argparse.Namespace) -> int:
    """`plangate compare VARIANT...`: replay each on the gate's datasets; print the comparison."""
    gate = load_gate(args.gate or DEFAULT_GATE)
    model = args.model or gate.candidate.model
    tools = args.tools or gate.candidate.tools
    sides = [side_of(text, model=model, tools=tools) for text in args.variants]
    labels = [side.label for side in sides]
    for side in sides:
        if labels.count(side.label) > 1:
            raise GateFileError(f"{side.label!r} is given twice; give each side once")
    if args.dataset:
        chosen = tuple(DatasetSelection(path=Path(d)) for d in args.dataset)
        gate = dataclasses.replace(gate, datasets=chosen)
    if args.evaluator:
        unknown = [name for name in args.evaluator if name not in evaluators()]
        if unknown:
            raise EvaluatorError(
                f"unknown evaluator {unknown[0]!r}; choose from: {', '.join(sorted(evaluators()))}"
            )
        rules = {n: gate.evaluators.get(n, EvaluatorRule()) for n in args.evaluator}
        gate = dataclasses.replace(gate, evaluators=rules)
    if args.repeats is not None:
        gate = dataclasses.replace(gate, repeats=args.repeats)
    result = asyncio.run(compare_variants(gate, sides, model=model))
    if args.json:
        print(json_text(dataclasses.asdict(result)))
    else:
        print_comparison(result)
    return 0


def print_comparison(result: Comparison) -> None:
    """One table per evaluator: each variant's rates with intervals, and its change."""
    console = terminal()
    first = result.variants[0]
    for name in result.evaluators:
        table = Table(
            title=f"{name}: {result.cases} cases × {result.repeats} repeats, {result.model}",
            title_justify="left",
            caption=f"\\[lo, hi]: 95% bootstrap over cases; change and p against {first}",
        )
        for column in ("variant", "pass rate", "pass^k", "score", f"change vs {first}", "p"):
            table.add_column(column, no_wrap=True)
        for variant in result.variants:
            row = result.score(variant, name)
            change = (
                "—"
                if row.change is None
                else f"{_interval(row.change)} ({row.worse} worse, {row.better} better)"
            )
            table.add_row(
                variant,
                _interval(row.pass_rate, sign=False),
                f"{row.pass_hat_k:.2f}",
                _interval(row.score, sign=False),
                change,
                "—" if row.change is None else f"{row.p_value:.3g}",
            )
        console.print(table)


def print_verdict(verdict: Verdict, files: Mapping[str, Path]) -> None:
    """The verdict table, the worst regressed cases, and where the reports are."""
    console = terminal()
    word = {
        "pass": "[green]PASS[/green]",
        "regression": "[red]REGRESSION[/red]",
        "cannot decide": "[yellow]CANNOT DECIDE[/yellow]",
    }[verdict.word]
    console.print(f"plangate gate: {word}", highlight=False)
    if verdict.undecided is not None:
        console.print(f"  {verdict.undecided}", highlight=False, markup=False)
    if verdict.budget is not None:
        console.print(f"  run budget: {verdict.budget.line}", highlight=False, markup=False)
    for warning in verdict.warnings[:5]:
        console.print(f"  warning: {warning}", highlight=False, markup=False)
    noise = ", noise floor: baseline against itself" if verdict.noise_floor else ""
    table = Table(
        title=f"{verdict.baseline} → {verdict.candidate}, {verdict.repeats} repeats{noise}",
        title_justify="left",
    )
    columns = (
        "evaluator", "verdict", "worse", "better", "flaky", "n/a", "errors", "noise floor", "p",
        "pass^k",
    )  # fmt: skip
    for column in (*columns, "Δ score (95% CI)"):
        table.add_column(column, no_wrap=True)
    shown = {"fail": "[red]FAIL[/red]", "pass": "[green]pass[/green]"}
    marks = {"fail": "[red]✗[/red]", "pass": "[green]✓[/green]"}
    for v in verdict.evaluators:
        said = verdict.evaluator_word(v)
        table.add_row(
            v.evaluator,
            shown.get(said, "[yellow]undecided[/yellow]"),
            str(v.regressed),
            str(v.improved),
            str(v.flaky),
            str(v.not_applicable),
            str(v.errors),
            "—" if v.noise is None else f"{v.noise.regressed} worse, {v.noise.improved} better",
            figure(v.p_value, ".3g"),
            f"{figure(v.baseline_pass_hat_k, '.2f')} → {figure(v.candidate_pass_hat_k, '.2f')}",
            _interval(v.score_difference),
        )
    console.print(table)
    for v in verdict.evaluators:
        mark = marks.get(verdict.evaluator_word(v), "[yellow]?[/yellow]")
        console.print(f"  {mark} {v.evaluator}: {short(v.reason, 80)}", highlight=False)
    failed = {v.evaluator for v in verdict.evaluators if v.failed}
    worst = sorted(
        (c for c in verdict.cases if c.status in ("regressed", "below_minimum")),
        key=lambda c: c.evaluator not in failed,  # the failing evaluators' cases first
    )
    for case in worst[:10]:
        console.print(
            f"    {case.status}: {case.dataset} {case.session_id} turn {case.turn_index} "
            f"({case.evaluator}): {short(case.explanation, 80)}",
            highlight=False,
            markup=False,
        )
    if len(worst) > 10:
        console.print(f"  … and {len(worst) - 10} more in the reports")
    console.print("reports: " + ", ".join(str(p) for p in files.values()), highlight=False)


def _interval(interval: Any, *, sign: bool = True) -> str:
    if interval is None or interval.n == 0:
        return "—"
    f = "+.2f" if sign else ".2f"
    return f"{interval.mean:{f}} [{interval.low:{f}}, {interval.high:{f}}]"


def replays_to(export: PhoenixExport | None) -> SpanProcessors | None:
    """The gate's span processors that send every replayed repeat to `export` (None: nowhere)."""
    if export is None:
        return None

    def processor(run: ReplayRun) -> SpanProcessor | None:
        return replay_processor(export, run.dataset, run.session_id, run.variant, run.run)

    return processor
