"""Scoring trace tables larger than memory: batches of whole sessions, streamed.

A source is one Parquet file, a folder of them (Hive partitions too, as in
`traces/date=2026-11-30/part-0.parquet`) or a glob. Its order is its files' sorted by path, then
each file's rows. `session_batches` cuts it into tables of about `batch_rows` spans that hold
whole sessions, whatever that order:

- a source that fits in one batch is read whole;
- otherwise one cheap pass reads the `session_id` column alone and checks that each session's
  rows are contiguous. If they are, the rows stream through and a batch is cut at the first
  session boundary at or after `batch_rows` rows;
- if they are not (a session spread over several files, or interleaved with others), the rows
  are spilled by a hash of their session into ceil(rows / batch_rows) bucket files in a
  temporary folder, and each bucket (whole sessions only) becomes one batch.

Memory holds about one batch, and a session longer than `batch_rows` whole, whatever the
source's size. `score_batches` scores each batch with `evaluate`, or hands the files to Ray.
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from plangate.evaluators._registry import EvaluatorError, evaluate, evaluators
from plangate.evaluators._rubric import RubricSet
from plangate.evaluators._source import (
    TraceSource,
    checked_chunks,
    chunks,
    duplicate_located,
    gathered,
    trace_source,
)
from plangate.replay.schema import (
    SCHEMA,
    SESSION_ID,
    DuplicateSpanError,
    TraceTableError,
)

DEFAULT_BATCH_ROWS = 250_000
"""Spans per batch unless told: a few hundred MB in the evaluators, whatever the source."""
MAX_BUCKETS = 4_096
"""Spill files open at once, at most (and a quarter of the open-file limit): past this many
batches' worth of rows, buckets grow beyond `batch_rows`."""
MERGE_ROWS = 65_536
"""Session hashes gathered before the first merge (then as many as are kept)."""
SPILL_CODEC = "lz4"
"""The spill files' compression (Arrow IPC files): cheap both ways."""

Engine = Literal["local", "ray"]
"""Where batches are scored: in this process, or on a Ray cluster (`plangate[ray]`)."""


def _bad_row(source: TraceSource) -> TraceTableError | None:
    """The first chunk of the source that is not a valid trace table, named (None: all are)."""
    try:
        for _ in checked_chunks(source):
            pass
    except TraceTableError as exc:
        return exc
    return None


def session_batches(
    source: str | Path | TraceSource,
    batch_rows: int = DEFAULT_BATCH_ROWS,
    *,
    spill_dir: str | Path | None = None,
    check: bool = True,
) -> Iterator[pa.Table]:
    """The source as trace tables of whole sessions, about `batch_rows` spans each.

    Every row is in exactly one batch, and every session in one batch. The source's files are
    checked now (`trace_source`), its rows as they are read (unless `check` is False: for a
    consumer that checks them itself, as `evaluate` does).

    Args:
        source: A Parquet file, a folder of them (Hive partitions too), a glob, or a
            `TraceSource`.
        batch_rows: Spans per batch. Streamed in order, a batch is longer by at most its
            last session; spilled, batches hold what the session hash put together (about
            `batch_rows`, more where a few long sessions share a bucket).
        spill_dir: Where to spill the rows when sessions are not contiguous (default: the
            system's temporary folder, `$TMPDIR`); the spill is removed when done.
        check: Check each chunk's rows as a trace table, naming its file and rows.

    Raises:
        TraceTableError: A source that is no trace table (see `trace_source`), or a row that
            breaks the schema (naming its file and rows).
    """
    found = trace_source(source)
    _check_batch_rows(batch_rows)
    return _batches(found, batch_rows, spill_dir, check)


def _check_batch_rows(batch_rows: int) -> None:
    if isinstance(batch_rows, bool) or not isinstance(batch_rows, int) or batch_rows < 1:
        raise EvaluatorError(f"batch_rows must be a whole number >= 1, not {batch_rows!r}")


def _batches(
    source: TraceSource, batch_rows: int, spill_dir: str | Path | None, check: bool
) -> Iterator[pa.Table]:
    rows = checked_chunks(source, check)
    if source.rows <= batch_rows:
        parts = list(rows)
        if parts:
            yield pa.concat_tables(parts)
    elif contiguous_sessions(source):
        yield from _streamed(rows, batch_rows)
    else:
        yield from _spilled(rows, math.ceil(source.rows / batch_rows), batch_rows, spill_dir)


