"""Checked values for flags (`--repeats` >= 1, seconds > 0), and an `openai:` model's patience.

`--model-timeout`, `--model-retries` and `--model-deadline` set the environment variables that
`plangate.harness.OpenAIModel.from_env` reads, so that they reach every model a command makes
(the gate's, a replay's) without passing through each layer; the gate also takes them as
`EndpointSettings` (`endpoint_flags`), which win over its file's `[gate]` settings. Imports
nothing heavy.
"""

from __future__ import annotations

import argparse

from plangate.harness.models import EndpointSettings

ENDPOINT_FLAGS = {
    "model_timeout": "PLANGATE_MODEL_TIMEOUT",
    "model_retries": "PLANGATE_MODEL_RETRIES",
    "model_deadline": "PLANGATE_MODEL_DEADLINE",
}
"""The endpoint flags and the environment variables they set (read where `openai:` models are
made; tested to match `plangate.harness.models`)."""


def at_least_one(text: str) -> int:
    """An argparse type: a whole number >= 1 (`--repeats`, `--jobs`)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1, not {text!r}")
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be a number of seconds > 0, not {text!r}")
    return value


def _retries(text: str) -> int:
    if not text.strip().isdecimal():
        raise argparse.ArgumentTypeError(f"must be a whole number >= 0, not {text!r}")
    return int(text)


def endpoint(parser: argparse.ArgumentParser) -> None:
    """`--model-timeout`, `--model-retries`, `--model-deadline`: an `openai:` model's patience."""
    parser.add_argument(
        "--model-timeout",
        type=_seconds,
        metavar="SECONDS",
        help="an openai: model's per-attempt timeout (default 60; env PLANGATE_MODEL_TIMEOUT)",
    )
    parser.add_argument(
        "--model-retries",
        type=_retries,
        metavar="N",
        help="retries after a failed attempt: 429, 5xx, timeouts (default 4; env "
        "PLANGATE_MODEL_RETRIES)",
    )
    parser.add_argument(
        "--model-deadline",
        type=_seconds,
        metavar="SECONDS",
        help="the most one model call may take, retries and waits included (default none; env "
        "PLANGATE_MODEL_DEADLINE)",
    )


def endpoint_flags(args: argparse.Namespace) -> EndpointSettings:
    """The endpoint flags a command was given, as settings (unset where a flag was not)."""
    return EndpointSettings(
        timeout=getattr(args, "model_timeout", None),
        retries=getattr(args, "model_retries", None),
        deadline=getattr(args, "model_deadline", None),
    )


JUDGE_MODES = ("replay", "record", "live")
"""`--judge`'s choices (tested to match `plangate.evaluators`' judge modes)."""


def judge(parser: argparse.ArgumentParser, cassette: str) -> None:
    """`--judge MODE`, `--judge-cassette FILE`, `--judge-model SPEC`, `--judge-samples K`.

    `cassette` says where the judge's cassette is when none is given.
    """
    parser.add_argument(
        "--judge",
        choices=JUDGE_MODES,
        default=None,
        help="the LLM judge (rubrics with a judge question): replay its recorded replies "
        "(default; no model), record what the cassette lacks, or ask it all again (live)",
    )
    parser.add_argument(
        "--judge-cassette",
        metavar="FILE",
        default=None,
        help=f"the judge's recorded replies (JSON Lines; default: {cassette})",
    )
    parser.add_argument(
        "--judge-model",
        type=_judge_model,
        metavar="openai:NAME",
        default=None,
        help="the judge model for questions that name none (endpoint and key as for openai: "
        "models)",
    )
    parser.add_argument(
        "--judge-samples",
        type=at_least_one,
        default=None,
        metavar="K",
        help="ask the judge K times per turn: its agreement with itself is reported, and a "
        "verdict that flips is 'unstable', not averaged",
    )


def _judge_model(text: str) -> str:
    kind, _, name = text.partition(":")
    if kind != "openai" or not name:
        raise argparse.ArgumentTypeError(f"{text!r} is not a judge model; use openai:NAME")
    return text


def judge_params(args: argparse.Namespace, cassette: str | None) -> dict[str, object]:
    """The judge flags given, as the `judge` evaluator's parameters (`cassette`: the default)."""
    given = {
        "mode": args.judge,
        "cassette": args.judge_cassette or cassette,
        "model": args.judge_model,
        "samples": args.judge_samples,
    }
    return {key: value for key, value in given.items() if value is not None}
