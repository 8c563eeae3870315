"""The evaluators on Ray Data: `plangate eval --engine ray`, on a local or an existing cluster.

The same `evaluate` as in process, run by Ray workers over whole sessions. The workers read the
files as the local engine does (`chunks`: a file of schema version 1 has its attribute fields'
columns read from its attributes, a Hive partition folder fills its column) and check each
chunk as it comes (`validate_table`), so that a bad value is named by its file and its row
there. Each row gets a bucket, a stable hash of its `session_id` modulo the number of buckets,
so that a session's rows share one bucket whatever file they came from;
`groupby(bucket).map_groups` then scores each bucket with one `evaluate` call. A few large
buckets rather than one call per session: `evaluate` has a fixed cost per call. The score
tables stream back to the caller as they are done (through a Ray Client, all at the end).
Ray's own log lines stay in its log files, off the terminal, for the length of a run.

Ray is imported only here, inside the functions: plangate imports and runs without it.
"""

from __future__ import annotations

import copy
import logging
import math
import os
import socket
import zlib
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from functools import partial
from types import ModuleType
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import urlsplit

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from plangate.evaluators._registry import EvaluatorError, evaluate
from plangate.evaluators._rubric import RubricSet
from plangate.evaluators._source import (
    TraceSource,
    checked_chunks,
    duplicate_located,
    gathered,
    trace_source,
)
from plangate.evaluators.scores import SCORE_SCHEMA
from plangate.harness import PlangateError
from plangate.replay.schema import (
    SESSION_ID,
    DuplicateSpanError,
    TraceTableError,
    empty_table,
    first_line,
)

if TYPE_CHECKING:
    from ray.data import Dataset

NEEDS_RAY = "--engine ray needs Ray: pip install 'plangate[ray]'"
BUCKET = "__plangate_bucket"
"""The column that groups sessions for one `evaluate` call (dropped before the call)."""
SPANS = "__plangate_spans"
"""The column of the score tables on their way back that counts the spans scored."""
FILE = "item"
"""The column of the dataset the reads start from: a file's index in the source."""
CONNECT_TIMEOUT_S = 5.0
"""How long `--address` may take to accept a connection before the run gives up."""
SHUFFLE_STRATEGY_ENV = "RAY_DATA_DEFAULT_SHUFFLE_STRATEGY"
"""Ray's own setting: when it is set, the grouping uses that shuffle (see `_read`)."""
RAY_LOGGERS = ("ray", "ray.data")
"""Ray's loggers that write to the terminal (Ray Data's does not pass its lines to Ray's)."""


def ray_score_batches(
    paths: Sequence[str] | TraceSource,
    *,
    rubrics: RubricSet | None,
    names: Sequence[str] | None,
    params: dict[str, dict[str, Any]] | None,
    batch_rows: int,
    address: str | None,
    progress: Callable[[int], None] | None = None,
) -> Iterator[pa.Table]:
    """Score Parquet trace tables on Ray; the tables' union equals `evaluate` on all of them.

    Args:
        paths: The trace table: a `TraceSource` (as `trace_source` found and checked it), or
            Parquet files, folders of them (Hive partitions too) or globs, each found as
            `trace_source` finds it. Local paths that every Ray worker can read too (a shared
            file system). A session may be spread over several files.
        rubrics: The golden rubrics, as for `evaluate`; sent to the workers.
        names: The evaluators to run (default: all).
        params: Keyword parameters per evaluator name, as for `evaluate`.
        batch_rows: About how many trace rows one `evaluate` call gets (sessions are never
            split, so a call can get more); sets the number of buckets, which is never fewer
            than the cluster's CPUs.
        address: An existing cluster (`HOST:PORT`, `auto`, or `ray://HOST:PORT` for Ray
            Client); None starts a local Ray on this machine's CPUs, without its dashboard and
            usage statistics. A Ray already initialized in this process is used as it is.
            Whatever this call starts or connects, it shuts down when the iteration ends.
        progress: Called with the spans of each bucket scored, as its scores arrive.

    Returns:
        Score tables in `SCORE_SCHEMA`, as the buckets are done (a table may hold several
        buckets' scores), in no particular order.

    Raises:
        EvaluatorError: Ray is not installed, an evaluator name or parameter is wrong, or
            `batch_rows` is not positive (all found here, before Ray starts); or, while
            iterating, the cluster at `address` cannot be reached.
        TraceTableError: While iterating: a path that holds no trace table, or a row that
            breaks the schema; the message names the file (and the row there).
    """
    ray = _import_ray()
    if batch_rows < 1:
        raise EvaluatorError(f"batch_rows must be at least 1, got {batch_rows!r}")
    # Unknown names and bad parameters fail here, in a fraction of a second, not on a worker.
    evaluate(empty_table(), rubrics, names, params)
    if not isinstance(paths, TraceSource) and not paths:
        return iter(())
    options = {"rubrics": rubrics, "names": list(names) if names else None, "params": params}
    return _finished(_stream(ray, paths, options, batch_rows, address), progress)