def contiguous_sessions(source: str | Path | TraceSource) -> bool:
    """Whether each session's rows follow one another in the source's order.

    Reads the `session_id` column alone and keeps one 64-bit hash per session; stops at the
    first session that comes back. A hash collision can only answer False (never a wrong
    True), which costs a spill, not a wrong batch.
    """
    seen = _Seen()
    last: str | None = None
    for path, offset, chunk in chunks(trace_source(source), [SESSION_ID]):
        column = chunk.column(0).combine_chunks()
        if not len(column):
            continue
        if column.null_count:
            row = offset + column.to_pylist().index(None)
            raise TraceTableError(f"{path}: row {row}, column {SESSION_ID!r} is null; required")
        if not seen.add(pd.util.hash_array(_run_heads(column, last))):
            return False
        last = column[-1].as_py()
    return seen.merge()


def _run_heads(column: pa.Array, last: str | None) -> Any:
    """The sessions whose runs start in `column` (the one before it ended with `last`)."""
    change = pc.not_equal(column.slice(1), column.slice(0, len(column) - 1))
    starts = np.flatnonzero(change.to_numpy(zero_copy_only=False)) + 1
    if column[0].as_py() != last:
        starts = np.concatenate([[0], starts])
    return column.take(pa.array(starts, pa.int64())).to_numpy(zero_copy_only=False)


class _Seen:
    """The hashes of the sessions met so far, kept sorted; merged as they double."""

    def __init__(self) -> None:
        self.sorted = np.empty(0, np.uint64)
        self.pending: list[np.ndarray] = []
        self.count = 0

    def add(self, hashes: np.ndarray) -> bool:
        """Add hashes; False if one was met before (checked at merges, and at the end)."""
        self.pending.append(hashes)
        self.count += len(hashes)
        return self.merge() if self.count >= max(len(self.sorted), MERGE_ROWS) else True

    def merge(self) -> bool:
        """Merge the pending hashes; False if any hash is there twice."""
        merged = np.sort(np.concatenate([self.sorted, *self.pending]))
        self.sorted, self.pending, self.count = merged, [], 0
        return not bool((merged[1:] == merged[:-1]).any())


def _streamed(rows: Iterator[pa.Table], batch_rows: int) -> Iterator[pa.Table]:
    """Contiguous sessions: rows in order, cut at the first boundary at or after `batch_rows`."""
    pending: pa.Table | None = None
    searched = 0  # rows of `pending` known to hold no boundary past `batch_rows`
    for chunk in rows:
        pending = chunk if pending is None else pa.concat_tables([pending, chunk])
        while pending.num_rows > batch_rows:
            cut = _boundary(pending.column(SESSION_ID), max(batch_rows, searched))
            if cut is None:
                searched = pending.num_rows - 1
                break
            yield pending.slice(0, cut)
            pending, searched = pending.slice(cut), 0
    if pending is not None and pending.num_rows:
        yield pending


def _boundary(sessions: pa.ChunkedArray, start: int) -> int | None:
    """The first row at or after `start` (>= 1) whose session differs from the row before."""
    tail = sessions.slice(start - 1).combine_chunks()
    change = pc.not_equal(tail.slice(1), tail.slice(0, len(tail) - 1))
    first = pc.index(change, True).as_py()
    return None if first < 0 else start + first


def _spilled(
    rows: Iterator[pa.Table], buckets: int, batch_rows: int, spill_dir: str | Path | None
) -> Iterator[pa.Table]:
    """Interleaved sessions: rows spilled by session hash into buckets, a bucket a batch."""
    count = min(buckets, _bucket_limit())
    with tempfile.TemporaryDirectory(prefix="plangate-spill-", dir=spill_dir) as folder:
        spill = _Buckets(Path(folder), count)
        try:
            for part in gathered(rows, batch_rows):
                spill.add(part)
        finally:
            paths = spill.close()
        for path in paths:
            with pa.OSFile(str(path)) as stream:
                table = pa.ipc.open_file(stream).read_all().combine_chunks()
            path.unlink()
            if table.num_rows:
                yield table


