"""`plangate import` and `plangate eval`: trace tables in, scores out."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from plangate.ci._json import json_text
from plangate.ci._rubrics import rubrics_at
from plangate.ci._summary import SummaryBuilder
from plangate.ci.cli._flags import judge_params
from plangate.ci.cli._printing import terminal
from plangate.ci.cli._stderr import say
from plangate.evaluators import (
    DEFAULT_BATCH_ROWS,
    SCORE_SCHEMA,
    EvaluatorError,
    RubricSet,
    TraceSource,
    evaluators,
    object_uri,
    score_batches,
    text_located,
    trace_source,
    would_read,
)
from plangate.harness import (
    OutputError,
    check_output,
    replace_folder,
    staging_folder,
    writing,
)
from plangate.replay import default_redactor, import_traces, lost_attributes, write_table
from plangate.replay.schema import SESSION_ID, TURN_INDEX, TraceTableError

FIRST_PART = "part-00000.parquet"
"""A score folder's first part: always written, it marks the folder as one (`--force`)."""
PARTS = ("part-*.parquet",)
"""What a score folder holds: a folder holding more is not replaced (`--force`)."""


def import_files(args: argparse.Namespace) -> int:
    """`plangate import FORMAT PATH... -o TABLE`: other agents' traces into a trace table."""
    check_output(args.output, force=args.force, what="a trace table")
    table = import_traces(args.format, args.paths)
    write_table(table, args.output)
    turns = set(zip(table[SESSION_ID].to_pylist(), table[TURN_INDEX].to_pylist(), strict=True))
    sessions = len({session for session, _ in turns})
    print(f"{args.output}: {table.num_rows} spans, {len(turns)} turns, {sessions} sessions")
    warning = lost_attributes(table)
    if warning is not None:
        say("warning", warning)
    return 0


def score_table(args: argparse.Namespace) -> int:
    """`plangate eval SOURCE [--rubric FILE] [-o SCORES] [--json]`: score every turn.

    SOURCE is one Parquet file, a folder of them or a glob; it is scored in batches of whole
    sessions (`--batch-rows`), in bounded memory whatever its size. With `-o`, a file gives one
    score file; a folder or a glob gives a folder of parts, one per batch.
    """
    on_disk = object_uri(args.table) is None
    if args.output is not None:
        _outside_source(args.table, args.output)
        if on_disk:  # before any work; a URI's files are known once listed
            _check_scores_out(args.output, args.force, parted=not Path(args.table).is_file())
    source = trace_source(args.table)
    if not source.rows:  # a score table of nothing would read as a run that went well
        files = "its file has" if len(source.files) == 1 else f"its {len(source.files)} files have"
        raise TraceTableError(
            f"{source.given}: no spans ({files} 0 rows); nothing to score: expected a trace "
            "table with spans"
        )
    parted = not source.single_file
    if args.output is not None and not on_disk:
        _check_scores_out(args.output, args.force, parted=parted)
    rubrics = rubrics_at(args.rubric) if args.rubric else None
    params = _with_judge(args, _params(args.param))
    try:
        return _scored_and_shown(args, source, rubrics, params, parted)
    except UnicodeDecodeError as exc:  # a text that is not UTF-8, named only now
        raise text_located(source, exc) from exc


def _scored_and_shown(
    args: argparse.Namespace,
    source: TraceSource,
    rubrics: RubricSet | None,
    params: dict[str, Any],
    parted: bool,
) -> int:
    builder = SummaryBuilder()
    began = time.perf_counter()
    show = sys.stderr.isatty() and not args.json
    with _progress(show, source.rows) as advance, _scores_out(args.output, parted) as write:
        for scores in score_batches(
            source, rubrics, args.evaluator, params,
            batch_rows=args.batch_rows or DEFAULT_BATCH_ROWS, engine=args.engine,
            address=args.address, progress=advance,
        ):  # fmt: skip
            builder.add(scores)
            write(scores)
    seconds = max(time.perf_counter() - began, 1e-9)
    summary = builder.summary()
    if args.json:
        print(json_text(summary))
    else:
        print_summary(summary, source.given)
        print(
            f"{source.rows:,} spans scored in {seconds:,.1f} s ({source.rows / seconds:,.0f} "
            f"spans/s){f'; scores in {args.output}' if args.output else ''}"
        )
    return 0


def _check_scores_out(output: str, force: bool, parted: bool) -> None:
    marker = FIRST_PART if parted else None
    check_output(
        output, force=force, what="a score table", marker=marker, owns=PARTS if parted else ()
    )


def _outside_source(source: str, output: str) -> None:
    """Refuse scores written where the source is read: the next run would read them as traces.

    And scores for object storage: they are written on disk.
    """
    if shown := object_uri(output):
        raise OutputError(
            f"{shown}: -o takes a path on disk, not a URI: scores are written on disk (copy "
            "them to a bucket afterwards if they belong there)"
        )
    if would_read(source, output):
        raise OutputError(
            f"{output}: where the source {object_uri(source) or source} is read from (its "
            "Parquet files are all read as traces); write the scores outside it"
        )


