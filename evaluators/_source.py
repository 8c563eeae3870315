"""Where a trace table larger than memory is read from: its Parquet files, checked, in order.

A source is one Parquet file, a folder of them (Hive partitions too, as in
`traces/date=2026-11-30/part-0.parquet`) or a glob, on this machine or in object storage
(`s3://bucket/traces/`, `gs://…`: any URI `pyarrow.fs` reads). `trace_source` finds its files and
checks each one's footer (Parquet, the trace columns, their types) before any row is read;
`chunks` reads the rows in the source's order (files sorted by path, then each file's rows).

A file in object storage is named by its URI without the credentials or options a URI may
carry (`s3://KEY:SECRET@bucket/…?endpoint_override=…` is shown as `s3://bucket/…`), in every
message and in what is kept of the source (`_object_store` finds such files).
"""

from __future__ import annotations

import glob
import os
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import unquote

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from plangate.evaluators._globs import (
    HIDDEN_NAMES,
    folder_marker,
    hidden,
    parquet_named,
    read_with,
    wildcard,
)
from plangate.evaluators._lakes import current_on_disk
from plangate.evaluators._object_store import StoreURI, find_objects, local_path
from plangate.evaluators._types import as_type, castable
from plangate.replay.schema import (
    ATTRIBUTE_FIELDS,
    ATTRIBUTES,
    SCHEMA,
    SCHEMA_VERSION,
    SESSION_ID,
    SPAN_ID,
    SPAN_KIND,
    SPAN_ONCE,
    TRACE_ID,
    TURN_INDEX,
    DuplicateSpanError,
    TraceTableError,
    attribute_columns,
    first_line,
    kind_codes,
    missing_columns,
    other_types,
    validate_table,
)

PARQUET_MAGIC = b"PAR1"
"""How a Parquet file begins (and ends)."""
READ_ROWS = 65_536
"""Rows read from a file at a time."""
TRACE_COLUMNS = tuple(SCHEMA.names)
_HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"
_FOOTERS_AT_ONCE = 16
"""Footers read at once from object storage (each is a request or two: they wait, not work)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TraceSource:
    """The Parquet files that hold a trace table, each checked to hold the trace columns."""

    given: str
    """What was named: a file, a folder or a glob (a URI without its credentials)."""
    files: tuple[str, ...]
    """The files, sorted by path: the source's order (in object storage, their URIs)."""
    rows: int
    """Spans in all the files (read from their footers)."""
    constants: tuple[dict[str, Any], ...]
    """Per file, the trace columns its Hive partition folders give (`variant=alyx/`), typed."""
    single_file: bool = False
    """Whether the source was named as one file (not a folder or a glob)."""
    filesystem: pafs.FileSystem | None = None
    """Where the files are when not on this machine (object storage); it travels with the
    source to Ray's workers, each of which reads its files from there."""

    def opened(self, path: str) -> str:
        """A file's path as `filesystem` knows it (a URI without its scheme)."""
        return path if self.filesystem is None else path.partition("://")[2]


def trace_source(source: str | Path | TraceSource) -> TraceSource:
    """Find and check the files of a trace table: one file, a folder (Hive too) or a glob.

    Only footers are read. Hidden files and folders (`.x`, `_x`) in a folder are skipped;
    Hive partition keys that are not trace columns are ignored.

    Raises:
        TraceTableError: Nothing found, a file that is not Parquet, a file without the trace
            table's columns or with another type; the message names the file and the column.
    """
    if isinstance(source, TraceSource):
        return source
    given = str(source)
    filesystem: pafs.FileSystem | None = None
    if uri := StoreURI.parse(given):
        given = uri.shown
        filesystem, files, base, single = find_objects(uri)
    else:
        files, base, single = _find_files(given)
        if not single:
            files = current_on_disk(files, given, partial(would_read, given))
    found = TraceSource(
        given=given, files=tuple(files), rows=0, constants=(), single_file=single,
        filesystem=filesystem,
    )  # fmt: skip
    # an extensionless file that is no Parquet at all (a README) has no footer: not read
    read = [(path, f) for path, f in zip(files, _footers(found), strict=True) if f is not None]
    if not read:
        raise TraceTableError(f"{given}: no Parquet file found; expected a trace table")
    files = [path for path, _ in read]
    footers = [footer for _, footer in read]
    found = replace(found, files=tuple(files))
    if not (single or filesystem):  # on disk, from where the glob begins (`*.parquet`: here)
        base = os.path.abspath(base or ".")
    base = _above_partitions(base)
    keys = [_hive_keys(os.path.relpath(found.opened(p), base)) if base else {} for p in files]
    constants = tuple(
        _checked_columns(path, schema, key)
        for path, (schema, _), key in zip(found.files, footers, keys, strict=True)
    )
    rows = sum(count for _, count in footers)
    return replace(found, rows=rows, constants=constants)


