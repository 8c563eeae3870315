"""Plangate's results in Phoenix, from the command line.

    plangate phoenix annotate SCORES.parquet TRACES.parquet [--url URL] [--project P]
    plangate phoenix dataset DATASET [--url URL] [--name N] [--session ID]...
    plangate phoenix experiment DATASET --variant V [--variant V2] --model SPEC [--url URL]

`phoenix annotate` logs a score table (`plangate eval -o`) on the turns of a trace table whose
spans went to Phoenix; `phoenix dataset` mirrors a golden dataset as a Phoenix dataset;
`phoenix experiment` mirrors it (or reuses the mirror) and replays it once per variant as
Phoenix experiments, to compare side by side in Phoenix. They are top-level commands because
`plangate phoenix` (up, down, status) belongs to `ci._phoenix_cli`.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from phoenix.client import Client

URL_ENV = "PLANGATE_PHOENIX_URL"
PROJECT_ENV = "PLANGATE_PHOENIX_PROJECT"
DEFAULT_URL = "http://127.0.0.1:6006"
DEFAULT_PROJECT = "plangate"
SHOWN_FAILURES = 20


def add_commands(commands: Any) -> None:
    """Add `annotate`, `dataset` and `experiment` to the `plangate phoenix` verbs."""
    from plangate.ci._phoenix_dataset import GOLDEN_PROJECT

    annotating = commands.add_parser("annotate", help="log a score table as Phoenix annotations")
    annotating.add_argument("scores", metavar="SCORES.parquet", help="`plangate eval -o` output")
    annotating.add_argument("traces", metavar="TRACES.parquet", help="the scored trace table")
    annotating.add_argument(
        "--project",
        default=None,
        help=f"the spans' Phoenix project (default: ${PROJECT_ENV} or {DEFAULT_PROJECT})",
    )
    annotating.add_argument(
        "--identifier", help="keep these annotations apart from others of the same name"
    )

    mirroring = commands.add_parser("dataset", help="mirror a golden dataset as a Phoenix dataset")
    experimenting = commands.add_parser(
        "experiment", help="replay a golden dataset per variant as Phoenix experiments"
    )
    for command in (mirroring, experimenting):
        command.add_argument("dataset", metavar="DATASET", help="golden dataset folder")
        command.add_argument("--name", help="Phoenix dataset name (default: the dataset's)")
        command.add_argument("--session", action="append", help="only this session (repeatable)")
        command.add_argument(
            "--project",
            default=GOLDEN_PROJECT,
            help=f"Phoenix project for the recorded spans (default {GOLDEN_PROJECT})",
        )
    experimenting.add_argument(
        "--variant", action="append", required=True, help="variant name or .toml (repeatable)"
    )
    experimenting.add_argument("--model", required=True, help="cassette, sim:NAME or openai:MODEL")
    experimenting.add_argument("--tools", default="cassette", choices=["cassette", "live"])
    experimenting.add_argument(
        "--evaluator", action="append", help="only this evaluator (repeatable; default all)"
    )
    for command in (annotating, mirroring, experimenting):
        command.add_argument(
            "--url", default=None, help=f"Phoenix base URL (default: ${URL_ENV} or {DEFAULT_URL})"
        )
        command.add_argument(
            "--timeout", type=float, default=60.0, help="seconds to wait for spans to land"
        )


def run_annotate(args: argparse.Namespace) -> int:
    """`plangate phoenix annotate SCORES TRACES`."""
    from plangate.ci._phoenix import annotate
    from plangate.replay import read_table

    scores = _read_scores(args.scores)
    traces = read_table(args.traces)
    project = args.project or os.environ.get(PROJECT_ENV) or DEFAULT_PROJECT
    report = annotate(
        _client(args), scores, traces, project=project, identifier=args.identifier,
        timeout=args.timeout,
    )  # fmt: skip
    print(
        f"project {report.project}: {report.span_annotations} span, {report.trace_annotations} "
        f"trace and {report.session_annotations} session annotations"
    )
    if report.unmatched:
        shown = ", ".join(report.unmatched[:SHOWN_FAILURES])
        print(f"not in the traces (not logged): {len(report.unmatched)} turns: {shown}")
    _print_failures(scores, report.trace_urls)
    return 0


def run_dataset(args: argparse.Namespace) -> int:
    """`plangate phoenix dataset DATASET`."""
    mirrored = _mirror(args, _client(args))
    print(
        f"{mirrored.name}: {mirrored.examples} examples ({mirrored.created} new, "
        f"{mirrored.linked} linked to spans; {mirrored.spans} spans uploaded to project "
        f"{mirrored.project})\n{mirrored.url}"
    )
    return 0


def run_experiments(args: argparse.Namespace) -> int:
    """`plangate phoenix experiment DATASET --variant V... --model SPEC`."""
    from plangate.ci._phoenix import base_url, compare_url
    from plangate.ci._phoenix_experiment import run_experiment

    client = _client(args)
    mirrored = _mirror(args, client)
    ran = [
        run_experiment(
            client,
            mirrored,
            args.dataset,
            variant,
            model=args.model,
            tools=args.tools,
            evaluators=args.evaluator,
        )  # fmt: skip
        for variant in args.variant
    ]
    for experiment in ran:
        scores = ", ".join(
            f"{name} {'—' if score is None else f'{score:.3f}'} "
            f"({experiment.passed.get(name, 0)}/{experiment.runs} passed)"
            for name, score in experiment.scores.items()
        )
        print(f"{experiment.name}: {experiment.runs} runs, {experiment.failed_runs} failed")
        print(f"  {scores}")
    print(f"compare: {compare_url(base_url(client), mirrored.id, [e.id for e in ran])}")
    return 0 if all(e.failed_runs == 0 for e in ran) else 1


HANDLERS: dict[str, Callable[[argparse.Namespace], int]] = {
    "annotate": run_annotate,
    "dataset": run_dataset,
    "experiment": run_experiments,
}
"""The verb handlers, by verb."""


def _client(args: argparse.Namespace) -> Client:
    from phoenix.client import Client

    url = args.url or os.environ.get(URL_ENV) or DEFAULT_URL
    return Client(base_url=url.rstrip("/"))


def _mirror(args: argparse.Namespace, client: Client) -> Any:
    from plangate.ci._phoenix_dataset import mirror_dataset

    return mirror_dataset(
        client, args.dataset, name=args.name, project=args.project,
        sessions=args.session, timeout=args.timeout,
    )  # fmt: skip


def _read_scores(path: str) -> Any:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from plangate.ci._phoenix import AnnotationError

    try:
        return pq.read_table(path)
    except (OSError, pa.ArrowInvalid) as exc:
        raise AnnotationError(f"cannot read the score table {path}: {exc}") from exc


def _print_failures(scores: Any, urls: dict[tuple[str, int], str] | Any) -> None:
    failing = [
        row
        for row in scores.to_pylist()
        if not row["passed"] and (row["session_id"], row["turn_index"]) in urls
    ]
    for row in failing[:SHOWN_FAILURES]:
        key = (row["session_id"], row["turn_index"])
        print(f"  {row['evaluator']} failed {key[0]} turn {key[1]}: {urls[key]}")
    if len(failing) > SHOWN_FAILURES:
        print(f"  … and {len(failing) - SHOWN_FAILURES} more")
