"""`plangate record`, `plangate dataset …` and `plangate replay`: golden datasets."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import pyarrow.parquet as pq
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from plangate.ci._budget import RunBudget, check_priceable, check_recording_priced, not_run_table
from plangate.ci._rubrics import dataset_problems
from plangate.ci._turns import recorded_spans, select_turns
from plangate.ci.cli._agents import (
    agent_from_args,
    record_with_agent,
    session_agents,
)
from plangate.ci.cli._exporting import exporting
from plangate.ci.cli._printing import short
from plangate.ci.phoenix import PhoenixExport, replay_processor
from plangate.harness import PlangateError, check_output, load_variant, read_text
from plangate.replay import (
    CASSETTE_MODELS,
    DATASET_FILES,
    MANIFEST,
    GoldenDataset,
    ReferenceAgent,
    ReplayResult,
    concat_tables,
    dataset_folder,
    dataset_from_traces,
    load_requests,
    read_dataset,
    read_table,
    redacted_count,
    replay_turn,
    spans_from_table,
    write_dataset,
    write_table,
)
from plangate.replay import record as record_sessions
from plangate.replay.agents import AgentDriver, AgentSpec
from plangate.replay.schema import NOT_RUN

CONTEXT = 2
"""Steps shown on each side of a divergence."""


def record(args: argparse.Namespace) -> int:
    """`plangate record ... -o datasets/NAME`: record sessions as a golden dataset."""
    check_output(
        args.output, force=args.force, what="a golden dataset", marker=MANIFEST,
        owns=DATASET_FILES,
    )  # fmt: skip
    agent = agent_from_args(args)
    if agent is not None:
        return _write_recorded(asyncio.run(record_with_agent(args, agent)), args.output)
    if args.variant is None:
        raise PlangateError(
            "record needs --variant NAME (plangate's agent) or --agent SPEC (yours)"
        )
    path = Path(args.requests)
    requests = load_requests(read_text(path, "requests file"), str(path))
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
                allow_errors=args.allow_errors,
            )
        )
    return _write_recorded(dataset, args.output)


def _write_recorded(dataset: GoldenDataset, output: str) -> int:
    """Write a recorded golden and say what was written (and how many secrets were redacted)."""
    target = write_dataset(dataset, output)
    print(f"{_written(target, dataset)}; {redacted_count(dataset)} secrets redacted")
    return 0


def validate(args: argparse.Namespace) -> int:
    """`plangate dataset validate PATH`: 0 when the dataset is sound, 1 with its problems.

    A path that is no dataset folder at all (missing, a file, no manifest) is unusable input
    (exit 2), not a dataset with problems.
    """
    path = args.path
    dataset_folder(path)
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


def from_traces(args: argparse.Namespace) -> int:
    """`plangate dataset from-traces TABLE -o PATH`: a golden dataset from a trace table."""
    check_output(
        args.output, force=args.force, what="a golden dataset", marker=MANIFEST,
        owns=DATASET_FILES,
    )  # fmt: skip
    table = read_table(args.table)
    dataset = dataset_from_traces(
        table, name=args.name or Path(args.output).name, sessions=args.session
    )
    target = write_dataset(dataset, args.output, redact=args.redact)
    print(_written(target, dataset))
    return 0


def _written(target: Path, dataset: GoldenDataset) -> str:
    return (
        f"{target}: {dataset.sessions.num_rows} sessions, {dataset.turns.num_rows} turns, "
        f"{dataset.spans.num_rows} spans"
    )


def replay(args: argparse.Namespace) -> int:
    """`plangate replay DATASET [...]`: 0 all identical, 1 some diverged or errored.

    With a budget (`--budget-tokens`, `--budget-usd`), 2 when it left turns not run.
    """
    if args.model not in CASSETTE_MODELS and ":" not in args.model:
        raise PlangateError(
            f"--model {args.model!r}: expected cassette, cassette-lenient, sim:NAME or openai:MODEL"
        )
    if args.output is not None:
        check_output(args.output, force=args.force, what="a trace table")
    if args.variant:
        load_variant(args.variant)  # once, before any turn: not once per turn replayed
    given = agent_from_args(args)
    if given is not None and args.variant:
        raise PlangateError("give --variant (plangate's agent) or --agent (yours), not both")
    budget = _budget(args)
    dataset = read_dataset(args.dataset)
    pairs = select_turns(dataset, args.session, args.turn, args.shard)
    if args.model in CASSETTE_MODELS:
        check_recording_priced(budget, recorded_spans(dataset, pairs))
    agents = session_agents(dataset, pairs, given)
    show = sys.stderr.isatty() and not args.json
    began = time.perf_counter()
    with exporting(args) as export:
        results = asyncio.run(_replay_all(dataset, pairs, args, show, export, agents, budget))
        seconds = time.perf_counter() - began  # not the wait for Phoenix to take the spans
    rate = turns_per_second(results, seconds)
    if args.output is not None:
        write_table(concat_tables(r.table for r in results if r.table is not None), args.output)
    return _report(results, args, budget, rate)


def _report(
    results: list[ReplayResult], args: argparse.Namespace, budget: RunBudget, rate: float
) -> int:
    """Print each turn's outcome and the summary; the exit code."""
    if args.json:
        print(json.dumps([r.to_dict() for r in results], indent=2, ensure_ascii=False))
    else:
        for result in results:
            print_result(result)
    same = sum(r.divergence is None and r.error is None for r in results)
    if not args.json:
        print(f"{same} of {len(results)} turns identical ({rate:,.1f} turns/s)")
    if budget.limited:  # on stderr with --json: the JSON stays one document
        stopped = f"; not run: {budget.reason()}" if budget.not_run else ""
        print(
            f"run budget: {budget.use().line}{stopped}",
            file=sys.stderr if args.json else sys.stdout,
        )
    if budget.not_run:
        return 2
    return 0 if same == len(results) else 1


