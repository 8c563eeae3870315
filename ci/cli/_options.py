"""Options several commands share, one spelling each: Phoenix, the agent, sessions, outputs.

Imports nothing heavy (see `_arguments`).
"""

from __future__ import annotations

import argparse
import math

from plangate.ci.cli._flags import at_least_one, endpoint
from plangate.ci.phoenix.names import (
    DEFAULT_PROJECT,
    DEFAULT_URL,
    PROJECT_ENV,
    URL_ENV,
)

DEFAULT_STORE = ".plangate/runs.db"
"""Where `plangate runs`, `plan` and `resume` look for saved sessions."""
STORE_ENV = "PLANGATE_STORE"
MODEL = "sim:NAME (a simulated model; `plangate models` lists them) or openai:MODEL"
TOOLS = ("cassette", "live")
"""Where replayed tool results come from (tested to match `plangate.replay.TOOL_SOURCES`: the
parser does not import replay, which loads pyarrow)."""


def export_to_phoenix(parser: argparse.ArgumentParser) -> None:
    """`--phoenix-url` and `--phoenix-project` for a command whose spans may go to Phoenix."""
    parser.add_argument(
        "--phoenix-url",
        metavar="URL",
        default=None,
        help=f"also export the spans to this Phoenix and check that they all arrived (default: "
        f"${URL_ENV}; without either, nothing is exported)",
    )
    parser.add_argument(
        "--phoenix-project",
        metavar="NAME",
        default=None,
        help=f"the Phoenix project of the exported spans (default: ${PROJECT_ENV} or "
        f"{DEFAULT_PROJECT})",
    )
    parser.add_argument(
        "--phoenix-required",
        action="store_true",
        help="exit 2 if Phoenix does not answer (default: warn and go on without the export)",
    )


def talk_to_phoenix(
    parser: argparse.ArgumentParser,
    *,
    project: str | None,
    what: str,
    timeout: bool = True,
    required: bool = False,
) -> None:
    """`--phoenix-url` and `--phoenix-project` (and `--timeout`) for a command that uses Phoenix.

    `project` is the default project (None: `$PLANGATE_PHOENIX_PROJECT` or `plangate`), `what`
    says what the project holds; `required` makes both flags required (no defaults).
    """
    parser.add_argument(
        "--phoenix-url",
        metavar="URL",
        default=None,
        required=required,
        help="the Phoenix server"
        + ("" if required else f" (default: ${URL_ENV} or {DEFAULT_URL})"),
    )
    default = project if project is not None else f"${PROJECT_ENV} or {DEFAULT_PROJECT}"
    parser.add_argument(
        "--phoenix-project",
        metavar="NAME",
        default=project,
        required=required,
        help=f"the Phoenix project {what}" + ("" if required else f" (default: {default})"),
    )
    if timeout:
        parser.add_argument(
            "--timeout",
            type=float,
            default=60.0,
            metavar="SECONDS",
            help="how long to wait for spans to be ingested (default 60)",
        )


def agent_options(
    parser: argparse.ArgumentParser,
    *,
    variant: str | None,
    model: str | None,
    teams: bool = False,
) -> None:
    """`--variant`, `--model`, `--domain` and `--seed`: which agent runs, on what.

    With `teams`, a team's own agent may run instead of a variant (`--agent` and its settings).
    """
    parser.add_argument(
        "--variant",
        default=variant,
        required=variant is None and not teams,
        help="harness variant: a name (`plangate variants` lists them) or a .toml file"
        + (f" (default {variant})" if variant else "")
        + (" (or --agent)" if teams else ""),
    )
    if teams:
        team_agent(parser)
    parser.add_argument(
        "--model",
        default=model,
        required=model is None,
        help=MODEL + (f" (default {model})" if model else ""),
    )
    parser.add_argument(
        "--domain",
        default="observability",
        help="demo domain: its tools and data (`plangate domains` lists them; default "
        "observability)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of a simulated model (default 0)")
    endpoint(parser)


