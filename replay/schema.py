"""The trace table: the one data model that everything scores, stores and compares.

One row per span, in the OpenInference vocabulary, whatever produced it: our harness, Phoenix,
OTLP files, or another team's agent (tau-bench, tau2-bench, SWE-agent, OpenAI message lists).
Column names are the constants below; the schema has a version, kept in the Arrow schema's
metadata and checked on read.

Conventions every producer follows:
- a turn is one AGENT span (the root of its trace) and everything under it; `turn_index` orders
  the turns of a session; `iteration` numbers the model calls within a turn (1, 2, …) and is set
  on LLM spans and on the TOOL spans that call asked for;
- `tool_args` is canonical JSON (sorted keys, no spaces), computed once when the row is built;
- what a source does not have stays null: no invented timestamps, tokens or outcomes;
- the AGENT row carries the turn's outcome where the source has one: `stop_reason`, `reward`
  (the source's own judgement, e.g. tau-bench's), `task_id` and `trial` for repeats.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NoReturn

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from plangate.harness import ERROR_STOP_REASONS as HARNESS_ERROR_STOP_REASONS
from plangate.harness import (
    FINISH,
    PlangateError,
    canonical_arguments_text,
    canonical_json,
    semconv,
    writing,
)
from plangate.harness import STOP_REASONS as HARNESS_STOP_REASONS
from plangate.harness import first_line as first_line
from plangate.harness.plans import PLAN_TOOLS as HARNESS_PLAN_TOOLS

# The columns that hold what the spans' attributes say, defined where those are read; named
# here too, with the helpers the evaluators use (this is the only module of replay they read).
from plangate.replay._attribute_fields import ATTRIBUTE_FIELDS as ATTRIBUTE_FIELDS
from plangate.replay._attribute_fields import COLUMN_FIELDS, with_attribute_fields
from plangate.replay._attribute_fields import COST_USD as COST_USD
from plangate.replay._attribute_fields import DROPPED_ATTRIBUTES as DROPPED_ATTRIBUTES
from plangate.replay._attribute_fields import DROPPED_COUNT as DROPPED_COUNT
from plangate.replay._attribute_fields import PROVIDER as PROVIDER
from plangate.replay._attribute_fields import TOKENS_CACHED as TOKENS_CACHED
from plangate.replay._attribute_fields import attribute_columns as attribute_columns
from plangate.replay._attribute_fields import json_object as json_object
from plangate.replay._attribute_fields import recorded_dollars as recorded_dollars
from plangate.replay._column_text import missing_columns as missing_columns
from plangate.replay._column_text import other_types as other_types
from plangate.replay._span_ids import SPAN_ONCE as SPAN_ONCE
from plangate.replay._span_ids import check_unique_spans as check_unique_spans
from plangate.replay._table_errors import DuplicateSpanError as DuplicateSpanError
from plangate.replay._table_errors import TraceTableError as TraceTableError

SCHEMA_NAME = "plangate.trace_table"
SCHEMA_VERSION = 2
"""2 added the attribute fields' columns (`ATTRIBUTE_FIELDS`); a table of version 1 gets them
from its `attributes` when read (`upgrade_table`)."""

SESSION_ID = "session_id"
TURN_INDEX = "turn_index"
TRACE_ID = "trace_id"
SPAN_ID = "span_id"
PARENT_SPAN_ID = "parent_span_id"
SPAN_KIND = "span_kind"
NAME = "name"
START_TIME = "start_time"
END_TIME = "end_time"
STATUS_CODE = "status_code"
STATUS_MESSAGE = "status_message"
ITERATION = "iteration"
TOOL_NAME = "tool_name"
TOOL_CALL_ID = "tool_call_id"
TOOL_ARGS = "tool_args"
TOOL_OUTPUT = "tool_output"
MODEL_NAME = "model_name"
TOKENS_PROMPT = "tokens_prompt"
TOKENS_COMPLETION = "tokens_completion"
INPUT_VALUE = "input_value"
OUTPUT_VALUE = "output_value"
PLAN = "plan"
EVENTS = "events"
ATTRIBUTES = "attributes"
SOURCE = "source"
VARIANT = "variant"
STOP_REASON = "stop_reason"
REWARD = "reward"
TASK_ID = "task_id"
TRIAL = "trial"

SPAN_KINDS = frozenset(
    {"AGENT", "CHAIN", "LLM", "TOOL", "RETRIEVER", "EMBEDDING", "RERANKER", "GUARDRAIL",
     "EVALUATOR", "PROMPT", "DECISION", "UNKNOWN"}
)  # fmt: skip
"""OpenInference span kinds."""
SPAN_KIND_CODES: tuple[str, ...] = (
    "AGENT", "LLM", "TOOL", *sorted(SPAN_KINDS - {"AGENT", "LLM", "TOOL"})
)  # fmt: skip
"""The span kinds in the order of the codes `validate_table` returns: what evaluators read first."""
_SPAN_KIND_VALUES = pa.array(SPAN_KIND_CODES, pa.string())
STATUS_CODES = frozenset({"OK", "ERROR", "UNSET"})

STOP_REASONS = HARNESS_STOP_REASONS
"""The values of `stop_reason` that plangate's harness writes (importers keep a source's own)."""
NOT_RUN = "not_run"
"""The stop reason of a turn a replay did not start: its run's budget was reached first."""
ERROR_STOP_REASONS: frozenset[str] = HARNESS_ERROR_STOP_REASONS | {NOT_RUN}
"""Stop reasons that are infrastructure failures (the model endpoint kept failing, the tools'
source failed), not something the agent did, and `not_run`: a replay that never started the
turn (its run's budget was reached first). Such a turn is an error, neither a pass nor a fail."""
PLAN_TOOLS = HARNESS_PLAN_TOOLS
"""The `tool_name`s of plan bookkeeping: the todo and the dependency dialects' tools."""
CONTROL_TOOLS = frozenset({FINISH})
"""The `tool_name`s that steer the turn rather than do work."""
TOOL_SPAN_PREFIX = semconv.TOOL_SPAN_PREFIX
"""A TOOL row's `name` is this and the tool's name."""

