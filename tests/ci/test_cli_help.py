"""The command line reads as one tool: help for every argument, one spelling for the same thing."""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Iterator
from importlib import metadata

import pytest

from plangate.ci.cli._main import HANDLERS, build_parser, handler


def commands(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """Every (sub)command's parser, with the words that reach it."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from commands(sub, (*path, name))


PARSERS = dict(commands(build_parser()))


def arguments(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [
        a
        for a in parser._actions
        if not isinstance(a, argparse._HelpAction | argparse._SubParsersAction)
    ]


def test_every_command_has_a_handler_and_every_handler_a_command() -> None:
    leaves = {
        " ".join(path)
        for path, parser in PARSERS.items()
        if path and not any(isinstance(a, argparse._SubParsersAction) for a in parser._actions)
    }
    assert leaves == set(HANDLERS)
    assert len(leaves) > 20


@pytest.mark.parametrize("path", sorted(PARSERS), ids=lambda p: " ".join(p) or "plangate")
def test_every_argument_has_help(path: tuple[str, ...]) -> None:
    missing = [a.option_strings or [a.dest] for a in arguments(PARSERS[path]) if not a.help]
    assert missing == []


@pytest.mark.parametrize("path", sorted(p for p in PARSERS if p), ids=" ".join)
def test_every_command_has_help(path: tuple[str, ...]) -> None:
    assert PARSERS[path].description or _help_of(path), f"plangate {' '.join(path)} has no help"


def _help_of(path: tuple[str, ...]) -> str:
    parent = PARSERS[path[:-1]]
    for action in parent._actions:
        if isinstance(action, argparse._SubParsersAction):
            for choice in action._choices_actions:
                if choice.dest == path[-1]:
                    return choice.help or ""
    return ""


def test_one_spelling_for_phoenix_and_outputs() -> None:
    flags = {f for parser in PARSERS.values() for a in arguments(parser) for f in a.option_strings}
    assert {"--phoenix-url", "--phoenix-project"} <= flags
    assert not {"--phoenix", "--url", "--project"} & flags
    outputs = [
        (path, a.option_strings)
        for path, parser in PARSERS.items()
        for a in arguments(parser)
        if a.dest == "output"
    ]
    assert outputs and all(flags == ["-o", "--output"] for _, flags in outputs)


def test_every_handler_exists() -> None:
    for command in HANDLERS:
        assert callable(handler(command))


@pytest.mark.parametrize("path", sorted(PARSERS), ids=lambda p: " ".join(p) or "plangate")
def test_help_prints_for_every_command(
    path: tuple[str, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args([*path, "--help"])
    assert exited.value.code == 0
    shown = capsys.readouterr().out
    assert shown.startswith("usage: plangate")
    for action in arguments(PARSERS[path]):
        name = action.option_strings[-1] if action.option_strings else action.metavar
        assert str(name or action.dest) in shown


def test_version() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "plangate", "--version"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0
    assert done.stdout.strip() == f"plangate {metadata.version('plangate')}"


def test_the_parsers_own_lists_match_the_library() -> None:
    # The parser keeps its own copies: importing replay would load pyarrow for every command.
    from plangate.ci.cli._arguments import REPLAY_MODEL
    from plangate.ci.cli._options import TOOLS
    from plangate.replay import CASSETTE_MODELS, TOOL_SOURCES

    assert TOOLS == TOOL_SOURCES
    assert all(model in REPLAY_MODEL for model in CASSETTE_MODELS)


@pytest.mark.parametrize("path", sorted(PARSERS), ids=lambda p: " ".join(p) or "plangate")
def test_a_mistake_in_the_arguments_is_one_line_for_every_command(
    path: tuple[str, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args([*path, "--no-such-flag"])
    assert exited.value.code == 2
    said = capsys.readouterr().err
    assert said.count("\n") == 1 and said.startswith("plangate") and ": error: " in said
    assert said.endswith(" --help)\n")  # the usage is a --help away
