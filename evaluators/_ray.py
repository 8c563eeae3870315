"""The evaluators on Ray Data: `plangate eval --engine ray`, on a local or an existing cluster.

The same `evaluate` as in process, run by Ray workers over whole sessions. Ray reads the Parquet
files (`read_parquet`); each row gets a bucket, a stable hash of its `session_id` modulo the
number of buckets (`map_batches`), so that a session's rows share one bucket whatever file they
came from; `groupby(bucket).map_groups` then scores each bucket with one `evaluate` call. A few
large buckets rather than one call per session: `evaluate` has a fixed cost per call. The score
tables stream back to the caller as they are done (through a Ray Client, all at the end).

Ray is imported only here, inside the functions: plangate imports and runs without it.
"""

from __future__ import annotations

import math
import os
import socket
import zlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from types import ModuleType
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import urlsplit

import numpy as np
import pyarrow as pa
import pyarrow.dataset as pds

from plangate.evaluators._registry import EvaluatorError, evaluate
from plangate.evaluators._rubric import RubricSet
from plangate.evaluators.scores import SCORE_SCHEMA
from plangate.harness import PlangateError
from plangate.replay.schema import ATTRIBUTE_FIELDS, SESSION_ID, VERSION_1_COLUMNS, empty_table

if TYPE_CHECKING:
    from ray.data import Dataset

NEEDS_RAY = "--engine ray needs Ray: pip install 'plangate[ray]'"
BUCKET = "__plangate_bucket"
"""The column that groups sessions for one `evaluate` call (dropped before the call)."""
CONNECT_TIMEOUT_S = 5.0
"""How long `--address` may take to accept a connection before the run gives up."""
SHUFFLE_STRATEGY_ENV = "RAY_DATA_DEFAULT_SHUFFLE_STRATEGY"
"""Ray's own setting: when it is set, the grouping uses that shuffle (see `_read`)."""


def ray_score_batches(
    paths: list[str],
    *,
    rubrics: RubricSet | None,
    names: Sequence[str] | None,
    params: dict[str, dict[str, Any]] | None,
    batch_rows: int,
    address: str | None,
) -> Iterator[pa.Table]:
    """Score Parquet trace tables on Ray; the tables' union equals `evaluate` on all of them.

    Args:
        paths: Parquet files holding trace tables, or one folder of them: local paths that
            every Ray worker can read too (a shared file system), or URIs (`s3://…`). A
            session may be spread over several files.
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

    Returns:
        Score tables in `SCORE_SCHEMA`, as the buckets are done (a table may hold several
        buckets' scores), in no particular order.

    Raises:
        EvaluatorError: Ray is not installed, an evaluator name or parameter is wrong, or
            `batch_rows` is not positive (all found here, before Ray starts); or, while
            iterating, the cluster at `address` cannot be reached.
    """
    ray = _import_ray()
    if batch_rows < 1:
        raise EvaluatorError(f"batch_rows must be at least 1, got {batch_rows!r}")
    # Unknown names and bad parameters fail here, in a fraction of a second, not on a worker.
    evaluate(empty_table(), rubrics, names, params)
    if not paths:
        return iter(())
    options = {"rubrics": rubrics, "names": list(names) if names else None, "params": params}
    return _stream(ray, list(paths), options, batch_rows, address)


def _import_ray() -> ModuleType:
    try:
        import ray
        import ray.data  # the `data` extra: `ray` alone lacks it
    except ImportError as exc:
        raise EvaluatorError(NEEDS_RAY) from exc
    return ray


def _stream(
    ray: ModuleType,
    paths: list[str],
    options: dict[str, Any],
    batch_rows: int,
    address: str | None,
) -> Iterator[pa.Table]:
    with _session(ray, address), _causes(ray):
        if not _through_client(ray):
            yield from scored_tables(paths, options, batch_rows)
            return
        # Ray Data does not run in a Ray Client (ray-project/ray#48682): drive it from a task
        # on the cluster. A client cannot stream a task's results, so they come back at once.
        drive = ray.remote(num_cpus=0)(all_scored_tables)
        yield from ray.get(drive.remote(paths, options, batch_rows))


@contextmanager
def _causes(ray: ModuleType) -> Iterator[None]:
    """A usage error raised on a worker as it is, not wrapped in the worker's traceback.

    (A bad parameter, a judge reply the cassette does not hold: one line, exit 2.)
    """
    try:
        yield
    except ray.exceptions.RayTaskError as failed:
        cause = failed.cause
        while isinstance(cause, ray.exceptions.RayTaskError):
            cause = cause.cause
        if isinstance(cause, PlangateError):  # Ray Data adds its advice below the message
            raise type(cause)(_first_line(cause)) from None
        raise


