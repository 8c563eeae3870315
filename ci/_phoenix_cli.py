"""`plangate phoenix up | down | status` and `plangate dataset from-phoenix`.

    plangate phoenix up [--dir .plangate/phoenix] [--port 6006] [--grpc-port 4317] [--env DIR]
    plangate phoenix status [--dir ...]     # exit 0 running, 1 not
    plangate phoenix down [--dir ...]
    plangate dataset from-phoenix --url URL --project P [--session ID]... -o datasets/NAME

The server runs from its own environment and binds 127.0.0.1 only (see `ci._phoenix_server`).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from plangate.ci._phoenix_server import DEFAULT_FOLDER, PhoenixServer, down, status, up

EXIT_RUNNING = 0
EXIT_NOT_RUNNING = 1


def add_commands(commands: Any) -> None:
    """Add `phoenix up | down | status | annotate | dataset | experiment` to the subcommands."""
    phoenix = commands.add_parser("phoenix", help="a local Phoenix server (127.0.0.1 only)")
    verbs = phoenix.add_subparsers(dest="phoenix_command", required=True, metavar="VERB")
    starting = verbs.add_parser("up", help="start it (if not running) and wait until healthy")
    stopping = verbs.add_parser("down", help="stop it")
    asking = verbs.add_parser("status", help="is it running? (exit 0 yes, 1 no)")
    from plangate.ci._phoenix_eval_cli import add_commands as add_eval_commands

    add_eval_commands(verbs)  # annotate, dataset, experiment
    for verb in (starting, stopping, asking):
        verb.add_argument(
            "--dir", default=str(DEFAULT_FOLDER), help=f"data folder (default {DEFAULT_FOLDER})"
        )
    starting.add_argument("--port", type=int, default=6006, help="HTTP port: UI, REST, OTLP")
    starting.add_argument("--grpc-port", type=int, default=4317, help="OTLP/gRPC port")
    starting.add_argument(
        "--env", default=None, help="server environment (default .venv-phoenix, made on first use)"
    )


def add_from_phoenix(verbs: Any) -> None:
    """Add `from-phoenix` to the `plangate dataset` verbs."""
    pulling = verbs.add_parser("from-phoenix", help="a golden dataset from sessions in Phoenix")
    pulling.add_argument(
        "--url", required=True, help="Phoenix base URL, e.g. http://127.0.0.1:6006"
    )
    pulling.add_argument("--project", required=True, help="the Phoenix project")
    pulling.add_argument(
        "--session", action="append", help="only this session, Phoenix or original id (repeatable)"
    )
    pulling.add_argument("-o", "--output", required=True, metavar="datasets/NAME")
    pulling.add_argument("--name", help="dataset name (default: the output folder's name)")


def run_phoenix(args: argparse.Namespace) -> int:
    """`plangate phoenix up | down | status | annotate | dataset | experiment`."""
    from plangate.ci._phoenix_eval_cli import HANDLERS

    if args.phoenix_command in HANDLERS:
        return HANDLERS[args.phoenix_command](args)
    if args.phoenix_command == "up":
        running = status(args.dir)
        server = running or up(args.dir, port=args.port, grpc_port=args.grpc_port, env=args.env)
        _describe(server, "already running" if running else "up")
        return EXIT_RUNNING
    if args.phoenix_command == "down":
        stopped = down(args.dir)
        print(
            f"Phoenix stopped ({args.dir})" if stopped else f"Phoenix was not running ({args.dir})"
        )
        return 0
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


def run_from_phoenix(args: argparse.Namespace) -> int:
    """`plangate dataset from-phoenix --url URL --project P [--session ID]... -o PATH`."""
    import pyarrow.parquet as pq

    from plangate.ci._phoenix_fetch import golden_from_phoenix

    target = golden_from_phoenix(args.url, args.project, args.session, args.output, name=args.name)
    counts = {
        name: pq.read_metadata(target / f"{name}.parquet").num_rows
        for name in ("sessions", "turns", "spans")
    }
    print(
        f"{target}: {counts['sessions']} sessions, {counts['turns']} turns, "
        f"{counts['spans']} spans from Phoenix project {args.project!r}"
    )
    return 0