@contextlib.contextmanager
def _progress(show: bool, total: int) -> Iterator[Callable[[int], None]]:
    """A progress bar on stderr (a terminal only): spans scored, and spans per second."""
    columns = (
        TextColumn("{task.description}"), BarColumn(),
        TextColumn("{task.completed:,.0f}/{task.total:,.0f} spans"),
        TextColumn("{task.fields[rate]}"), TimeElapsedColumn(),
    )  # fmt: skip
    console = Console(stderr=True)
    began = time.perf_counter()
    with Progress(*columns, console=console, disable=not show, transient=True) as progress:
        task = progress.add_task("scoring", total=total, rate="")
        done = 0

        def advance(spans: int) -> None:
            nonlocal done
            done += spans
            rate = f"{done / max(time.perf_counter() - began, 1e-9):,.0f} spans/s"
            progress.update(task, advance=spans, rate=rate)

        yield advance


@contextlib.contextmanager
def _scores_out(output: str | None, parted: bool) -> Iterator[Callable[[pa.Table], None]]:
    """Where score batches go as they come: nowhere, one file, or a folder of parts.

    Written beside the output and moved into place once complete: a run that fails or is
    killed leaves the previous output (or nothing) at the path, never half a result.
    """
    if output is None:
        yield lambda scores: None
    elif parted:
        with _parts(Path(output)) as write:
            yield write
    else:
        with _one_file(Path(output)) as write:
            yield write


@contextlib.contextmanager
def _parts(target: Path) -> Iterator[Callable[[pa.Table], None]]:
    staging = staging_folder(target)
    written = 0

    def write(scores: pa.Table) -> None:
        nonlocal written
        with writing(target):
            pq.write_table(
                default_redactor().table(scores), staging / f"part-{written:05d}.parquet"
            )
        written += 1

    try:
        yield write
        if not written:  # the marker of a score folder: there is always a first part
            write(SCORE_SCHEMA.empty_table())
        replace_folder(staging, target, what="a score table", marker=FIRST_PART, owns=PARTS)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


@contextlib.contextmanager
def _one_file(target: Path) -> Iterator[Callable[[pa.Table], None]]:
    with writing(target):
        target.parent.mkdir(parents=True, exist_ok=True)
        handle, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
        os.close(handle)
    temporary = Path(name)
    writers: list[pq.ParquetWriter] = []  # the one writer, made with the first batch's schema

    def write(scores: pa.Table) -> None:
        with writing(target):
            if not writers:
                writers.append(pq.ParquetWriter(temporary, scores.schema))
            writers[0].write_table(default_redactor().table(scores))

    try:
        yield write
        if not writers:
            write(SCORE_SCHEMA.empty_table())
        with writing(target):
            writers.pop().close()
            os.chmod(temporary, 0o644)  # mkstemp makes it private; an output is for everyone
            os.replace(temporary, target)
    finally:
        for writer in writers:
            writer.close()
        temporary.unlink(missing_ok=True)


def _with_judge(args: argparse.Namespace, params: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The evaluators' parameters with the `--judge…` flags.

    The judge's cassette is stored with the scores (`SCORES.judge.jsonl`) or, for a golden
    dataset's rubrics, in the dataset, unless one is given.
    """
    beside = None
    if args.rubric and Path(args.rubric).is_dir():
        beside = str(Path(args.rubric) / "judge.jsonl")
    elif args.output:
        output = Path(args.output)
        beside = str(output.with_name(f"{output.name.removesuffix('.parquet')}.judge.jsonl"))
    judge = params.setdefault("judge", {})
    judge.setdefault("cassette", beside)
    judge.update(judge_params(args, None))
    if judge["cassette"] is not None:  # the same file wherever it is read (a Ray worker too)
        judge["cassette"] = str(Path(judge["cassette"]).absolute())
    if args.engine == "ray" and judge.get("mode", "replay") != "replay":
        raise EvaluatorError("--judge record and live ask the judge here: use --engine local")
    return params


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
    console = terminal()
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
    if "judge" in summary:
        _print_judge(console, summary["judge"])
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


def _print_judge(console: Console, judge: dict[str, Any]) -> None:
    """The judge's agreement with itself, and the turns whose verdict flipped."""
    line = f"judge: {judge['turns']} turn(s) asked"
    if judge["repeated_turns"]:
        line += (
            f"; {judge['repeated_turns']} asked more than once, mean self-agreement "
            f"{judge['mean_agreement']:.3f}; {judge['unstable_total']} unstable (no verdict)"
        )
    console.print(line)
    if judge["unstable"]:
        unstable = Table(title="unstable judge verdicts", title_justify="left")
        for column in ("session", "turn", "explanation"):
            unstable.add_column(column, overflow="fold")
        for u in judge["unstable"]:
            unstable.add_row(u["session_id"], str(u["turn_index"]), u["explanation"])
        console.print(unstable)


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
