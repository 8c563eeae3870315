"""`plangate phoenix …`: a local Phoenix server, and plangate's results in Phoenix.

    plangate phoenix up | down | status [--dir .plangate/phoenix]
    plangate phoenix annotate SCORES.parquet TABLE.parquet
    plangate phoenix dataset DATASET
    plangate phoenix experiment DATASET --variant V [--variant V2] --model SPEC
    plangate dataset from-phoenix [--session ID]... -o datasets/NAME

The server runs from its own environment and binds 127.0.0.1 only (`plangate.ci.phoenix._server`).
Every command that talks to Phoenix takes `--phoenix-url` (default: $PLANGATE_PHOENIX_URL, or
the local server) and `--phoenix-project`.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from plangate.ci.phoenix import (
    AnnotationError,
    PhoenixServer,
    annotate,
    client_url,
    compare_url,
    down,
    golden_from_phoenix,
    mirror_dataset,
    run_experiment,
    status,
    up,
)
from plangate.ci.phoenix.names import DEFAULT_PROJECT, DEFAULT_URL, PROJECT_ENV, URL_ENV
from plangate.evaluators.scores import EVALUATOR, PASSED
from plangate.replay import read_table
from plangate.replay.schema import SESSION_ID, TURN_INDEX

if TYPE_CHECKING:
    from phoenix.client import Client

EXIT_RUNNING = 0
EXIT_NOT_RUNNING = 1
SHOWN_FAILURES = 20
"""Failing turns listed with their Phoenix links."""


def start(args: argparse.Namespace) -> int:
    """`plangate phoenix up`: start the local server if it is not running; wait until healthy."""
    running = status(args.dir)
    server = running or up(
        args.dir, port=args.port, grpc_port=args.grpc_port, env=args.env, progress=print
    )
    _describe(server, "already running" if running else "up")
    return EXIT_RUNNING


def stop(args: argparse.Namespace) -> int:
    """`plangate phoenix down`: stop the local server."""
    stopped = down(args.dir)
    print(f"Phoenix stopped ({args.dir})" if stopped else f"Phoenix was not running ({args.dir})")
    return 0


def show_status(args: argparse.Namespace) -> int:
    """`plangate phoenix status`: exit 0 when the local server is running, 1 when not."""
    found = status(args.dir)
    if found is None:
        print(f"Phoenix: not running ({Path(args.dir).resolve()})")
        return EXIT_NOT_RUNNING
    _describe(found, "running")
    return EXIT_RUNNING


def _describe(server: PhoenixServer, state: str) -> None:
    print(f"Phoenix: {state} at {server.url}")
    print(f"  OTLP traces: {server.traces_url} (HTTP), 127.0.0.1:{server.grpc_port} (gRPC)")
    print(f"  pid {server.pid}, data in {server.folder}")


def from_phoenix(args: argparse.Namespace) -> int:
    """`plangate dataset from-phoenix [--session ID]... -o PATH`: goldens from Phoenix."""
    url, project = phoenix_url(args), phoenix_project(args)
    target = golden_from_phoenix(url, project, args.session, args.output, name=args.name)
    counts = {
        name: pq.read_metadata(target / f"{name}.parquet").num_rows
        for name in ("sessions", "turns", "spans")
    }
    print(
        f"{target}: {counts['sessions']} sessions, {counts['turns']} turns, "
        f"{counts['spans']} spans from Phoenix project {project!r}"
    )
    return 0


def annotate_scores(args: argparse.Namespace) -> int:
    """`plangate phoenix annotate SCORES TRACES`: a score table as annotations on its turns."""
    scores = _read_scores(args.scores)
    traces = read_table(args.traces)
    project = phoenix_project(args)
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


def mirror(args: argparse.Namespace) -> int:
    """`plangate phoenix dataset DATASET`: a golden dataset as a Phoenix dataset."""
    mirrored = _mirror(args, _client(args))
    print(
        f"{mirrored.name}: {mirrored.examples} examples ({mirrored.created} new, "
        f"{mirrored.linked} linked to spans; {mirrored.spans} spans uploaded to project "
        f"{mirrored.project})\n{mirrored.url}"
    )
    return 0


def experiments(args: argparse.Namespace) -> int:
    """`plangate phoenix experiment DATASET --variant V... --model SPEC`: variants side by side."""
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
    print(f"compare: {compare_url(client_url(client), mirrored.id, [e.id for e in ran])}")
    return 0 if all(e.failed_runs == 0 for e in ran) else 1


def phoenix_url(args: argparse.Namespace) -> str:
    """The server a Phoenix command talks to: `--phoenix-url`, $PLANGATE_PHOENIX_URL, or local."""
    url: str = args.phoenix_url or os.environ.get(URL_ENV) or DEFAULT_URL
    return url.rstrip("/")


def phoenix_project(args: argparse.Namespace) -> str:
    """The project: `--phoenix-project`, $PLANGATE_PHOENIX_PROJECT, or `plangate`."""
    project: str = args.phoenix_project or os.environ.get(PROJECT_ENV) or DEFAULT_PROJECT
    return project


def _client(args: argparse.Namespace) -> Client:
    from phoenix.client import Client  # here: `import plangate.ci` never loads the client

    return Client(base_url=phoenix_url(args))


def _mirror(args: argparse.Namespace, client: Client) -> Any:
    return mirror_dataset(
        client, args.dataset, name=args.name, project=args.phoenix_project,
        sessions=args.session, timeout=args.timeout,
    )  # fmt: skip


def _read_scores(path: str) -> Any:
    try:
        return pq.read_table(path)
    except (OSError, pa.ArrowInvalid) as exc:
        raise AnnotationError(f"cannot read the score table {path}: {exc}") from exc


def _print_failures(scores: Any, urls: dict[tuple[str, int], str] | Any) -> None:
    failing = [
        row
        for row in scores.to_pylist()
        if not row[PASSED] and (row[SESSION_ID], row[TURN_INDEX]) in urls
    ]
    for row in failing[:SHOWN_FAILURES]:
        key = (row[SESSION_ID], row[TURN_INDEX])
        print(f"  {row[EVALUATOR]} failed {key[0]} turn {key[1]}: {urls[key]}")
    if len(failing) > SHOWN_FAILURES:
        print(f"  … and {len(failing) - SHOWN_FAILURES} more")