_TIME = pa.timestamp("us", tz="UTC")

SCHEMA = pa.schema(
    [
        pa.field(SESSION_ID, pa.string(), nullable=False),
        pa.field(TURN_INDEX, pa.int32(), nullable=False),
        pa.field(TRACE_ID, pa.string(), nullable=False),
        pa.field(SPAN_ID, pa.string(), nullable=False),
        pa.field(PARENT_SPAN_ID, pa.string()),
        pa.field(SPAN_KIND, pa.string(), nullable=False),
        pa.field(NAME, pa.string(), nullable=False),
        pa.field(START_TIME, _TIME),
        pa.field(END_TIME, _TIME),
        pa.field(STATUS_CODE, pa.string(), nullable=False),
        pa.field(STATUS_MESSAGE, pa.string()),
        pa.field(ITERATION, pa.int32()),
        pa.field(TOOL_NAME, pa.string()),
        pa.field(TOOL_CALL_ID, pa.string()),
        pa.field(TOOL_ARGS, pa.string()),
        pa.field(TOOL_OUTPUT, pa.string()),
        pa.field(MODEL_NAME, pa.string()),
        pa.field(TOKENS_PROMPT, pa.int64()),
        pa.field(TOKENS_COMPLETION, pa.int64()),
        pa.field(INPUT_VALUE, pa.string()),
        pa.field(OUTPUT_VALUE, pa.string()),
        pa.field(PLAN, pa.string()),
        pa.field(EVENTS, pa.string()),
        pa.field(ATTRIBUTES, pa.string()),
        pa.field(SOURCE, pa.string(), nullable=False),
        pa.field(VARIANT, pa.string()),
        pa.field(STOP_REASON, pa.string()),
        pa.field(REWARD, pa.float64()),
        pa.field(TASK_ID, pa.string()),
        pa.field(TRIAL, pa.int32()),
        *COLUMN_FIELDS,
    ],
    metadata={"plangate.schema": SCHEMA_NAME, "plangate.version": str(SCHEMA_VERSION)},
)
"""The trace table's Arrow schema."""