def _finished(
    tables: Iterator[pa.Table], progress: Callable[[int], None] | None
) -> Iterator[pa.Table]:
    """The score tables in `SCORE_SCHEMA`, each bucket's spans told to `progress`."""
    for table in tables:
        if progress is not None:
            progress(int(pc.sum(table.column(SPANS)).as_py() or 0))
        # Ray may loosen the schema on the way back (nullability, metadata): restore it.
        yield table.select(SCORE_SCHEMA.names).cast(SCORE_SCHEMA)


def _import_ray() -> ModuleType:
    try:
        import ray
        import ray.data  # the `data` extra: `ray` alone lacks it
    except ImportError as exc:
        raise EvaluatorError(NEEDS_RAY) from exc
    return ray


def _stream(
    ray: ModuleType,
    paths: Sequence[str] | TraceSource,
    options: dict[str, Any],
    batch_rows: int,
    address: str | None,
) -> Iterator[pa.Table]:
    source = _found(paths)
    if source.filesystem is None:  # absolute here, where they were given: a worker on another
        source = replace(source, files=tuple(os.path.abspath(f) for f in source.files))  # node
    with _quiet(), _session(ray, address), _located(source), _causes(ray):
        if not _through_client(ray):
            yield from scored_tables(source, options, batch_rows)
            return
        # Ray Data does not run in a Ray Client (ray-project/ray#48682): drive it from a task
        # on the cluster. A client cannot stream a task's results, so they come back at once.
        drive = ray.remote(num_cpus=0)(all_scored_tables)
        yield from ray.get(drive.remote(source, options, batch_rows))


@contextmanager
def _quiet() -> Iterator[None]:
    """Ray's log lines off the terminal for the length of a run; its log files keep them.

    Ray logs its start, Ray Data each run and, when a worker fails, the worker's traceback
    twice: a user of the command wants the one line that says what to do. (A worker's own
    output stays in the workers' logs: `log_to_driver=False`.) The handlers are Ray's, for the
    whole process: a program that uses Ray itself hears nothing from it during a run either.
    """
    terminal = [
        handler
        for name in RAY_LOGGERS
        for handler in logging.getLogger(name).handlers
        if isinstance(handler, logging.StreamHandler)
        and not isinstance(handler, logging.FileHandler)
    ]
    levels = [handler.level for handler in terminal]
    for handler in terminal:
        handler.setLevel(logging.CRITICAL + 1)
    try:
        yield
    finally:
        for handler, level in zip(terminal, levels, strict=True):
            handler.setLevel(level)


@contextmanager
def _located(source: TraceSource) -> Iterator[None]:
    """Two rows with one span id, found in a bucket, named by their files and rows there."""
    try:
        yield
    except DuplicateSpanError as exc:
        raise duplicate_located(source, exc) from exc


@contextmanager
def _causes(ray: ModuleType) -> Iterator[None]:
    """A usage error raised on a worker as it is, not wrapped in the worker's traceback.

    (A bad parameter, a bad row, a judge reply the cassette does not hold: one line, exit 2.)
    """
    try:
        yield
    except ray.exceptions.RayTaskError as failed:
        cause = failed.cause
        while isinstance(cause, ray.exceptions.RayTaskError):
            cause = cause.cause
        if isinstance(cause, PlangateError):  # Ray Data adds its advice below the message
            error = copy.copy(cause)  # of its type, with what it carries (a span's key)
            error.args = (first_line(cause),)
            raise error from None
        raise


