"""`plangate record`, `plangate dataset …` and `plangate replay`: golden datasets."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from rich.progress import Progress

from plangate.ci.cli._build import build_datasets
from plangate.ci.cli._exporting import exporting
from plangate.ci.cli._phoenix import from_phoenix
from plangate.ci.phoenix import PhoenixExport, replay_processor
from plangate.evaluators import RubricError, rubric_from_dict
from plangate.harness import PlangateError
from plangate.replay import (
    DatasetError,
    GoldenDataset,
    ReplayResult,
    concat_tables,
    dataset_from_traces,
    load_requests,
    read_dataset,
    read_table,
    replay_turn,
    validate_dataset,
    write_dataset,
    write_table,
)
from plangate.replay import record as record_sessions
from plangate.replay.schema import SESSION_ID, TURN_INDEX

CONTEXT = 2
"""Steps shown on each side of a divergence."""
REDACTED = "[REDACTED]"


def record(args: argparse.Namespace) -> int:
    """`plangate record ... -o datasets/NAME`: record sessions as a golden dataset."""
    path = Path(args.requests)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise PlangateError(f"cannot read requests file {path}: {exc.strerror}") from exc
    requests = load_requests(text, str(path))
    name = args.name or Path(args.output).name
    with exporting(args) as export:
        processor = export.processor(dataset=name, variant=args.variant) if export else None
        dataset = asyncio.run(
            record_sessions(
                requests,
                name=name,
                variant=args.variant,
                model=args.model,
                domain=args.domain,
                seed=args.seed,
                description=args.description,
                redact=args.redact,
                span_processor=processor,
            )
        )
    target = write_dataset(dataset, args.output)
    print(
        f"{target}: {dataset.sessions.num_rows} sessions, {dataset.turns.num_rows} turns, "
        f"{dataset.spans.num_rows} spans; {redacted_count(dataset)} secrets redacted"
    )
    return 0


def redacted_count(dataset: GoldenDataset) -> int:
    """How many `[REDACTED]` markers the dataset's turns, sessions and cassettes hold."""
    tables = (dataset.sessions, dataset.turns, dataset.model_cassette, dataset.tool_cassette)
    return sum(_markers(table) for table in tables)


def _markers(table: pa.Table) -> int:
    total = 0
    for column in table.columns:
        if pa.types.is_string(column.type):
            total += sum(v.count(REDACTED) for v in column.to_pylist() if v)
    return total


def dataset(args: argparse.Namespace) -> int:
    """`plangate dataset validate | from-traces | from-phoenix | build`."""
    if args.dataset_command == "validate":
        return _validate(args.path)
    if args.dataset_command == "from-phoenix":
        return from_phoenix(args)
    if args.dataset_command == "build":
        return build_datasets(args)
    return _from_traces(args)


def dataset_problems(path: str) -> list[str]:
    """What `validate_dataset` finds, plus each turn's rubric parsed by the evaluators."""
    problems = validate_dataset(path)
    if problems:
        return problems
    turns = pq.read_table(Path(path) / "turns.parquet").to_pylist()
    for row, turn in enumerate(turns):
        if turn["rubric"] is None:
            continue
        where = f"{Path(path) / 'turns.parquet'}: column 'rubric', row {row}"
        try:
            rubric_from_dict(json.loads(turn["rubric"]), where)
        except RubricError as exc:
            problems.append(str(exc))
    return problems


def _validate(path: str) -> int:
    problems = dataset_problems(path)
    if problems:
        print(f"{path}: {len(problems)} problems")
        for problem in problems:
            print(f"  {problem}")
        return 1
    sessions = pq.read_metadata(Path(path) / "sessions.parquet").num_rows
    turns = pq.read_metadata(Path(path) / "turns.parquet").num_rows
    print(f"valid: {sessions} sessions, {turns} turns")
    return 0


def _from_traces(args: argparse.Namespace) -> int:
    table = read_table(args.table)
    dataset = dataset_from_traces(
        table, name=args.name or Path(args.output).name, sessions=args.session
    )
    target = write_dataset(dataset, args.output)
    print(
        f"{target}: {dataset.sessions.num_rows} sessions, {dataset.turns.num_rows} turns, "
        f"{dataset.spans.num_rows} spans"
    )
    return 0