COLUMNS: tuple[str, ...] = tuple(SCHEMA.names)
VERSION_1_COLUMNS = tuple(name for name in COLUMNS if name not in ATTRIBUTE_FIELDS)
"""The columns of schema version 1: all but the attribute fields'."""

ATTRIBUTE_OF_COLUMN = {
    INPUT_VALUE: semconv.INPUT_VALUE,
    OUTPUT_VALUE: semconv.OUTPUT_VALUE,
    MODEL_NAME: semconv.LLM_MODEL_NAME,
    TOKENS_PROMPT: semconv.TOKENS_PROMPT,
    TOKENS_COMPLETION: semconv.TOKENS_COMPLETION,
    TOOL_NAME: semconv.TOOL_NAME,
    TOOL_CALL_ID: semconv.TOOL_ID,
    ITERATION: semconv.ITERATION,
    TURN_INDEX: semconv.TURN_INDEX,
    PLAN: semconv.PLAN,
    STOP_REASON: semconv.STOP_REASON,
}
"""The columns read from one span attribute each, and that attribute (the rest of a span's
attributes go to `attributes`)."""


def canonical_arguments(arguments: Any) -> str:
    """Canonical JSON of call arguments given as a JSON text or a parsed value.

    Text that is not valid JSON is kept as it is: it is still a stable key for comparing calls.
    """
    if isinstance(arguments, str):  # blank text from another agent means no arguments
        return canonical_arguments_text(arguments if arguments.strip() else "")
    return canonical_json(arguments)


def build_table(rows: Iterable[Mapping[str, Any]]) -> pa.Table:
    """A trace table from row mappings (missing columns are null), checked against the schema.

    The attribute fields' columns a row does not give are read from its `attributes`.
    """
    rows = list(rows)
    columns = {name: [row.get(name) for row in rows] for name in COLUMNS}
    try:
        table = table_from_columns(columns)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError) as exc:
        raise TraceTableError(f"rows do not fit the trace table: {_locate(rows, exc)}") from exc
    validate_table(table)
    return table


def table_from_columns(columns: Mapping[str, Any]) -> pa.Table:
    """A trace table (not checked) from its columns as lists or arrays, by name.

    A column left out is null, and the attribute fields' columns are read from `attributes`
    where they are null (`ATTRIBUTE_FIELDS`): what every producer of a table goes through.
    """
    rows = len(columns[SESSION_ID])
    given = {name: columns.get(name, pa.nulls(rows, SCHEMA.field(name).type)) for name in COLUMNS}
    return with_attribute_fields(pa.Table.from_pydict(given, schema=SCHEMA), ATTRIBUTES)


def upgrade_table(table: pa.Table) -> pa.Table:
    """A trace table of an older schema version as this one (the same table when it is).

    Version 1 had no attribute fields' columns: they are read from `attributes`. So are they
    when all four are null in every row while some attributes are not: a table made against
    the schema without `build_table` (`pa.Table.from_pylist(rows, schema=SCHEMA)`), whose
    attributes would otherwise go unread. A table built with them keeps what they say.
    """
    names = table.column_names
    if ATTRIBUTES not in names:
        return table  # not a trace table: `validate_table` says what is missing
    present = [name for name in ATTRIBUTE_FIELDS if name in names]
    if len(present) == len(ATTRIBUTE_FIELDS) and (
        any(table.column(name).null_count < table.num_rows for name in present)
        or table.column(ATTRIBUTES).null_count == table.num_rows
    ):
        return table
    return with_attribute_fields(table, ATTRIBUTES)


def _locate(rows: list[Mapping[str, Any]], exc: Exception) -> str:
    """Find the first row and column that the schema rejects, to say exactly where."""
    for name in COLUMNS:
        field_type = SCHEMA.field(name).type
        for index, row in enumerate(rows):
            value = row.get(name)
            if value is None:
                continue
            try:
                pa.array([value], type=field_type)
            except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError):
                span = f" (span {row[SPAN_ID]!r})" if row.get(SPAN_ID) else ""
                return f"row {index}{span}, column {name!r}: {value!r} is not {field_type}"
    return str(exc)


