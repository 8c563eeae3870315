"""The Phoenix export a command asks for with `--phoenix-url`, open for the command's length.

A Phoenix that does not answer is a warning on stderr and the command goes on without it
(`--phoenix-required` makes it unusable input instead: exit 2); when the command ends, however
it ends, the export is closed (which waits until every exported span has arrived) and its
report printed on stderr. Otherwise the exit code never depends on the export.
"""

from __future__ import annotations

import argparse
import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager

from plangate.ci.cli._stderr import say, tell
from plangate.ci.phoenix import ExportReport, PhoenixError, PhoenixExport
from plangate.ci.phoenix.names import DEFAULT_PROJECT, DEFAULT_URL, PROJECT_ENV, URL_ENV

logger = logging.getLogger("plangate.phoenix")


@contextmanager
def exporting(args: argparse.Namespace) -> Iterator[PhoenixExport | None]:
    """The export `--phoenix-url` (or its variable) asks for, None without one, for the block."""
    export = open_export(args)
    try:
        yield export
    finally:
        close_export(export)


def open_export(args: argparse.Namespace) -> PhoenixExport | None:
    """The export `--phoenix-url` asks for; None when none is, or when Phoenix is down."""
    url = args.phoenix_url or os.environ.get(URL_ENV)  # no default: nothing asked, nothing sent
    if not url:
        return None
    try:
        export = PhoenixExport(
            url, project=phoenix_project(args), redact=getattr(args, "redact", None) or ()
        )
    except PhoenixError as exc:
        if getattr(args, "phoenix_required", False):
            raise
        say(
            "warning",
            f"{exc}; going on without the Phoenix export (--phoenix-required makes this an error)",
        )
        return None
    tell(
        f"phoenix: exporting spans to {export.url}, project {export.project!r}, run {export.run_id}"
    )
    return export


def phoenix_url(args: argparse.Namespace) -> str:
    """The server a Phoenix command talks to: `--phoenix-url`, $PLANGATE_PHOENIX_URL, or local."""
    url: str = args.phoenix_url or os.environ.get(URL_ENV) or DEFAULT_URL
    return url.rstrip("/")


def phoenix_project(args: argparse.Namespace) -> str:
    """The project: `--phoenix-project`, $PLANGATE_PHOENIX_PROJECT, or `plangate`."""
    project: str = args.phoenix_project or os.environ.get(PROJECT_ENV) or DEFAULT_PROJECT
    return project


def close_export(export: PhoenixExport | None) -> ExportReport | None:
    """Close the export and print its report on stderr (the exit code does not change)."""
    if export is None:
        return None
    try:
        report = export.close()
    except Exception as exc:  # the run is done: its outcome stands whatever tracing did
        logger.exception("closing the Phoenix export failed")
        say("phoenix", f"closing the export failed: {exc}")
        return None
    tell(report.summary())
    if report.missing:
        shown = ", ".join(report.missing_ids[:5])
        more = f" and {report.missing - 5} more" if report.missing > 5 else ""
        tell(f"phoenix: missing span ids: {shown}{more}")
    return report