def _bucket_limit() -> int:
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    except (ImportError, OSError, ValueError):
        return 128
    if soft < 0:  # unlimited
        return MAX_BUCKETS
    return max(2, min(MAX_BUCKETS, soft // 4))


def _bucket_of(sessions: pa.ChunkedArray, buckets: int) -> npt.NDArray[np.int64]:
    """Each row's bucket, `hash(session_id) % buckets`: the same in every process and run."""
    encoded = pc.dictionary_encode(sessions.combine_chunks())
    hashes = pd.util.hash_array(encoded.dictionary.to_numpy(zero_copy_only=False))
    codes = np.asarray(hashes % np.uint64(buckets), dtype=np.int64)
    rows = np.asarray(encoded.indices.to_numpy(zero_copy_only=False), dtype=np.int64)
    return codes[rows]


class _Buckets:
    """Spill files, one per bucket (Arrow IPC), each written as rows come."""

    def __init__(self, folder: Path, count: int) -> None:
        self.folder = folder
        self.count = count
        self.writers: dict[int, pa.ipc.RecordBatchFileWriter] = {}

    def add(self, rows: pa.Table) -> None:
        """Spread rows over the buckets: sorted by bucket (one copy), a slice to each file."""
        codes = _bucket_of(rows.column(SESSION_ID), self.count)
        order = np.argsort(codes, kind="stable")
        ordered = rows.take(pa.array(order))
        starts = np.flatnonzero(np.diff(codes[order], prepend=-1))
        ends = [*starts[1:].tolist(), len(order)]
        for start, end in zip(starts.tolist(), ends, strict=True):
            self._writer(int(codes[order[start]])).write_table(ordered.slice(start, end - start))

    def _writer(self, bucket: int) -> pa.ipc.RecordBatchFileWriter:
        if bucket not in self.writers:
            options = pa.ipc.IpcWriteOptions(compression=SPILL_CODEC)
            self.writers[bucket] = pa.ipc.new_file(str(self._path(bucket)), SCHEMA, options=options)
        return self.writers[bucket]

    def _path(self, bucket: int) -> Path:
        return self.folder / f"bucket-{bucket:05d}.arrow"

    def close(self) -> list[Path]:
        """Close every file; the buckets' paths, in bucket order."""
        for writer in self.writers.values():
            writer.close()
        return [self._path(bucket) for bucket in sorted(self.writers)]


def score_batches(
    source: str | Path | TraceSource,
    rubrics: RubricSet | None = None,
    names: Sequence[str] | None = None,
    params: dict[str, dict[str, Any]] | None = None,
    *,
    batch_rows: int = DEFAULT_BATCH_ROWS,
    engine: Engine = "local",
    address: str | None = None,
    progress: Callable[[int], None] | None = None,
) -> Iterator[pa.Table]:
    """Score a trace table of any size, batch by batch: one score table per batch.

    Locally, each batch of whole sessions (`session_batches`) goes through `evaluate`; the
    score tables together are the whole source's scores. With `engine="ray"` the files go to
    `plangate.evaluators._ray` (on the cluster at `address`, or a local one).

    Args:
        source: A Parquet file, a folder of them (Hive partitions too), a glob, or a
            `TraceSource`.
        rubrics: The golden rubrics, as for `evaluate`.
        names: The evaluators to run (default: all).
        params: Per evaluator, its keyword parameters.
        batch_rows: Spans per batch.
        engine: `local` or `ray`.
        address: The Ray cluster (`ray://HOST:PORT`); only with `engine="ray"`.
        progress: Called with the spans of each batch once it is scored (with Ray: with all
            the spans once the last batch is in).

    Raises:
        TraceTableError: A source that is no trace table, or a row that breaks the schema.
        EvaluatorError: An unknown evaluator or engine, a bad `batch_rows`, an address without
            Ray.
    """
    found = trace_source(source)
    _check_batch_rows(batch_rows)
    unknown = [name for name in names or () if name not in evaluators()]
    if unknown:
        raise EvaluatorError(
            f"unknown evaluator {unknown[0]!r}; choose from: {', '.join(sorted(evaluators()))}"
        )
    if engine == "ray":
        from plangate.evaluators._ray import ray_score_batches

        scored = ray_score_batches(
            found, rubrics=rubrics, names=names, params=params,
            batch_rows=batch_rows, address=address, progress=progress,
        )  # fmt: skip
        return scored
    if engine != "local":
        raise EvaluatorError(f"engine {engine!r}: expected 'local' or 'ray'")
    if address is not None:
        raise EvaluatorError(f"address {address!r} is for a Ray cluster: add engine 'ray'")
    return _scored(found, batch_rows, rubrics, names, params, progress)


def _scored(
    source: TraceSource,
    batch_rows: int,
    rubrics: RubricSet | None,
    names: Sequence[str] | None,
    params: dict[str, dict[str, Any]] | None,
    progress: Callable[[int], None] | None,
) -> Iterator[pa.Table]:
    # `evaluate` checks each batch: checking the chunks too would pay twice. A bad row is
    # looked for again, chunk by chunk, only to name its file.
    for batch in session_batches(source, batch_rows, check=False):
        try:
            scores = evaluate(batch, rubrics, names=names, params=params)
        except TraceTableError as exc:
            located = _bad_row(source)
            if located is None and isinstance(exc, DuplicateSpanError):
                located = duplicate_located(source, exc)  # across files: no chunk holds both
            if located is None:
                raise
            raise located from exc
        if progress is not None:
            progress(batch.num_rows)
        yield scores
