"""Importers: other agents' traces into the trace table, one function per format.

Each importer takes file paths and returns a trace table; bad input raises `TraceTableError`
naming the file, the record and the field. Importers keep what a source has (rewards,
termination reasons, timestamps, token usage) and never invent what it lacks.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import pyarrow as pa

from plangate.replay._schema import TraceTableError, concat_tables

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
    _load_builtin()
    return sorted(_IMPORTERS)


def import_traces(format: str, paths: Sequence[str | Path]) -> pa.Table:
    """Read every file of one format into a single trace table."""
    _load_builtin()
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


def _load_builtin() -> None:
    # Importing the modules registers their formats.
    import plangate.replay._import_messages
    import plangate.replay._import_otlp
    import plangate.replay._import_phoenix
    import plangate.replay._import_swe
    import plangate.replay._import_tau  # noqa: F401 - registers tau-bench and tau2
