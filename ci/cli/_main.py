"""The `plangate` command: its parser, and the handler of each command, loaded when it runs.

A user's mistake (an unknown variant, model or domain, a malformed file) exits with code 2 and
one line that names it, never a traceback. Each command's handler module is imported only when
that command runs, so a command pays only for what it uses (`plangate run` never loads pandas).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Sequence
from typing import cast

from plangate.ci.cli._arguments import add_commands
from plangate.harness import PlangateError

EXIT_USAGE = 2

HANDLERS = {
    "run": "plangate.ci.cli._run:run",
    "variants": "plangate.ci.cli._run:variants",
    "domains": "plangate.ci.cli._run:domains",
    "models": "plangate.ci.cli._run:models",
    "demo": "plangate.ci.cli._demo:demo",
    "import": "plangate.ci.cli._eval:import_files",
    "eval": "plangate.ci.cli._eval:score_table",
    "runs": "plangate.ci.cli._runs:runs",
    "plan": "plangate.ci.cli._runs:plan",
    "resume": "plangate.ci.cli._runs:resume",
    "record": "plangate.ci.cli._dataset:record",
    "dataset validate": "plangate.ci.cli._dataset:validate",
    "dataset from-traces": "plangate.ci.cli._dataset:from_traces",
    "dataset from-phoenix": "plangate.ci.cli._phoenix:from_phoenix",
    "dataset build": "plangate.ci.cli._build:build",
    "replay": "plangate.ci.cli._dataset:replay",
    "gate": "plangate.ci.cli._gate:gate",
    "compare": "plangate.ci.cli._gate:compare",
    "phoenix up": "plangate.ci.cli._server:start",
    "phoenix down": "plangate.ci.cli._server:stop",
    "phoenix status": "plangate.ci.cli._server:show_status",
    "phoenix annotate": "plangate.ci.cli._phoenix:annotate_scores",
    "phoenix dataset": "plangate.ci.cli._phoenix:mirror",
    "phoenix experiment": "plangate.ci.cli._phoenix:experiments",
}
"""Each command's handler (`COMMAND` or `COMMAND VERB`), as `module:function`: it takes the
parsed arguments and returns the exit code."""

Handler = Callable[[argparse.Namespace], int]


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of `plangate`."""
    parser = argparse.ArgumentParser(
        prog="plangate", description="Evaluation and regression harness for LLM planning agents."
    )
    parser.add_argument(
        "--version", action=_Version, nargs=0, help="print plangate's version and exit"
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add_commands(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the `plangate` command line; returns the exit code."""
    args = build_parser().parse_args(argv)
    verb = getattr(args, f"{args.command}_command", None)
    try:
        return handler(f"{args.command} {verb}" if verb else args.command)(args)
    except PlangateError as exc:
        print(f"plangate: error: {exc}", file=sys.stderr)
        return EXIT_USAGE


def handler(command: str) -> Handler:
    """The function that runs `command` (`COMMAND` or `COMMAND VERB`), its module imported now."""
    module, _, function = HANDLERS[command].partition(":")
    return cast(Handler, getattr(importlib.import_module(module), function))


class _Version(argparse.Action):
    """`--version`: the installed version, looked up only when asked for."""

    def __call__(self, parser: argparse.ArgumentParser, *args: object) -> None:
        from importlib import metadata  # here: loading it costs every other command 30-45 ms

        try:
            version = metadata.version("plangate")
        except metadata.PackageNotFoundError:  # run from a checkout that is not installed
            version = "(not installed)"
        print(f"plangate {version}")
        parser.exit()