def _above_partitions(folder: str | None) -> str | None:
    """The folder above a source's Hive partition folders: `traces/` for `traces/variant=alyx/`.

    A partition named on its own (or a glob's fixed part ending in one) gives its files its
    key, as the whole table's folder would.
    """
    if folder is None:
        return None
    path = PurePosixPath(folder)
    while "=" in path.name:
        path = path.parent
    return str(path)


def _hive_keys(relative: str) -> dict[str, str | None]:
    """The Hive partition folders (`key=value`) of a file's path below its source's folder.

    The values stay text, percent-decoded, until their trace column's type reads them
    (`variant=007` is "007"); `__HIVE_DEFAULT_PARTITION__` is null, and so is an empty value
    (`variant=`, as Delta Lake writes a null and Spark reads an empty one).
    """
    keys: dict[str, str | None] = {}
    for folder in PurePosixPath(relative).parts[:-1]:
        key, equals, value = folder.partition("=")
        if equals:
            keys[key] = None if value in (_HIVE_NULL, "") else unquote(value)
    return keys


def _find_files(given: str) -> tuple[list[str], str | None, bool]:
    """The Parquet files `given` names on disk, as `find_objects` finds a URI's.

    Returns the files sorted, the folder their Hive partitions start from, and whether `given`
    named one file.
    """
    path = Path(given)
    if path.is_file():
        return [given.rstrip("/")], None, True  # `t.parquet/` names the file (Path drops `/`)
    if path.is_dir():
        found = sorted(_in_folder(path))
        if not found:
            raise TraceTableError(
                f"{given}: no Parquet file in this folder or below (a .parquet name, or one "
                "without an extension); expected a trace table"
            )
        return found, given, False
    if not wildcard(given):
        raise TraceTableError(
            f"{given}: no such file or folder; expected a trace table (a .parquet file, a folder "
            "of them, or a glob)"
        )
    base = _glob_base(given)
    matched: set[str] = set()
    skipped = 0
    for match in map(Path, glob.glob(given, recursive=True)):  # a folder matched: its files
        if hidden(match.relative_to(base) if base else match):  # as in a folder
            skipped += 1
            continue
        if not folder_marker(match.name):
            matched.update([str(match)] if match.is_file() else _in_folder(match))
    if not matched:
        raise TraceTableError(
            f"{given}: matches no file, and no Parquet file (a .parquet name, or one without an "
            "extension) in a folder it matches; expected "
            "Parquet trace tables" + (f" ({skipped} hidden: {HIDDEN_NAMES})" if skipped else "")
        )
    return sorted(matched), base, False


def _in_folder(folder: Path) -> list[str]:
    """The Parquet-named files in a folder and below (`parquet_named`), hidden ones left out.

    A linked folder is followed, as a glob follows it (`Path.rglob` would not).
    """
    below = os.path.join(glob.escape(str(folder)), "**", "*")
    return [
        path
        for path in glob.glob(below, recursive=True)
        if parquet_named(os.path.basename(path))
        and os.path.isfile(path)
        and not hidden(Path(path).relative_to(folder))
    ]


def would_read(given: str, path: str) -> bool:
    """Whether what is written at `path` (a file, or a folder's files) is read with `given`.

    Then a second run would score an output as traces. (Object storage is never written.)
    """
    if StoreURI.parse(given):
        on_disk = local_path(given)
        return on_disk is not None and would_read(on_disk, path)
    target = Path(os.path.abspath(path))
    if Path(given).is_file():
        return target == Path(os.path.abspath(given))
    if Path(given).is_dir():
        folder = Path(os.path.abspath(given))
        return target.is_relative_to(folder) and not hidden(target.relative_to(folder))
    if not wildcard(given):
        return False
    base = Path(os.path.abspath(_glob_base(given) or "."))
    if not target.is_relative_to(base) or hidden(target.relative_to(base)):
        return False  # hidden: skipped as a folder's hidden files are
    pattern = Path(os.path.abspath(given)).relative_to(base).parts
    written = target.relative_to(base)
    return any(  # a file, or a folder's parts
        read_with(path.parts, pattern, folders_only=given.endswith("/"))
        for path in (written, written / "part-00000.parquet")
    )


def _glob_base(pattern: str) -> str | None:
    """The folder above a glob's first wildcard: where Hive partition folders begin."""
    parts = Path(pattern).parts
    fixed = next(i for i, part in enumerate(parts) if wildcard(part))
    return str(Path(*parts[:fixed])) if fixed else None


