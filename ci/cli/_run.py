"""`plangate run`, `variants`, `domains` and `models`: the reference agent from the command line."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from plangate.ci._telemetry import telemetry
from plangate.ci.cli._exporting import exporting
from plangate.ci.cli._printing import report_turn
from plangate.ci.phoenix import with_export
from plangate.harness import (
    BEHAVIOURS,
    Agent,
    ConfigError,
    SessionStore,
    builtin_variants,
    domain_names,
    get_domain,
    load_variant,
    model_from_spec,
    read_text,
)

EXIT_OK = 0


def variants(args: argparse.Namespace) -> int:
    """`plangate variants`: the shipped harness variants."""
    for name in builtin_variants():
        print(f"{name:14s} {load_variant(name).description}")
    return EXIT_OK


def domains(args: argparse.Namespace) -> int:
    """`plangate domains`: the demo domains."""
    for name in domain_names():
        print(f"{name:14s} {get_domain(name).description}")
    return EXIT_OK


def models(args: argparse.Namespace) -> int:
    """`plangate models`: the simulated models (and how to use a real one)."""
    for behaviour in BEHAVIOURS:
        print(f"sim:{behaviour}")
    print("openai:MODEL   (PLANGATE_OPENAI_BASE_URL, PLANGATE_OPENAI_API_KEY)")
    return EXIT_OK


def read_request(text: str) -> str:
    """The request as given: `@FILE` reads a file (UTF-8), `-` standard input, else the text."""
    if text == "-":
        return sys.stdin.read()
    if not text.startswith("@"):
        return text
    path = Path(text[1:])
    request = read_text(path, "request file")
    if not request.strip():
        raise ConfigError(f"{path}: the request file is empty; write the request in it")
    return request


def run(args: argparse.Namespace) -> int:
    """`plangate run REQUEST`: one turn of the reference agent, its trajectory printed.

    Exit 0 when the turn ran (whatever the agent did), 2 when the model or the tools failed for
    good (`model_error`, `tool_error`: nothing the agent did can be judged from it).
    """
    request = read_request(args.request)
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
            result = asyncio.run(session.run_turn(request))
        finally:
            wiring.shutdown()
    code = report_turn(result, as_json=args.json)
    if result.stop_reason == "awaiting_approval":
        store = f" --store {args.store}" if args.store else ""
        print(
            f"paused for plan approval: `plangate plan {session.session_id}{store}`, then "
            f"`plangate resume {session.session_id}{store} --approve | --plan FILE | --reject`",
            file=sys.stderr,
        )
    return code
