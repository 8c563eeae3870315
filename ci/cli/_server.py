"""`plangate phoenix up | down | status [--dir .plangate/phoenix]`: the local Phoenix server.

The server runs from its own environment and binds 127.0.0.1 only (`plangate.ci.phoenix`'s
server module). These commands load nothing but it: no pandas, no Arrow, no Phoenix client.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from plangate.ci.phoenix import PhoenixServer, down, status, up

EXIT_RUNNING = 0
EXIT_NOT_RUNNING = 1


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