def _footers(source: TraceSource) -> list[tuple[pa.Schema, int] | None]:
    """Each file's schema and rows, from its footer (from object storage, several at once).

    None for a file without an extension that does not begin as Parquet does (a `README`);
    one that does (a damaged Parquet file) is an error, as any other.
    """
    if source.filesystem is None:
        return [_footer(source, path) for path in source.files]
    with ThreadPoolExecutor(_FOOTERS_AT_ONCE) as pool:
        reads = [pool.submit(_footer, source, path) for path in source.files]
        try:
            return [read.result() for read in reads]
        finally:  # the first bad footer stops the reads not yet begun
            for read in reads:
                read.cancel()


def _footer(source: TraceSource, path: str) -> tuple[pa.Schema, int] | None:
    try:
        metadata = pq.read_metadata(source.opened(path), filesystem=source.filesystem)
        schema = metadata.schema.to_arrow_schema()
    except (pa.ArrowException, OSError, ValueError) as exc:
        unnamed = not source.single_file and "." not in PurePosixPath(path).name
        if unnamed and _begins(source, path) != PARQUET_MAGIC:
            return None
        raise TraceTableError(
            f"{path}: not a readable Parquet file ({first_line(exc)}); expected a trace table"
        ) from exc
    version = (schema.metadata or {}).get(b"plangate.version")
    if version is not None and version.isdigit() and int(version) > SCHEMA_VERSION:
        raise TraceTableError(
            f"{path}: trace table schema version {int(version)} is newer than this plangate "
            f"understands ({SCHEMA_VERSION}); upgrade plangate"
        )
    return schema, metadata.num_rows


def _begins(source: TraceSource, path: str) -> bytes:
    """A file's first four bytes (fewer for a shorter file; none for one that cannot be read)."""
    filesystem = source.filesystem or pafs.LocalFileSystem()
    try:
        with filesystem.open_input_stream(source.opened(path)) as stream:
            return bytes(stream.read(len(PARQUET_MAGIC)))
    except (pa.ArrowException, OSError):
        return b""


def _checked_columns(path: str, schema: pa.Schema, keys: dict[str, Any]) -> dict[str, Any]:
    """Check a file's columns; return the trace columns its partition keys give, typed.

    A key gives a column the file lacks: a column the file has is its own, whatever a folder
    above it is named (`session_id=x/` over files of many sessions).
    """
    constants = {
        name: value
        for name, value in keys.items()
        if name in TRACE_COLUMNS and name not in schema.names
    }
    missing = [
        c
        for c in TRACE_COLUMNS
        if c not in schema.names and c not in constants and c not in ATTRIBUTE_FIELDS
    ]  # a file of schema version 1 has no attribute fields' columns: they are read when it is
    if missing:
        raise TraceTableError(f"{path}: not a trace table: {missing_columns(missing, SCHEMA)}")
    advice = "write {it} as that type"  # read as the schema's where nothing is lost
    if wrong := other_types(schema, SCHEMA, TRACE_COLUMNS, castable, advice):
        raise TraceTableError(f"{path}: {wrong}")
    for name, value in constants.items():
        try:
            constants[name] = pa.scalar(value).cast(SCHEMA.field(name).type)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise TraceTableError(
                f"{path}: partition folder {name}={value!r} is not {SCHEMA.field(name).type}"
            ) from exc
    return constants


def chunks(source: TraceSource, columns: Sequence[str]) -> Iterator[tuple[str, int, pa.Table]]:
    """The source's rows in order, `READ_ROWS` at a time: (file, its first row here, rows).

    Only `columns` are read; a column that a file's Hive partition folders give is filled in.
    """
    schema = pa.schema([SCHEMA.field(name) for name in columns], metadata=SCHEMA.metadata)
    for path, constants in zip(source.files, source.constants, strict=True):
        offset = 0
        try:  # a damaged page, a file gone, a connection lost: the file and the row say where
            for arrays in _file_columns(source, path, constants, columns):
                yield path, offset, pa.Table.from_arrays(arrays, schema=schema)
                offset += len(arrays[0]) if arrays else 0
        except (pa.ArrowException, OSError) as exc:
            raise TraceTableError(
                f"{path}: cannot be read from row {offset} on ({first_line(exc)})"
            ) from exc


def _file_columns(
    source: TraceSource, path: str, constants: dict[str, Any], columns: Sequence[str]
) -> Iterator[list[pa.Array]]:
    """One file's `columns`, `READ_ROWS` rows at a time."""
    with pq.ParquetFile(source.opened(path), filesystem=source.filesystem) as reader:
        has = set(reader.schema_arrow.names)
        stored = [name for name in columns if name not in constants and name in has]
        older = [name for name in columns if name not in constants and name not in has]
        if older and ATTRIBUTES not in stored:  # schema version 1: read from attributes
            stored.append(ATTRIBUTES)
        for batch in reader.iter_batches(batch_size=READ_ROWS, columns=stored):
            found = {
                name: as_type(column, SCHEMA.field(name).type, path, name)
                for name, column in zip(stored, batch.columns, strict=True)
            }
            if older:
                found.update(attribute_columns(found[ATTRIBUTES]))
            yield [
                pa.repeat(constants[name], batch.num_rows) if name in constants else found[name]
                for name in columns
            ]


