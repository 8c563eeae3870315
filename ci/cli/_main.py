"""The `plangate` command: its parser, and the handler of each command, loaded when it runs.

One exit-code contract for every command:

- 0: success, or the gate passes;
- 1: a regression (or a failed demo claim, or differences found by `dataset validate` and
  `replay`);
- 2: unusable input (an unknown variant, a malformed or unreadable file, a model endpoint that
  kept failing, a gate that cannot decide), with one line that names it;
- 3: an internal error: one line, and the path of a log file that holds the traceback;
- 130: interrupted (Ctrl-C), one line; 143: terminated (SIGTERM: `kill`, `timeout`, a CI job
  cancelled), one line, after the same cleaning up;
- 141: the reader of the output went away (`plangate eval … | head`), silently, as a
  program that SIGPIPE ends.

Never a traceback on the terminal. Each command's handler module is imported only when that
command runs, so a command pays only for what it uses (`plangate run` never loads pandas).
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NoReturn, cast

from plangate.ci.cli._arguments import add_commands
from plangate.ci.cli._flags import ENDPOINT_FLAGS
from plangate.ci.cli._stderr import redacted, say, use
from plangate.harness import PlangateError

EXIT_USAGE = 2
EXIT_INTERNAL = 3
EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141
EXIT_TERMINATED = 143
LOG_FOLDER_VARIABLE = "PLANGATE_LOG_DIR"
"""Where internal-error logs go (default: `plangate` in the system's temporary folder)."""

HANDLERS = {
    "run": "plangate.ci.cli._run:run",
    "variants": "plangate.ci.cli._run:variants",
    "domains": "plangate.ci.cli._run:domains",
    "models": "plangate.ci.cli._run:models",
    "demo": "plangate.ci.cli._demo:demo",
    "import": "plangate.ci.cli._eval:import_files",
    "export atif": "plangate.ci.cli._export:atif",
    "eval": "plangate.ci.cli._eval:score_table",
    "agreement": "plangate.ci.cli._agreement:agreement",
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


class _Parser(argparse.ArgumentParser):
    """argparse, but a mistake is one line (the usage is a `--help` away), as every error is."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, redacted(f"{self.prog}: error: {message} (see {self.prog} --help)\n"))


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of `plangate`."""
    parser = _Parser(
        prog="plangate", description="Evaluation and regression harness for LLM planning agents."
    )
    parser.add_argument(
        "--version", action=_Version, nargs=0, help="print plangate's version and exit"
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add_commands(commands)
    return parser


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the program is: it unwinds (and cleans up) as Ctrl-C does."""


def _terminate(signum: int, frame: object) -> None:
    raise Terminated


def main(argv: Sequence[str] | None = None) -> int:
    """Run the `plangate` command line; returns the exit code."""
    if threading.current_thread() is not threading.main_thread():
        return _main(argv)  # only the main thread takes signals (a test's thread, say)
    before = signal.signal(signal.SIGTERM, _terminate)
    try:
        return _main(argv)
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL if before is None else before)


def _main(argv: Sequence[str] | None) -> int:
    try:
        args = build_parser().parse_args(argv)
        use(getattr(args, "redact", None) or ())  # each line said from now on: the user's too
        verb = getattr(args, f"{args.command}_command", None)
        _system_allocator()
        for flag, variable in ENDPOINT_FLAGS.items():  # read where openai: models are made
            if getattr(args, flag, None) is not None:
                os.environ[variable] = str(getattr(args, flag))
        return handler(f"{args.command} {verb}" if verb else args.command)(args)
    except PlangateError as exc:
        say("error", exc)
        return EXIT_USAGE
    except KeyboardInterrupt as exc:
        terminated = isinstance(exc, Terminated)
        print(f"plangate: {'terminated' if terminated else 'interrupted'}", file=sys.stderr)
        return EXIT_TERMINATED if terminated else EXIT_INTERRUPTED
    except BrokenPipeError:
        # Nobody reads what is left to print; Python's own last flush must not complain either.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    except OSError as exc:
        if exc.filename is None:
            return _internal(exc)
        # A path the user named (or its folder) cannot be read or written: full, read-only,
        # missing. Nothing of ours is broken; the path and the reason say what to fix.
        say("error", f"{exc.filename}: {exc.strerror or exc}")
        return EXIT_USAGE
    except Exception as exc:
        return _internal(exc)


def _system_allocator() -> None:
    """Arrow allocates through the C library's malloc, unless `ARROW_DEFAULT_MEMORY_POOL` says.

    Arrow's default (mimalloc) hands freed pages back to the system soon after, so tables of the
    same size made one after another fault their memory in again, thousands of pages a table;
    with one allocator for Arrow and NumPy the memory is reused (`make bench`: the evaluators
    10-20 % faster, streaming about 15 % faster with a lower peak RSS). A command only: a library
    does not change its caller's process. Arrow reads the variable when it is imported (the
    commands that need no table never import it); a caller that imported it already is switched.
    """
    if "ARROW_DEFAULT_MEMORY_POOL" in os.environ:
        return
    os.environ["ARROW_DEFAULT_MEMORY_POOL"] = "system"  # a local Ray's workers inherit it too
    pyarrow = sys.modules.get("pyarrow")
    if pyarrow is not None:
        pyarrow.set_memory_pool(pyarrow.system_memory_pool())


def _internal(exc: BaseException) -> int:
    """A bug: one line, and the traceback in a log file (secrets redacted) for the report."""
    # Imported here, on the error path only: no command pays for them at start-up.
    import datetime
    import tempfile
    import traceback

    line = f"{type(exc).__name__}: {_first_line(exc)}"
    where = ""
    try:
        from plangate.harness import write_text_atomic

        line = redacted(line)
        folder = Path(
            os.environ.get(LOG_FOLDER_VARIABLE) or Path(tempfile.gettempdir()) / "plangate"
        )
        folder.mkdir(parents=True, exist_ok=True)
        stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
        log = folder / f"crash-{stamp}-{os.getpid()}.log"
        write_text_atomic(log, redacted("".join(traceback.format_exception(exc))))
        where = f"; the traceback is in {log}"
    except Exception:  # the log is a courtesy: never hide the error behind a second one
        pass
    print(f"plangate: internal error: {line}{where} (please report it)", file=sys.stderr)
    return EXIT_INTERNAL


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else "(no message)"


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
