"""`plangate import` and `plangate eval`: trace tables in, scores out."""

from __future__ import annotations

import argparse
import json
from typing import Any

from rich.console import Console
from rich.table import Table

from plangate.ci._rubrics import rubrics_at
from plangate.ci._summary import summarize
from plangate.evaluators import EvaluatorError, evaluate, evaluators
from plangate.harness import check_output
from plangate.replay import import_traces, read_table, write_parquet, write_table
from plangate.replay.schema import SESSION_ID, TURN_INDEX


def import_files(args: argparse.Namespace) -> int:
    """`plangate import FORMAT PATH... -o TABLE`: other agents' traces into a trace table."""
    check_output(args.output, force=args.force, what="a trace table")
    table = import_traces(args.format, args.paths)
    write_table(table, args.output)
    turns = set(zip(table[SESSION_ID].to_pylist(), table[TURN_INDEX].to_pylist(), strict=True))
    sessions = len({session for session, _ in turns})
    print(f"{args.output}: {table.num_rows} spans, {len(turns)} turns, {sessions} sessions")
    return 0


def score_table(args: argparse.Namespace) -> int:
    """`plangate eval TABLE [--rubric FILE] [-o SCORES] [--json]`: score every turn."""
    if args.output:
        check_output(args.output, force=args.force, what="a score table")
    table = read_table(args.table)
    rubrics = rubrics_at(args.rubric) if args.rubric else None
    scores = evaluate(table, rubrics, names=args.evaluator, params=_params(args.param))
    if args.output:
        write_parquet(scores, args.output)
    summary = summarize(scores)
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print_summary(summary, args.table)
    return 0


def _params(pairs: list[str]) -> dict[str, dict[str, Any]]:
    params: dict[str, dict[str, Any]] = {}
    known = evaluators()
    for pair in pairs:
        target, sep, raw = pair.partition("=")
        name, dot, key = target.partition(".")
        if not sep or not dot or name not in known:
            raise EvaluatorError(
                f"--param {pair!r}: expected EVALUATOR.KEY=VALUE with EVALUATOR one of "
                f"{', '.join(sorted(known))}"
            )
        try:
            value: Any = json.loads(raw)
        except (json.JSONDecodeError, RecursionError):
            value = raw
        params.setdefault(name, {})[key] = value
    return params


def print_summary(summary: dict[str, Any], title: str) -> None:
    """The summary as rich tables."""
    console = Console()
    if not console.is_terminal:
        console = Console(width=160)
    table = Table(title=f"scores of {title}", title_justify="left")
    table.add_column("evaluator", no_wrap=True)
    for column in ("version", "turns", "passed", "n/a", "errors", "pass rate", "mean score"):
        table.add_column(column, justify="right")
    for row in summary["evaluators"]:
        mean = "—" if row["mean_score"] is None else f"{row['mean_score']:.3f}"
        applicable = row["passed"] + row["failed"]
        rate = "n/a" if row["pass_rate"] is None else f"{row['pass_rate']:.1%}"
        table.add_row(
            row["evaluator"], str(row["version"]), str(row["turns"]),
            f"{row['passed']}/{applicable}", str(row["not_applicable"]), str(row["errors"]),
            rate, mean,
        )  # fmt: skip
    console.print(table)
    if summary["errors"]:
        _print_errors(console, summary)
    if summary["failures"]:
        _print_failures(console, summary)
    repeats = summary.get("repeats", [])
    if len(repeats) > 1:
        grid = Table(title="task completion across repeats", title_justify="left")
        for column in ("k", "pass@k", "pass^k", "tasks"):
            grid.add_column(column, justify="right")
        for r in repeats:
            grid.add_row(str(r["k"]), _fmt(r["pass_at_k"]), _fmt(r["pass_hat_k"]), str(r["tasks"]))
        console.print(grid)


def _print_failures(console: Console, summary: dict[str, Any]) -> None:
    failures = Table(
        title=f"failing turns ({len(summary['failures'])} of {summary['failures_total']})",
        title_justify="left",
    )
    for column in ("evaluator", "session", "turn", "label", "explanation"):
        failures.add_column(column, overflow="fold")
    for f in summary["failures"]:
        failures.add_row(
            f["evaluator"], f["session_id"], str(f["turn_index"]), f["label"], f["explanation"]
        )
    console.print(failures)


def _print_errors(console: Console, summary: dict[str, Any]) -> None:
    errors = Table(
        title=f"errored turns, not judged ({len(summary['errors'])} of {summary['errors_total']})",
        title_justify="left",
    )
    for column in ("session", "turn", "error"):
        errors.add_column(column, overflow="fold")
    for e in summary["errors"]:
        errors.add_row(e["session_id"], str(e["turn_index"]), e["error"])
    console.print(errors)


def _fmt(value: float | None) -> str:
    return "—" if value is None else f"{value:.3f}"