def lost_attributes(table: pa.Table) -> str | None:
    """What to tell a team whose agent's spans lost attributes at its SDK (None: none did).

    How many spans (`dropped_attributes` over 0) and turns, what that does to the
    verdicts, and what to change.
    """
    lost = upgrade_table(table).select([SESSION_ID, TURN_INDEX, DROPPED_COUNT])
    lost = lost.filter(pc.greater(lost.column(DROPPED_COUNT), 0).fill_null(False))
    if not lost.num_rows:
        return None
    spans = lost.num_rows
    keys = (lost.column(c).to_pylist() for c in (SESSION_ID, TURN_INDEX))
    turns = len(set(zip(*keys, strict=True)))
    return (
        f"{spans} span{'s' * (spans != 1)} of {turns} turn{'s' * (turns != 1)} lost attributes "
        f"at the agent's OpenTelemetry SDK, over its limit ({DROPPED_ATTRIBUTES}): `tokens` and "
        "`cost` pass no turn on counts it may have lost; give the agent's tracer provider room "
        "(SpanLimits(max_span_attributes=10_000), or OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT)"
    )


def empty_table() -> pa.Table:
    """A trace table with no rows."""
    return SCHEMA.empty_table()


def validate_table(
    table: pa.Table, where: str = "trace table", first_row: int = 0
) -> npt.NDArray[np.int8]:
    """Check a table's columns, types and values; the error names the column and the row.

    Rows are numbered from `first_row` (a part of a file: the file's own numbers).

    A table of schema version 1, without any of the attribute fields' columns, is valid: what
    reads those columns upgrades it first (`upgrade_table`).

    Returns each row's span kind as an index into `SPAN_KIND_CODES` (read once, for the check).
    """
    present = set(table.column_names)
    required = COLUMNS if not present.isdisjoint(ATTRIBUTE_FIELDS) else VERSION_1_COLUMNS
    missing = [name for name in required if name not in present]
    if missing:
        raise TraceTableError(f"{where}: {missing_columns(missing, SCHEMA)}")
    if wrong := other_types(table.schema, SCHEMA, required):
        raise TraceTableError(f"{where}: {wrong}")
    for name in required:
        if not SCHEMA.field(name).nullable and table.column(name).null_count:
            row = first_row + table.column(name).to_pylist().index(None)
            raise TraceTableError(f"{where}: row {row}, column {name!r} is null; it is required")
    kinds = kind_codes(table, where, first_row)
    changes = _changes(table, STATUS_CODE)
    _check_values(table, STATUS_CODE, STATUS_CODES, where, rows=changes, first_row=first_row)
    check_unique_spans(table.column(TRACE_ID), one_chunk(table.column(SPAN_ID)), where, first_row)
    return kinds


def kind_codes(table: pa.Table, where: str, first_row: int = 0) -> npt.NDArray[np.int8]:
    """Each row's span kind as an index into `SPAN_KIND_CODES`; a kind not there is an error."""
    kinds = table.column(SPAN_KIND)
    if not len(kinds):
        return np.zeros(0, dtype=np.int8)
    found = pc.index_in(kinds, value_set=_SPAN_KIND_VALUES)
    if found.null_count:
        row = pc.index(pc.is_null(found), True).as_py()
        _not_allowed(table, SPAN_KIND, row, SPAN_KINDS, where, first_row)
    return np.asarray(found.to_numpy(), dtype=np.int8)


def _changes(table: pa.Table, column: str) -> npt.NDArray[np.int64] | None:
    """The rows whose value differs from the row before; None when there are many.

    Worth it for a column whose value seldom changes (status codes). The first row of a bad
    value is always one of them, so checking them finds it.
    """
    values = one_chunk(table.column(column))
    if len(values) < 2:
        return None
    change = np.ones(len(values), dtype=bool)
    change[1:] = np.asarray(pc.not_equal(values[1:], values[:-1]), dtype=bool)
    rows = np.flatnonzero(change)
    return rows.astype(np.int64) if len(rows) <= len(values) // 4 else None