def team_agent(parser: argparse.ArgumentParser, what: str = "run") -> None:
    """`--agent SPEC` and its variant settings: a team's own agent behind the agent boundary."""
    parser.add_argument(
        "--agent",
        metavar="SPEC",
        help=f"{what} your own agent instead of plangate's: python:package.module:factory, "
        "command:ARGV... (one JSON turn per line on stdin/stdout) or http:URL",
    )
    parser.add_argument(
        "--agent-env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="an environment variable for a command: agent (repeatable)",
    )
    parser.add_argument(
        "--agent-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="an extra argument for a command: agent (repeatable)",
    )
    parser.add_argument(
        "--agent-kwarg",
        action="append",
        default=[],
        metavar="NAME=JSON",
        help="a keyword argument for a python: agent's factory, its value JSON or text "
        "(repeatable)",
    )
    parser.add_argument(
        "--agent-mcp",
        action="append",
        default=[],
        metavar="NAME=SOURCE",
        help="an MCP server of the agent, served through plangate (recorded, or from the "
        "cassette): NAME is the environment variable it reads the URL from, SOURCE is "
        "plangate:DOMAIN, stdio:COMMAND ARGS or an http:// URL (repeatable)",
    )


def session_filter(parser: argparse.ArgumentParser, what: str = "only this session") -> None:
    parser.add_argument(
        "--session", action="append", metavar="ID", help=f"{what} (repeatable; default: all)"
    )


def json_output(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("--json", action="store_true", help=f"print {what} as JSON")


def store_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--store",
        metavar="FILE",
        help=f"the session store (SQLite; default: ${STORE_ENV} or {DEFAULT_STORE})",
    )


def dataset_output(parser: argparse.ArgumentParser) -> None:
    """`-o/--output` and `--name`: the golden dataset a command writes."""
    parser.add_argument(
        "-o", "--output", required=True, metavar="datasets/NAME", help="the dataset folder"
    )
    parser.add_argument("--name", help="the dataset's name (default: the folder's name)")
    force(parser, "dataset")


def redact(parser: argparse.ArgumentParser) -> None:
    """`--redact REGEX`: the user's own secrets, besides the built-in detectors."""
    parser.add_argument(
        "--redact",
        action="append",
        default=[],
        metavar="REGEX",
        help="also redact what this matches, besides the built-in secret detectors (repeatable)",
    )


def force(parser: argparse.ArgumentParser, what: str) -> None:
    """`--force`: replace an existing output (without it, an existing one is an error)."""
    parser.add_argument(
        "--force", action="store_true", help=f"replace an existing {what} at the -o path"
    )


def evaluator_choice(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--evaluator", action="append", help="only this evaluator (repeatable; default: all)"
    )


def tool_source(parser: argparse.ArgumentParser, *, default: str | None = "cassette") -> None:
    """`--tools`; without a default, the gate file's choice stands."""
    parser.add_argument(
        "--tools",
        default=default,
        choices=TOOLS,
        help="where tool results come from"
        + ("" if default is not None else " (default: the gate's)"),
    )


# -- the run's budget (`gate`, `replay`) ------------------------------------------------------


def run_budget(parser: argparse.ArgumentParser, *, gate: bool = False) -> None:
    """`--budget-tokens`, `--budget-usd` and `--price-as`: what a run's turns may spend."""
    where = "; wins over the gate file's gate.budget_tokens" if gate else ""
    parser.add_argument(
        "--budget-tokens",
        type=at_least_one,
        metavar="N",
        help="stop starting turns once the finished ones used N tokens (what their spans "
        f"record); the rest are reported as not run, exit 2{where}",
    )
    parser.add_argument(
        "--budget-usd",
        type=_dollars,
        metavar="DOLLARS",
        help="stop starting turns once the finished ones cost this many US dollars (priced "
        "with genai-prices); the rest are reported as not run, exit 2",
    )
    parser.add_argument(
        "--price-as",
        metavar="MODEL",
        help="for --budget-usd: price every model call as this model (e.g. gpt-4o-mini): for "
        "sim: models, or a model genai-prices does not know",
    )


def _dollars(text: str) -> float:
    """An argparse type: a number of US dollars > 0."""
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"must be a number of US dollars > 0, not {text!r}")
    return value