def duplicate_located(source: TraceSource, error: DuplicateSpanError) -> TraceTableError:
    """`error` with its two rows named by their files and their rows there.

    The rows may lie in two files: the batch that found them no longer knows which.
    """
    trace, span = error.key
    places: list[str] = []
    for path, offset, chunk in chunks(source, [TRACE_ID, SPAN_ID]):
        same = pc.and_(pc.equal(chunk[TRACE_ID], trace), pc.equal(chunk[SPAN_ID], span))
        rows = np.flatnonzero(pc.fill_null(same, False).to_numpy())
        places += [f"{path}: row {offset + int(row)}" for row in rows]
        if len(places) >= 2:
            return TraceTableError(
                f"{places[0]} and {places[1]} have the same trace_id/span_id "
                f"{f'{trace}/{span}'!r}; {SPAN_ONCE}"
            )
    return error


def text_located(source: TraceSource, error: UnicodeDecodeError) -> TraceTableError:
    """A text that is not UTF-8, as Parquet's strings must be, named by its file, row, column.

    Looked for only once reading one has failed: checking every text of every batch would cost
    a quarter of the evaluators' time.
    """
    texts = [name for name in TRACE_COLUMNS if pa.types.is_string(SCHEMA.field(name).type)]
    for path, offset, chunk in chunks(source, texts):
        for name in texts:
            try:
                chunk[name].validate(full=True)
                continue
            except pa.ArrowInvalid:
                pass
            for row, data in enumerate(chunk[name].cast(pa.binary()).to_pylist()):
                try:
                    (data or b"").decode("utf-8")
                except UnicodeDecodeError as bad:
                    return TraceTableError(
                        f"{path}: row {offset + row}, column {name!r} is not UTF-8 text "
                        f"({bad.reason} at byte {bad.start}); write its texts as UTF-8"
                    )
    return TraceTableError(f"{source.given}: a text is not UTF-8 ({first_line(error)})")


TURN_SPAN_COLUMNS = (SESSION_ID, TURN_INDEX, TRACE_ID, SPAN_ID, SPAN_KIND)
"""What names a turn's AGENT span: its turn, and its trace and span ids."""


def agent_spans(source: str | Path | TraceSource) -> pa.Table:
    """The AGENT rows of a trace table wherever `eval` reads one, in `TURN_SPAN_COLUMNS`.

    Only those columns are read and only the AGENT rows kept: a row per turn, whatever the
    source's size (what annotating each turn's span and trace needs).

    Raises:
        TraceTableError: The source, as `trace_source`; an AGENT row without one of the
            columns' values, named by its file, its row there and the column.
    """
    kept = []
    for path, offset, chunk in chunks(trace_source(source), TURN_SPAN_COLUMNS):
        kind_codes(chunk, path, first_row=offset)  # a kind not OpenInference's is named
        agents = pc.equal(chunk[SPAN_KIND], "AGENT")
        for name in TURN_SPAN_COLUMNS[:-1]:
            if pc.any(hole := pc.and_(agents, pc.is_null(chunk[name]))).as_py():
                row = offset + int(pc.index(hole, True).as_py())
                raise TraceTableError(f"{path}: row {row}: the AGENT span's {name} is null")
        kept.append(chunk.filter(agents))
    schema = pa.schema([SCHEMA.field(name) for name in TURN_SPAN_COLUMNS])
    return pa.concat_tables(kept) if kept else schema.empty_table()


def checked_chunks(source: TraceSource, check: bool = True) -> Iterator[pa.Table]:
    """Every row in order, `READ_ROWS` at a time, each chunk checked as it comes (`check`).

    The check is `validate_table`'s: an error names the file and the row there.
    """
    for path, offset, chunk in chunks(source, TRACE_COLUMNS):
        if chunk.num_rows:
            if check:
                validate_table(chunk, path, first_row=offset)
            yield chunk


def gathered(tables: Iterable[pa.Table], size: int) -> Iterator[pa.Table]:
    """The tables gathered `size` rows at a time (or a little more; the last, fewer)."""
    parts: list[pa.Table] = []
    rows = 0
    for table in tables:
        parts.append(table)
        rows += table.num_rows
        if rows >= size:
            yield pa.concat_tables(parts)
            parts, rows = [], 0
    if parts:
        yield pa.concat_tables(parts)
