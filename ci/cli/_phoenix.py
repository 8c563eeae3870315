"""`plangate phoenix …`: plangate's results in Phoenix (the local server: `_server`).

    plangate phoenix annotate SCORES.parquet TABLE.parquet
    plangate phoenix dataset DATASET
    plangate phoenix experiment DATASET [--variant V]... [--agent SPEC]... --model SPEC
    plangate dataset from-phoenix --phoenix-url URL --phoenix-project P [--session ID]... -o PATH

Every command that talks to Phoenix takes `--phoenix-url` (default: $PLANGATE_PHOENIX_URL, or
the local server) and `--phoenix-project`.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

import pyarrow.parquet as pq

from plangate.ci.cli._exporting import phoenix_project, phoenix_url
from plangate.ci.gate import side_of
from plangate.ci.phoenix import (
    annotate,
    check_experiment,
    client_url,
    compare_url,
    golden_from_phoenix,
    mirror_dataset,
    run_experiment,
)
from plangate.evaluators import agent_spans
from plangate.evaluators.scores import EVALUATOR, FAIL, OUTCOME, read_scores
from plangate.harness import PlangateError, check_output
from plangate.replay import DATASET_FILES, MANIFEST
from plangate.replay.agents import AgentSpec
from plangate.replay.schema import SESSION_ID, TURN_INDEX

if TYPE_CHECKING:
    from phoenix.client import Client

SHOWN_FAILURES = 20
"""Failing turns listed with their Phoenix links."""


def from_phoenix(args: argparse.Namespace) -> int:
    """`plangate dataset from-phoenix --phoenix-url URL --phoenix-project P -o PATH`: goldens."""
    check_output(
        args.output, force=args.force, what="a golden dataset", marker=MANIFEST,
        owns=DATASET_FILES,
    )  # fmt: skip
    url, project = phoenix_url(args), phoenix_project(args)
    target = golden_from_phoenix(
        url, project, args.session, args.output, name=args.name, redact=args.redact
    )
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
    scores = read_scores(args.scores)
    traces = agent_spans(args.traces)  # a file, a folder or a glob, as `eval` reads it
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
    """`plangate phoenix experiment DATASET --variant V... --agent A... --model M`: side by side."""
    if not args.variant and not args.agent:
        raise PlangateError("give at least one --variant (plangate's agent) or --agent (yours)")
    agents = [side_of(text, model=args.model, tools=args.tools).agent for text in args.agent]
    chosen: list[str | AgentSpec] = [*args.variant, *(a for a in agents if a is not None)]
    if len(chosen) < len(args.variant) + len(args.agent):
        raise PlangateError("--agent names an agent; give a harness variant with --variant")
    check_experiment(args.dataset, chosen, model=args.model, evaluators=args.evaluator)
    client = _client(args)  # only once every input is known good
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
        for variant in chosen
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


def _client(args: argparse.Namespace) -> Client:
    from phoenix.client import Client  # here: `import plangate.ci` never loads the client

    return Client(base_url=phoenix_url(args))


def _mirror(args: argparse.Namespace, client: Client) -> Any:
    return mirror_dataset(
        client, args.dataset, name=args.name, project=args.phoenix_project,
        sessions=args.session, timeout=args.timeout,
    )  # fmt: skip


def _print_failures(scores: Any, urls: dict[tuple[str, int], str] | Any) -> None:
    failing = [
        row
        for row in scores.to_pylist()
        if row[OUTCOME] == FAIL and (row[SESSION_ID], row[TURN_INDEX]) in urls
    ]
    for row in failing[:SHOWN_FAILURES]:
        key = (row[SESSION_ID], row[TURN_INDEX])
        print(f"  {row[EVALUATOR]} failed {key[0]} turn {key[1]}: {urls[key]}")
    if len(failing) > SHOWN_FAILURES:
        print(f"  … and {len(failing) - SHOWN_FAILURES} more")