def _check_values(
    table: pa.Table,
    column: str,
    allowed: frozenset[str],
    where: str,
    rows: npt.NDArray[np.int64] | None = None,
    first_row: int = 0,
) -> None:
    """Every value of `column` is `allowed` (looked at only at `rows`, when given)."""
    values = table.column(column)
    if len(values) == 0:
        return
    seen = values if rows is None else values.take(rows)
    ok = pc.is_in(seen, value_set=pa.array(sorted(allowed)))
    if not pc.all(ok).as_py():
        index = pc.index(ok, False).as_py()
        row = index if rows is None else int(rows[index])
        _not_allowed(table, column, row, allowed, where, first_row)


def _not_allowed(
    table: pa.Table,
    column: str,
    row: int,
    allowed: frozenset[str],
    where: str,
    first_row: int,
) -> NoReturn:
    """A value not allowed in its column: the error names the row, the value and the choices."""
    value = table.column(column)[row].as_py()
    raise TraceTableError(
        f"{where}: row {first_row + row}, column {column!r} is {value!r}; "
        f"allowed: {', '.join(sorted(allowed))}"
    )


def one_chunk(column: pa.ChunkedArray) -> pa.Array:
    """A column as one array: its only chunk as it lies, else the chunks copied together."""
    return column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()


def write_table(table: pa.Table, path: str | Path) -> Path:
    """Write a trace table as Parquet, atomically: a temporary file, then a rename."""
    table = upgrade_table(table)
    validate_table(table)
    return write_parquet(table.replace_schema_metadata(SCHEMA.metadata), path)


def write_parquet(table: pa.Table, path: str | Path) -> Path:
    """Write any Arrow table as Parquet atomically: an existing file is replaced whole or kept.

    Its string columns are redacted first (the built-in policy): a table on disk has left the
    process.
    """
    from plangate.replay._redact import default_redactor  # schema stays importable alone

    table = default_redactor().table(table)
    target = Path(path)
    with writing(target):
        target.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
        os.close(handle)
        try:
            pq.write_table(table, temporary)
            os.replace(temporary, target)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
    return target


def read_parquet(
    path: str | Path, what: str, error: type[PlangateError] = TraceTableError
) -> pa.Table:
    """One Parquet file holding `what`.

    Raises:
        PlangateError: `error`, naming the path: it is missing, a folder, or not readable
            Parquet (truncated, random, not Parquet at all).
    """
    source = Path(path)
    if not source.exists():
        raise error(f"{source}: no such file; expected {what}")
    if not source.is_file():
        raise error(f"{source}: not a file; expected {what} (one .parquet file)")
    try:
        return pq.read_table(source)
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise error(
            f"{source}: not a readable Parquet file ({first_line(exc)}); expected {what}"
        ) from exc


def read_table(path: str | Path) -> pa.Table:
    """Read and check a trace table written by `write_table` (or any producer of the schema)."""
    source = Path(path)
    table = read_parquet(source, "a trace table")
    metadata = table.schema.metadata or {}
    version = metadata.get(b"plangate.version")
    if version is not None and int(version) > SCHEMA_VERSION:
        raise TraceTableError(
            f"{source}: trace table schema version {int(version)} is newer than this plangate "
            f"understands ({SCHEMA_VERSION}); upgrade plangate"
        )
    table = upgrade_table(table)
    validate_table(table, str(source))
    return table.replace_schema_metadata(SCHEMA.metadata)


def concat_tables(tables: Iterable[pa.Table]) -> pa.Table:
    """Several trace tables as one."""
    parts = [upgrade_table(table).select(COLUMNS) for table in tables]
    return pa.concat_tables(parts) if parts else empty_table()


def to_utc(value: datetime | float | int | str | None) -> datetime | None:
    """A timestamp as an aware UTC datetime: from a datetime, epoch seconds or ISO 8601 text."""
    if value is None:
        return None
    if isinstance(value, datetime):
        return value.astimezone(UTC) if value.tzinfo else value.replace(tzinfo=UTC)
    if isinstance(value, int | float):
        return datetime.fromtimestamp(float(value), tz=UTC)
    text = value.strip().replace("Z", "+00:00")
    parsed = datetime.fromisoformat(text)
    return parsed.astimezone(UTC) if parsed.tzinfo else parsed.replace(tzinfo=UTC)