def scored_tables(
    source: TraceSource, options: dict[str, Any], batch_rows: int
) -> Iterator[pa.Table]:
    """The score tables, from a process that can drive Ray Data (not a Ray Client)."""
    import ray

    if source.rows == 0:
        return
    cpus = int(ray.cluster_resources().get("CPU", 1))  # type: ignore[no-untyped-call]
    buckets = max(math.ceil(source.rows / batch_rows), cpus)
    scored = (
        _read(source, buckets)
        .groupby(BUCKET, num_partitions=buckets)  # used by the hash shuffles only
        .map_groups(partial(score_group, **options), batch_format="pyarrow")
    )
    for batch in scored.iter_batches(batch_size=None, batch_format="pyarrow"):
        table = cast(pa.Table, batch)  # batch_format="pyarrow": always a table
        if table.num_rows:
            yield table


def all_scored_tables(
    source: TraceSource, options: dict[str, Any], batch_rows: int
) -> list[pa.Table]:
    """`scored_tables` as a list: what the task on the cluster returns to a Ray Client."""
    return list(scored_tables(source, options, batch_rows))


def _through_client(ray: ModuleType) -> bool:
    """Whether this process reaches its cluster through a Ray Client (`ray://`)."""
    return bool(ray.util.client.ray.is_connected())


def _found(source: Sequence[str] | TraceSource) -> TraceSource:
    """The files and what their Hive folders give, checked from their footers (`trace_source`).

    Found where the paths were given, before Ray starts (`plangate eval` found them already).

    Raises:
        TraceTableError: Nothing found, a file that is not Parquet or not a trace table; the
            message names it.
    """
    if isinstance(source, TraceSource):
        return source
    found = [trace_source(path) for path in source]
    if len(found) == 1:
        return found[0]
    if any(one.filesystem is not None for one in found):
        raise TraceTableError(
            f"{', '.join(one.given for one in found)}: several sources, some in object storage; "
            "name the files with one prefix or one glob"
        )
    return TraceSource(
        given=", ".join(one.given for one in found),
        files=tuple(path for one in found for path in one.files),
        rows=sum(one.rows for one in found),
        constants=tuple(given for one in found for given in one.constants),
    )


def checked_rows(
    files: pa.Table, *, source: TraceSource, buckets: int, block_rows: int
) -> Iterator[pa.Table]:
    """What a Ray worker runs first: its files' rows, checked, each with its bucket (`BUCKET`).

    `files` holds indices into `source.files`. The rows are read and checked as the local
    engine reads and checks them, so that they equal its rows and an error names the file and
    the row there; they leave in blocks of about `block_rows` (a few large blocks shuffle
    faster than many small ones).
    """
    indices = files.column(FILE).to_pylist()
    mine = replace(
        source,
        files=tuple(source.files[i] for i in indices),
        rows=0,  # unknown per file; `chunks` does not read it
        constants=tuple(source.constants[i] for i in indices),
    )
    bucketed = (with_bucket(chunk, buckets=buckets) for chunk in checked_chunks(mine))
    yield from gathered(bucketed, block_rows)


def with_bucket(batch: pa.Table, *, buckets: int) -> pa.Table:
    """The batch with each row's bucket (`BUCKET`); its session ids are checked already."""
    return batch.append_column(BUCKET, session_buckets(batch.column(SESSION_ID), buckets))


def score_group(
    group: pa.Table,
    *,
    rubrics: RubricSet | None,
    names: list[str] | None,
    params: dict[str, dict[str, Any]] | None,
) -> pa.Table:
    """What a Ray worker runs then: `evaluate` on one bucket, whole sessions.

    The scores carry the bucket's spans in `SPANS`, on their first row (the caller's progress).
    """
    table = group.drop_columns([BUCKET])
    scores = (
        evaluate(table, rubrics, names, params) if table.num_rows else SCORE_SCHEMA.empty_table()
    )
    spans = np.zeros(scores.num_rows, dtype=np.int64)
    spans[:1] = table.num_rows
    return scores.append_column(SPANS, pa.array(spans))


