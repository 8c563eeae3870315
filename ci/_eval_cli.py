"""`plangate import` and `plangate eval`: trace tables in, scores out."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa

    from plangate.evaluators import RubricSet

# pandas and pyarrow are imported by the commands that need them, not by `plangate run`.
MAX_FAILURES = 20
"""Failing turns listed in the summary (all are in the scores table)."""
IMPORT_FORMATS = ("openai-messages", "otlp-json", "phoenix", "swe-agent", "tau-bench", "tau2")


def add_commands(commands: Any) -> None:
    """Add `import` and `eval` to the `plangate` subcommands."""
    importing = commands.add_parser("import", help="other agents' traces into a trace table")
    importing.add_argument("format", help=f"one of: {', '.join(IMPORT_FORMATS)}")
    importing.add_argument("paths", nargs="+", metavar="PATH", help="files to import")
    importing.add_argument("-o", "--output", required=True, metavar="TABLE.parquet")

    scoring = commands.add_parser("eval", help="score every turn of a trace table")
    scoring.add_argument("table", metavar="TABLE.parquet")
    scoring.add_argument(
        "--rubric", metavar="FILE", help="rubric file (JSON or TOML) or golden dataset folder"
    )
    scoring.add_argument("-o", "--output", metavar="SCORES.parquet", help="write the scores table")
    scoring.add_argument("--evaluator", action="append", help="only this evaluator (repeatable)")
    scoring.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="EVALUATOR.KEY=VALUE",
        help="evaluator parameter, e.g. tool_call_loops.max_repeats=3",
    )
    scoring.add_argument("--json", action="store_true", help="print the summary as JSON")


def run_import(args: argparse.Namespace) -> int:
    """`plangate import FORMAT PATH... -o TABLE`."""
    import pyarrow.compute as pc

    from plangate.replay import import_traces, write_table

    table = import_traces(args.format, args.paths)
    write_table(table, args.output)
    turns = table.filter(pc.equal(table["span_kind"], "AGENT")).num_rows
    sessions = len(set(table["session_id"].to_pylist()))
    print(f"{args.output}: {table.num_rows} spans, {turns} turns, {sessions} sessions")
    return 0


def run_eval(args: argparse.Namespace) -> int:
    """`plangate eval TABLE [--rubric FILE] [-o SCORES] [--json]`."""
    from plangate.evaluators import evaluate
    from plangate.replay import read_table, write_parquet

    table = read_table(args.table)
    rubrics = _rubrics(args.rubric)
    scores = evaluate(table, rubrics, names=args.evaluator, params=_params(args.param))
    if args.output:
        write_parquet(scores, args.output)
    summary = summarize(scores)
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print_summary(summary, args.table)
    return 0


def _rubrics(path: str | None) -> RubricSet | None:
    from plangate.evaluators import load_rubrics
    from plangate.replay import TraceTableError

    if path is None:
        return None
    if Path(path).is_dir():
        if (Path(path) / "manifest.json").is_file():
            return dataset_rubrics(path)
        raise TraceTableError(
            f"{path}: is a folder without manifest.json; --rubric takes a rubric file (JSON or "
            "TOML) or a golden dataset folder"
        )
    return load_rubrics(path)


def dataset_rubrics(path: str) -> RubricSet:
    """The per-turn rubrics of a golden dataset folder (its turns' `rubric` column)."""
    from plangate.replay import read_dataset

    return turn_rubrics(read_dataset(path), path)


def turn_rubrics(dataset: Any, path: str) -> RubricSet:
    """The per-turn rubrics of a golden dataset already read (`path` names it in errors)."""
    from plangate.evaluators import RubricSet, rubric_from_dict

    turns = {
        (row["session_id"], row["turn_index"]): rubric_from_dict(
            json.loads(row["rubric"]),
            f"{path}/turns.parquet: session {row['session_id']!r}, turn {row['turn_index']}",
        )
        for row in dataset.turns.to_pylist()
        if row["rubric"] is not None
    }
    return RubricSet(turns=turns)


def _params(pairs: list[str]) -> dict[str, dict[str, Any]]:
    from plangate.evaluators import EvaluatorError, evaluators

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
        except json.JSONDecodeError:
            value = raw
        params.setdefault(name, {})[key] = value
    return params


def summarize(scores: pa.Table) -> dict[str, Any]:
    """Per evaluator: turns, passes, pass rate, mean score; and pass@k / pass^k over repeats."""
    from plangate.evaluators import repeat_scores

    frame = scores.to_pandas()
    rows = []
    for name, group in frame.groupby("evaluator", sort=True):
        mean = group["score"].mean()
        rows.append(
            {
                "evaluator": name,
                "version": int(group["version"].iloc[0]),
                "turns": len(group),
                "passed": int(group["passed"].sum()),
                "pass_rate": float(group["passed"].mean()),
                "mean_score": None if mean != mean else float(mean),
            }
        )
    failed = frame[~frame["passed"]].sort_values(["evaluator", "session_id", "turn_index"])
    summary: dict[str, Any] = {
        "evaluators": rows,
        "failures": [
            {
                "session_id": r.session_id,
                "turn_index": int(r.turn_index),
                "evaluator": r.evaluator,
                "label": r.label,
                "explanation": r.explanation,
            }
            for r in failed.head(MAX_FAILURES).itertuples(index=False)
        ],
        "failures_total": len(failed),
    }
    if "task_completion" in set(frame["evaluator"]):
        summary["repeats"] = [
            {"k": r.k, "pass_at_k": r.pass_at_k, "pass_hat_k": r.pass_hat_k, "tasks": r.tasks}
            for r in repeat_scores(scores)
        ]
    return summary


def print_summary(summary: dict[str, Any], title: str) -> None:
    """The summary as rich tables."""
    from rich.console import Console
    from rich.table import Table

    console = Console()
    table = Table(title=f"scores of {title}", title_justify="left")
    for column in ("evaluator", "version", "turns", "passed", "pass rate", "mean score"):
        table.add_column(column, justify="left" if column == "evaluator" else "right")
    for row in summary["evaluators"]:
        mean = "—" if row["mean_score"] is None else f"{row['mean_score']:.3f}"
        table.add_row(
            row["evaluator"], str(row["version"]), str(row["turns"]), str(row["passed"]),
            f"{row['pass_rate']:.1%}", mean,
        )  # fmt: skip
    console.print(table)
    if summary["failures"]:
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
    repeats = summary.get("repeats", [])
    if len(repeats) > 1:
        grid = Table(title="task completion across repeats", title_justify="left")
        for column in ("k", "pass@k", "pass^k", "tasks"):
            grid.add_column(column, justify="right")
        for r in repeats:
            grid.add_row(str(r["k"]), _fmt(r["pass_at_k"]), _fmt(r["pass_hat_k"]), str(r["tasks"]))
        console.print(grid)


def _fmt(value: float | None) -> str:
    return "—" if value is None else f"{value:.3f}"