def select_turns(
    dataset: GoldenDataset,
    sessions: Sequence[str] | None,
    turns: Sequence[int] | None,
    shard: str | None,
) -> list[tuple[str, int]]:
    """The (session, turn) pairs to replay, in a stable order, after filters and sharding."""
    known = set(dataset.sessions[SESSION_ID].to_pylist())
    for session in sessions or ():
        if session not in known:
            dataset.session(session)  # raises, naming some known sessions
    pairs = sorted(
        zip(
            dataset.turns[SESSION_ID].to_pylist(),
            dataset.turns[TURN_INDEX].to_pylist(),
            strict=True,
        )
    )
    chosen = [
        (s, k) for s, k in pairs if (not sessions or s in sessions) and (not turns or k in turns)
    ]
    if not chosen:
        raise DatasetError(f"{dataset.name}: no turn matches --session/--turn")
    if shard is None:
        return chosen
    index, count = parse_shard(shard)
    return chosen[index - 1 :: count]


def parse_shard(text: str) -> tuple[int, int]:
    """`i/n` as (i, n), 1 ≤ i ≤ n."""
    first, sep, second = text.partition("/")
    if sep and first.isdigit() and second.isdigit() and 1 <= int(first) <= int(second):
        return int(first), int(second)
    raise PlangateError(f"--shard {text!r}: expected i/n with 1 <= i <= n, e.g. 1/4")


def replay(args: argparse.Namespace) -> int:
    """`plangate replay DATASET [...]`: 0 all identical, 1 some diverged or errored."""
    if args.jobs < 1:
        raise PlangateError(f"--jobs {args.jobs}: expected at least 1")
    if args.model not in ("cassette", "cassette-lenient") and ":" not in args.model:
        raise PlangateError(
            f"--model {args.model!r}: expected cassette, cassette-lenient, sim:NAME or openai:MODEL"
        )
    dataset = read_dataset(args.dataset)
    pairs = select_turns(dataset, args.session, args.turn, args.shard)
    show = sys.stderr.isatty() and not args.json
    with exporting(args) as export:
        results = asyncio.run(_replay_all(dataset, pairs, args, show, export))
    if args.output:
        write_table(concat_tables(r.table for r in results if r.table is not None), args.output)
    if args.json:
        print(json.dumps([r.to_dict() for r in results], indent=2, ensure_ascii=False))
    else:
        for result in results:
            print_result(result)
    same = sum(r.divergence is None and r.error is None for r in results)
    if not args.json:
        print(f"{same} of {len(results)} turns identical")
    return 0 if same == len(results) else 1


async def _replay_all(
    dataset: GoldenDataset,
    pairs: list[tuple[str, int]],
    args: argparse.Namespace,
    show: bool,
    export: PhoenixExport | None = None,
) -> list[ReplayResult]:
    gate = asyncio.Semaphore(args.jobs)
    with Progress(disable=not show, transient=True) as progress:
        task = progress.add_task("replaying", total=len(pairs))

        async def one(session: str, turn: int) -> ReplayResult:
            async with gate:
                result = await replay_turn(
                    dataset, session, turn, variant=args.variant, model=args.model,
                    tools=args.tools,
                    span_processor=replay_processor(export, dataset, session, args.variant),
                )  # fmt: skip
            progress.advance(task)
            return result

        return list(await asyncio.gather(*(one(s, k) for s, k in pairs)))


def print_result(result: ReplayResult) -> None:
    """One turn's outcome; a divergence with the steps around it side by side."""
    where = f"{result.session_id} turn {result.turn_index}"
    if result.error is not None:
        print(f"{where}: error: {result.error}")
        return
    if result.divergence is None:
        print(f"{where}: identical")
        return
    step = result.divergence.step
    print(f"{where}: diverged at step {step}")
    print(f"  {'':>4}  {'recorded':<60}  replayed")
    for index in range(max(0, step - CONTEXT), step + CONTEXT + 1):
        old, new = _at(result.recorded, index), _at(result.replayed, index)
        if old == new == "":
            continue
        mark = ">" if index == step else " "
        print(f"  {mark}{index:>3}  {_cut(old):<60}  {_cut(new)}")


def _at(steps: Sequence[str], index: int) -> str:
    return steps[index] if index < len(steps) else ""


def _cut(text: str, limit: int = 60) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