def session_buckets(sessions: pa.ChunkedArray | pa.Array, buckets: int) -> pa.Array:
    """Each row's bucket: CRC-32 of its session id modulo `buckets`, the same in every process.

    (Python's own `hash` of a string differs from one process to the next.) One CRC per
    distinct session, not per row.
    """
    if isinstance(sessions, pa.ChunkedArray):
        sessions = sessions.combine_chunks()
    encoded = sessions.dictionary_encode()
    per_session = np.fromiter(
        (zlib.crc32(s.encode()) % buckets for s in encoded.dictionary.to_pylist()),
        dtype=np.int64,
        count=len(encoded.dictionary),
    )
    return pa.array(per_session[encoded.indices.to_numpy(zero_copy_only=False)])


@contextmanager
def _session(ray: ModuleType, address: str | None) -> Iterator[None]:
    """Ray for the length of a run: reuse one already initialized, else start or connect one."""
    if ray.is_initialized():
        yield
        return
    if address is None:
        os.environ["RAY_USAGE_STATS_ENABLED"] = "0"  # a local run reports nothing anywhere
        ray.init(
            address="local",  # not $RAY_ADDRESS: without --address, the run is local
            num_cpus=os.cpu_count(),
            include_dashboard=False,
            log_to_driver=False,
        )
    else:
        _check_reachable(address)
        try:
            ray.init(address=address, log_to_driver=False)
        except (ConnectionError, RuntimeError) as exc:  # Ray raises either, by address kind
            raise EvaluatorError(_unreachable(address, exc)) from exc
    try:
        yield
    finally:
        ray.shutdown()


def _read(source: TraceSource, buckets: int) -> Dataset:
    """The source's rows, checked and bucketed by the workers (`checked_rows`).

    One read task per file, or per few files when there are more files than buckets; the
    tasks' blocks hold about as many rows as a bucket. As many blocks as buckets: a sort moves
    blocks × blocks pieces, and a block per file or per chunk could make that tens of
    thousands of tiny objects.
    """
    from ray.data import from_items
    from ray.data.context import ShuffleStrategy

    files = from_items(
        list(range(len(source.files))), override_num_blocks=min(len(source.files), buckets)
    )
    context = files.context  # the dataset's own copy: what it and its children run with
    context.enable_progress_bars = False
    context.print_on_execution_start = False
    if SHUFFLE_STRATEGY_ENV not in os.environ:
        # The hash shuffles start fresh worker processes (or actors) for every run: seconds
        # before the first row moves. A sort costs less until the data is large.
        context.shuffle_strategy = ShuffleStrategy.SORT_SHUFFLE_PULL_BASED
    read = partial(
        checked_rows,
        source=source,
        buckets=buckets,
        block_rows=math.ceil(source.rows / buckets),
    )
    return files.map_batches(read, batch_format="pyarrow")


def _check_reachable(address: str) -> None:
    """Fail at once when nothing listens at `address`: Ray would retry for minutes."""
    parts = urlsplit(address if "://" in address else f"//{address}")
    try:
        host, port = parts.hostname, parts.port
        if host is None or port is None:
            return  # `auto`, or a form Ray resolves itself
        socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S).close()
    except (OSError, ValueError) as exc:
        raise EvaluatorError(_unreachable(address, exc)) from exc


def _unreachable(address: str, exc: BaseException) -> str:
    """Why `ray.init(address)` failed, and what to do."""
    if "InvalidAuthToken" in f"{exc} {exc.__cause__}":
        return (
            f"--address {address!r}: the cluster wants its authentication token; set "
            "RAY_AUTH_MODE=token and RAY_AUTH_TOKEN to the head node's token (from "
            "`ray get-auth-token` there)"
        )
    return (
        f"--address {address!r}: no Ray cluster there ({first_line(exc)}); start one with "
        "`ray start --head` and pass the address it prints, or leave out --address to run on "
        "this machine"
    )