def scored_tables(paths: list[str], options: dict[str, Any], batch_rows: int) -> Iterator[pa.Table]:
    """The score tables, from a process that can drive Ray Data (not a Ray Client)."""
    import ray

    rows, older = _footers(paths)
    if rows == 0:
        return
    cpus = int(ray.cluster_resources().get("CPU", 1))  # type: ignore[no-untyped-call]
    buckets = max(math.ceil(rows / batch_rows), cpus)
    scored = (
        _read(
            paths,
            blocks=buckets,
            columns=list(VERSION_1_COLUMNS) if older else None,
        )
        .map_batches(partial(with_bucket, buckets=buckets), batch_format="pyarrow")
        .groupby(BUCKET, num_partitions=buckets)  # used by the hash shuffles only
        .map_groups(partial(score_group, **options), batch_format="pyarrow")
    )
    for batch in scored.iter_batches(batch_size=None, batch_format="pyarrow"):
        table = cast(pa.Table, batch)  # batch_format="pyarrow": always a table
        if table.num_rows:
            # Ray may loosen the schema on the way back (nullability, metadata): restore it.
            yield table.select(SCORE_SCHEMA.names).cast(SCORE_SCHEMA)


def all_scored_tables(paths: list[str], options: dict[str, Any], batch_rows: int) -> list[pa.Table]:
    """`scored_tables` as a list: what the task on the cluster returns to a Ray Client."""
    return list(scored_tables(paths, options, batch_rows))


def _through_client(ray: ModuleType) -> bool:
    """Whether this process reaches its cluster through a Ray Client (`ray://`)."""
    return bool(ray.util.client.ray.is_connected())


def _footers(paths: list[str]) -> tuple[int, bool]:
    """The trace rows in the files, and whether some file is of schema version 1.

    Both from the Parquet footers (no data is read). A file of version 1 has no attribute
    fields' columns, and Ray would give its rows nulls there, beside the other files' values:
    then every file is read without them, and `evaluate` reads them from the rows' attributes.

    Raises:
        EvaluatorError: A file is missing or not Parquet; the message names it.
    """
    if not paths:
        return 0, False
    try:
        dataset = pds.dataset(paths[0] if len(paths) == 1 else paths, format="parquet")
        files = [set(f.physical_schema.names) for f in dataset.get_fragments()]
        return int(dataset.count_rows()), any(not set(ATTRIBUTE_FIELDS) <= f for f in files)
    except (OSError, pa.ArrowException) as exc:
        raise EvaluatorError(f"{_first_line(exc)}; expected Parquet trace tables") from exc


def with_bucket(batch: pa.Table, *, buckets: int) -> pa.Table:
    """What a Ray worker runs first: the batch with each row's bucket (`BUCKET`)."""
    return batch.append_column(BUCKET, session_buckets(batch.column(SESSION_ID), buckets))


def score_group(
    group: pa.Table,
    *,
    rubrics: RubricSet | None,
    names: list[str] | None,
    params: dict[str, dict[str, Any]] | None,
) -> pa.Table:
    """What a Ray worker runs then: `evaluate` on one bucket, whole sessions."""
    table = group.drop_columns([BUCKET])
    if table.num_rows == 0:
        return SCORE_SCHEMA.empty_table()
    return evaluate(table, rubrics, names, params)


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


def _read(paths: list[str], blocks: int, columns: list[str] | None) -> Dataset:
    """The trace rows in `blocks` blocks, with this module's settings (the caller's are kept).

    Only `columns`, where given (else every column).

    As many blocks as buckets: a sort moves blocks × blocks pieces, and Ray's default for a
    read (at least 200 blocks) would make that tens of thousands of tiny objects.
    """
    from ray.data import DataContext, read_parquet
    from ray.data.context import ShuffleStrategy

    current = DataContext.get_current()
    saved = current.use_datasource_v2, current.enable_progress_bars
    # Ray 2.60's new Parquet reader lists files on several threads, each importing fsspec's
    # HTTP filesystem; without aiohttp that import fails, and when two threads try at once it
    # fails with an ImportError Ray does not catch. The previous reader lists files in turn.
    current.use_datasource_v2 = False
    current.enable_progress_bars = False
    try:
        dataset = read_parquet(
            paths, partitioning=None, override_num_blocks=blocks, columns=columns
        )
    finally:
        current.use_datasource_v2, current.enable_progress_bars = saved
    context = dataset.context  # the dataset's own copy: what it and its children run with
    context.print_on_execution_start = False
    if SHUFFLE_STRATEGY_ENV not in os.environ:
        # The hash shuffles start fresh worker processes (or actors) for every run: seconds
        # before the first row moves. A sort costs less until the data is large.
        context.shuffle_strategy = ShuffleStrategy.SORT_SHUFFLE_PULL_BASED
    return dataset


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
        f"--address {address!r}: no Ray cluster there ({_first_line(exc)}); start one with "
        "`ray start --head` and pass the address it prints, or leave out --address to run on "
        "this machine"
    )


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