def turns_per_second(results: list[ReplayResult], seconds: float) -> float:
    """The turns replayed a second: the turns a budget left unstarted took no time to count."""
    return sum(r.stop_reason != NOT_RUN for r in results) / max(seconds, 1e-9)


def _budget(args: argparse.Namespace) -> RunBudget:
    """The replay's budget from its flags (unlimited without), checked before any turn runs."""
    if args.price_as is not None and args.budget_usd is None:
        raise PlangateError("--price-as prices model calls for --budget-usd; give --budget-usd")
    budget = RunBudget(
        max_tokens=args.budget_tokens, max_usd=args.budget_usd, price_as=args.price_as
    )
    check_priceable(budget, args.model)
    return budget


async def _replay_all(
    dataset: GoldenDataset,
    pairs: list[tuple[str, int]],
    args: argparse.Namespace,
    show: bool,
    export: PhoenixExport | None = None,
    agents: dict[str, AgentSpec] | None = None,
    budget: RunBudget | None = None,
) -> list[ReplayResult]:
    gate = asyncio.Semaphore(args.jobs)
    unique = {a.label: a for a in (agents or {}).values()}
    drivers = {label: AgentDriver(a, jobs=args.jobs) for label, a in unique.items()}
    columns = (
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
        TextColumn("{task.fields[rate]}"), TimeElapsedColumn(),
    )  # fmt: skip
    began = time.perf_counter()
    with Progress(*columns, disable=not show, transient=True) as progress:
        task = progress.add_task("replaying", total=len(pairs), rate="")
        ran = 0

        async def one(session: str, turn: int) -> ReplayResult:
            given = (agents or {}).get(session)
            label = given.label if given is not None else args.variant
            processor = replay_processor(export, dataset, session, label)
            agent = (
                drivers[given.label]
                if given is not None
                else ReferenceAgent(args.variant, span_processor=processor)
            )
            async with gate:
                if budget is not None and budget.reached():  # asked once a turn may start
                    result = _not_run(dataset, session, turn, args.model, label, budget.skip())
                else:
                    result = await replay_turn(
                        dataset, session, turn, agent=agent, model=args.model, tools=args.tools
                    )
                    if budget is not None:
                        budget.spend(result.table)
            if given is not None and processor is not None and result.table is not None:
                for span in spans_from_table(result.table):  # a team's agent's, after its turn
                    processor.on_end(span)
            nonlocal ran
            ran += result.stop_reason != NOT_RUN  # a turn the budget left has no cost to show
            rate = f"{ran / max(time.perf_counter() - began, 1e-9):,.1f} turns/s"
            progress.update(task, advance=1, rate=rate)
            return result

        try:
            return list(await asyncio.gather(*(one(s, k) for s, k in pairs)))
        finally:
            for driver in drivers.values():
                await driver.aclose()


def _not_run(
    dataset: GoldenDataset, session: str, turn: int, model: str, label: str | None, reason: str
) -> ReplayResult:
    """A turn the budget left unstarted: its recorded steps, none replayed, `not_run`."""
    variant = label or dataset.session(session).get("variant") or ""
    return ReplayResult(
        session_id=session, turn_index=turn, variant=variant, model=model,
        recorded=json.loads(dataset.turn(session, turn)["steps"]), replayed=[], divergence=None,
        table=not_run_table(session, turn, reason, variant), stop_reason=NOT_RUN,
        error=f"not run: {reason}",
    )  # fmt: skip


def print_result(result: ReplayResult) -> None:
    """One turn's outcome; a divergence with the steps around it side by side."""
    where = f"{result.session_id} turn {result.turn_index}"
    if result.stop_reason == NOT_RUN:
        print(f"{where}: not run (budget)")
        return
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
        print(f"  {mark}{index:>3}  {short(old, 60):<60}  {short(new, 60)}")


def _at(steps: Sequence[str], index: int) -> str:
    return steps[index] if index < len(steps) else ""
