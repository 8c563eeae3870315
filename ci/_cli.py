"""The `plangate` command: one subcommand per verb.

A user's mistake (an unknown variant, model or domain, a malformed variant file) exits with
code 2 and a message that names it and lists the choices, never a traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Sequence

from plangate.ci._dataset_cli import add_commands as add_dataset_commands
from plangate.ci._dataset_cli import run_dataset, run_record, run_replay
from plangate.ci._eval_cli import add_commands, run_eval, run_import
from plangate.ci._gate_cli import add_commands as add_gate_commands
from plangate.ci._gate_cli import run_compare_command, run_gate_command
from plangate.ci._phoenix_cli import add_commands as add_phoenix_commands
from plangate.ci._phoenix_cli import run_phoenix
from plangate.ci._phoenix_export import add_phoenix_options, exporting, with_export
from plangate.ci._runs_cli import add_commands as add_run_commands
from plangate.ci._runs_cli import run_plan, run_resume, run_runs
from plangate.ci._telemetry import telemetry
from plangate.harness import (
    BEHAVIOURS,
    Agent,
    PlangateError,
    SessionStore,
    TurnResult,
    builtin_variants,
    domain_names,
    get_domain,
    load_variant,
    model_from_spec,
)

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of `plangate`."""
    parser = argparse.ArgumentParser(
        prog="plangate", description="Evaluation and regression harness for LLM planning agents."
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = commands.add_parser("run", help="run one request through the reference agent")
    run.add_argument("request", help="what the user asks")
    run.add_argument("--variant", default="alyx", help="variant name or path to a .toml file")
    run.add_argument(
        "--model", default="sim:diligent", help="sim:NAME or openai:MODEL (default sim:diligent)"
    )
    run.add_argument("--domain", default="observability", help="demo domain (tools and data)")
    run.add_argument("--seed", type=int, default=0, help="seed of a simulated model")
    run.add_argument("--session", default=None, help="session id (default: a random one)")
    run.add_argument("--json", action="store_true", help="print one JSON object")
    run.add_argument("--store", help="save the session here (SQLite) after every change")
    run.add_argument(
        "--otlp",
        metavar="URL",
        default=None,
        help="also export spans over OTLP/HTTP to this traces URL",
    )
    add_phoenix_options(run)

    demo = commands.add_parser("demo", help="variants × simulated models on the demo domains")
    demo.add_argument("--domain", action="append", help="only this domain (repeatable)")
    demo.add_argument("--seed", type=int, default=0, help="seed of the simulated models")
    demo.add_argument("--gate", default=None, help="gate file to run (default: the shipped one)")
    demo.add_argument("-o", "--output", default="out/demo", help="report folder (default out/demo)")

    add_commands(commands)
    add_run_commands(commands)
    add_dataset_commands(commands)
    add_gate_commands(commands)
    add_phoenix_commands(commands)
    commands.add_parser("variants", help="list the shipped harness variants")
    commands.add_parser("domains", help="list the demo domains")
    commands.add_parser("models", help="list the simulated models")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the `plangate` command line; returns the exit code."""
    args = build_parser().parse_args(argv)
    try:
        return _dispatch(args)
    except PlangateError as exc:
        print(f"plangate: error: {exc}", file=sys.stderr)
        return EXIT_USAGE


def _dispatch(args: argparse.Namespace) -> int:
    handlers = {
        "run": _run,
        "demo": _demo,
        "import": run_import,
        "eval": run_eval,
        "runs": run_runs,
        "plan": run_plan,
        "resume": run_resume,
        "gate": run_gate_command,
        "compare": run_compare_command,
        "record": run_record,
        "dataset": run_dataset,
        "replay": run_replay,
        "phoenix": run_phoenix,
        "variants": _variants,
        "domains": _domains,
        "models": _models,
    }
    return handlers[args.command](args)


def _variants(args: argparse.Namespace) -> int:
    for name in builtin_variants():
        print(f"{name:14s} {load_variant(name).description}")
    return EXIT_OK


def _domains(args: argparse.Namespace) -> int:
    for name in domain_names():
        print(f"{name:14s} {get_domain(name).description}")
    return EXIT_OK


def _models(args: argparse.Namespace) -> int:
    for behaviour in BEHAVIOURS:
        print(f"sim:{behaviour}")
    print("openai:MODEL   (PLANGATE_OPENAI_BASE_URL, PLANGATE_OPENAI_API_KEY)")
    return EXIT_OK


def _run(args: argparse.Namespace) -> int:
    variant = load_variant(args.variant)
    domain = get_domain(args.domain)
    model = model_from_spec(args.model, domain=domain, seed=args.seed)
    wiring = telemetry("otlp", endpoint=args.otlp) if args.otlp else telemetry("none")
    metadata = {
        "domain": domain.name,
        "model": args.model,
        "seed": args.seed,
        "variant_source": args.variant,
    }
    with exporting(args) as export:
        agent = Agent(
            model=model,
            variant=variant,
            tools=domain.make_tools,
            instructions=domain.instructions,
            tracer_provider=with_export(wiring.provider, export),
            store=SessionStore(args.store) if args.store else None,
        )
        try:
            session = agent.session(args.session, metadata=metadata)
            result = asyncio.run(session.run_turn(args.request))
        finally:
            wiring.shutdown()
    if args.json:
        print(json.dumps(result.to_dict(), ensure_ascii=False))
    else:
        print_trajectory(result)
    if result.stop_reason == "awaiting_approval":
        store = f" --store {args.store}" if args.store else ""
        print(
            f"paused for plan approval: `plangate plan {session.session_id}{store}`, then "
            f"`plangate resume {session.session_id}{store} --approve | --plan FILE | --reject`",
            file=sys.stderr,
        )
    return EXIT_OK


def _demo(args: argparse.Namespace) -> int:
    from plangate.ci._demo import main_gate, main_matrix

    names = args.domain or domain_names()
    for name in names:
        get_domain(name)
    _, all_hold = main_matrix(names, seed=args.seed)
    gate_holds = main_gate(args.gate, args.output)
    return EXIT_OK if all_hold and gate_holds else EXIT_FAILED


def print_trajectory(result: TurnResult) -> None:
    """A readable account of a turn: each call and its result, events, the plan, the stop."""
    print(f"request: {result.request}")
    for call in result.tool_calls:
        mark = {"ok": "→", "error": "✗", "not_run": "·"}[call.status]
        print(f"  {call.iteration:>2} {mark} {call.name} {_short(call.arguments)}")
        print(f"       {_short(call.content)}")
    for event in result.events:
        if event.kind not in ("plan_updated", "stop"):
            print(f"  [{event.kind} at call {event.iteration}] {_short(event.detail)}")
    if result.plan:
        print("plan:")
        for item in result.plan:
            reason = f" ({item.reason})" if item.reason else ""
            print(f"  {item.status:11s} {item.id}. {item.text}{reason}")
    detail = f" ({result.stop_detail})" if result.stop_detail else ""
    print(f"stop: {result.stop_reason}{detail} after {result.iterations} model calls")
    if result.answer:
        print(f"answer: {result.answer}")


def _short(text: str, limit: int = 110) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
