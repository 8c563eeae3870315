"""The importer registry: one function per format, registered by name.

Each importer takes file paths and returns a trace table; bad input raises `TraceTableError`
naming the file, the record and the field. Importers keep what a source has (rewards,
termination reasons, timestamps, token usage) and never invent what it lacks.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import pyarrow as pa

from plangate.replay.schema import TraceTableError, concat_tables

Importer = Callable[[Path], pa.Table]
"""Reads one file into a trace table."""

_IMPORTERS: dict[str, Importer] = {}


def importer(name: str) -> Callable[[Importer], Importer]:
    """Register an importer for the format `name` (as given to `plangate import`)."""

    def add(function: Importer) -> Importer:
        _IMPORTERS[name] = function
        return function

    return add


def import_formats() -> list[str]:
    """The formats `import_traces` understands."""
    return sorted(_IMPORTERS)


def import_traces(format: str, paths: Sequence[str | Path]) -> pa.Table:
    """Read every file of one format into a single trace table."""
    if format not in _IMPORTERS:
        raise TraceTableError(
            f"unknown import format {format!r}; choose one of: {', '.join(sorted(_IMPORTERS))}"
        )
    if not paths:
        raise TraceTableError("no input files given")
    tables = []
    for path in map(Path, paths):
        if not path.is_file():
            raise TraceTableError(f"{path}: no such file")
        tables.append(_IMPORTERS[format](path))
    return concat_tables(tables)
