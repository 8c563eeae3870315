"""The importer registry: one function per format, registered by name.

Each importer takes file paths and returns a trace table; bad input raises `TraceTableError`
naming the file, the record and the field. Importers keep what a source has (rewards,
termination reasons, timestamps, token usage) and never invent what it lacks.

A format whose records are spans (`otlp-json`, `phoenix`) registers a reader of one file's
spans instead: a trace, and a session, may cross files (an OpenTelemetry collector's file
exporter starts a new file every so often, whatever is in flight), so `import_traces` reads
every file's spans first and makes turns of them together.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from plangate.replay._openinference import rows_from_spans
from plangate.replay._spans import SpanRecord, SpanValueError
from plangate.replay.schema import (
    SESSION_ID,
    SPAN_ONCE,
    TraceTableError,
    build_table,
    concat_tables,
)

Importer = Callable[[Path], pa.Table]
"""Reads one file into a trace table."""
SpanReader = Callable[[Path], list[SpanRecord]]
"""Reads one file's spans."""
SpanCheck = Callable[[Sequence[SpanRecord], str], None]
"""Refuses spans that would import as nothing to judge; the message starts with its `where`."""

_IMPORTERS: dict[str, Importer] = {}
_SPAN_READERS: dict[str, tuple[SpanReader, str, SpanCheck | None]] = {}


def importer(name: str) -> Callable[[Importer], Importer]:
    """Register an importer for the format `name` (as given to `plangate import`)."""

    def add(function: Importer) -> Importer:
        _IMPORTERS[name] = function
        return function

    return add


def span_importer(
    name: str, source: str, check: SpanCheck | None = None
) -> Callable[[SpanReader], SpanReader]:
    """Register the span reader of the format `name`; its rows' `source` is `source`."""

    def add(reader: SpanReader) -> SpanReader:
        _SPAN_READERS[name] = (reader, source, check)
        return reader

    return add


def import_formats() -> list[str]:
    """The formats `import_traces` understands."""
    return sorted({*_IMPORTERS, *_SPAN_READERS})


def import_traces(format: str, paths: Sequence[str | Path]) -> pa.Table:
    """Read every file of one format into a single trace table."""
    if format not in _IMPORTERS and format not in _SPAN_READERS:
        raise TraceTableError(
            f"unknown import format {format!r}; choose one of: {', '.join(import_formats())}"
        )
    if not paths:
        raise TraceTableError("no input files given")
    files = list(map(Path, paths))
    for index, path in enumerate(files):
        if not path.is_file():
            raise TraceTableError(f"{path}: no such file")
        if path in files[:index]:
            raise TraceTableError(f"{path}: given twice; give each file once")
    if format in _SPAN_READERS:
        reader, source, check = _SPAN_READERS[format]
        return table_of_spans({path: reader(path) for path in files}, source, check)
    tables = {path: _imported(_IMPORTERS[format], path) for path in files}
    _check_sessions_apart(tables)
    table = concat_tables(tables.values())
    if not table.num_rows:
        raise TraceTableError(f"{_named(files)}: nothing to import (no trajectory in it)")
    return table


def _imported(importer: Importer, path: Path) -> pa.Table:
    """One file's table; an error that does not name the file names it."""
    try:
        return importer(path)
    except TraceTableError as exc:
        if str(exc).startswith(str(path)):
            raise
        raise TraceTableError(f"{path}: {exc}") from exc


def _check_sessions_apart(tables: Mapping[Path, pa.Table]) -> None:
    """Refuse two files holding one session: their turns would be one session's, twice over.

    Files of trajectories name their sessions by a task or by the file's name, so two runs of
    one benchmark, or two `conv.json` in different folders, hold the same sessions.
    """
    seen: dict[str, Path] = {}
    for path, table in tables.items():
        for session in pc.unique(table.column(SESSION_ID)).to_pylist():
            first = seen.setdefault(session, path)
            if first != path:
                raise TraceTableError(
                    f"{first} and {path} both hold session {session!r}: give each its own "
                    "table (runs of one benchmark are compared, not merged), or rename a file "
                    "whose name is the session"
                )


def table_of_spans(
    files: Mapping[Path, list[SpanRecord]], source: str, check: SpanCheck | None = None
) -> pa.Table:
    """The trace table of the spans of several files, made into turns together.

    Raises:
        TraceTableError: A span in two places (the message names both files), spans `check`
            refuses, or a value that does not fit its column (the message names the span's
            file).
    """
    where = _named(list(files))
    _check_once(files)
    spans = [span for found in files.values() for span in found]
    if check is not None:
        check(spans, where)
    try:
        return build_table(rows_from_spans(spans, source=source))
    except SpanValueError as exc:
        home = next(path for path, found in files.items() if any(s is exc.span for s in found))
        raise TraceTableError(f"{home}: {exc}") from exc
    except TraceTableError as exc:
        raise TraceTableError(f"{where}: {exc}") from exc


def _named(files: Sequence[Path]) -> str:
    """The files, for a message: one by name, more by the first and how many."""
    return str(files[0]) if len(files) == 1 else f"{files[0]} and {len(files) - 1} more files"


def _check_once(files: Mapping[Path, list[SpanRecord]]) -> None:
    """Refuse a span given twice (spans exported twice, say), naming where it is."""
    seen: dict[tuple[str, str], Path] = {}
    for path, spans in files.items():
        for span in spans:
            key = (span.trace_id, span.span_id)
            if key not in seen:
                seen[key] = path
                continue
            first, span_id = seen[key], "/".join(key)
            where = f"{path}: span {span_id!r} (trace_id/span_id) is in it twice"
            if first != path:
                where = f"{first} and {path} both hold span {span_id!r} (trace_id/span_id)"
            raise TraceTableError(f"{where}; {SPAN_ONCE}")
