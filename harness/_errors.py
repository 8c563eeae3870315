"""The base error of plangate and the errors shared across the harness."""

from __future__ import annotations


class PlangateError(Exception):
    """Base of every error plangate raises on purpose; the CLI turns these into exit code 2."""


class ConfigError(PlangateError):
    """A configuration value (variant file, CLI option) is wrong; the message names it."""


class SessionError(PlangateError):
    """A session cannot do what was asked in its state (e.g. resume a session that is idle)."""


def first_line(exc: BaseException) -> str:
    """An exception's first line, for a one-line message (its type when it says nothing)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
