"""Phoenix spans dataframes: what `Client().spans.get_spans_dataframe(...)` returns.

The frame has one row per span: `context.span_id` (also the index), `context.trace_id`, `name`,
`span_kind`, `parent_id`, `start_time`, `end_time`, `status_code`, `status_message`, `events`,
and one `attributes.<dotted key>` column per attribute that some span has. Phoenix reshapes the
attributes on the way: it parses the JSON text of `metadata` and `tool.parameters` into dicts,
turns flattened lists back into lists of dicts (`attributes.llm.input_messages` holds
`[{"message.role": …, "message.content": …}, …]`), gathers custom attributes under their first
name part (`attributes.plangate` holds `{"iteration": 3}`), and fills missing values with NaN.
This module flattens it all back into dotted keys; parsed JSON attributes stay objects.

Only full frames are understood (not `SpanQuery().select(...)` ones, whose columns are renamed).
A saved frame is read from Parquet (`df.to_parquet(path)`) or JSON Lines
(`df.to_json(path, orient="records", lines=True)`, where times are epoch milliseconds).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from plangate.harness import json_problem, semconv
from plangate.replay._openinference import is_json_valued, rows_from_spans
from plangate.replay._spans import SpanEvent, SpanRecord, StatusCode, time_from_nanos
from plangate.replay.importers._registry import span_importer, table_of_spans
from plangate.replay.schema import (
    TraceTableError,
    build_table,
    to_utc,
)

SOURCE = "phoenix"
SPAN_ID = "context.span_id"
TRACE_ID = "context.trace_id"
ATTRIBUTES_PREFIX = "attributes."

_STATUS: dict[str, StatusCode] = {"OK": "OK", "ERROR": "ERROR", "UNSET": "UNSET"}
_PARQUET_MAGIC = b"PAR1"
_FRAME = "Phoenix spans dataframe"


def from_phoenix_dataframe(df: pd.DataFrame) -> pa.Table:
    """A trace table from a Phoenix spans dataframe.

    Args:
        df: A frame as `Client().spans.get_spans_dataframe(...)` returns it.

    Returns:
        One row per span, with source "phoenix".

    Raises:
        TraceTableError: A required column is missing or a value is not valid; the message says
            which column and row.
    """
    return _table(_frame_records(df, _FRAME), _FRAME)


def read_phoenix(path: Path) -> pa.Table:
    """Read a saved Phoenix spans dataframe (Parquet, or JSON Lines records) into a trace table.

    Args:
        path: The file.

    Returns:
        One row per span, with source "phoenix".

    Raises:
        TraceTableError: The file is neither format or is not a spans dataframe; the message
            names the file, the line or row, and the column.
    """
    return table_of_spans({path: phoenix_spans(path)}, SOURCE)


@span_importer("phoenix", SOURCE)
def phoenix_spans(path: Path) -> list[SpanRecord]:
    """The spans of a saved Phoenix spans dataframe (Parquet, or JSON Lines records)."""
    with path.open("rb") as handle:
        magic = handle.read(len(_PARQUET_MAGIC))
    if magic == _PARQUET_MAGIC:
        try:
            frame = pd.read_parquet(path)
        except (OSError, ValueError, pa.ArrowException) as exc:
            raise TraceTableError(f"{path}: not a readable Parquet file ({exc})") from exc
        return _spans(_frame_records(frame, str(path)), str(path))
    return _spans(_json_lines(path), str(path))


def _frame_records(df: pd.DataFrame, where: str) -> list[dict[str, Any]]:
    if SPAN_ID not in df.columns:
        if df.index.name != SPAN_ID:
            raise TraceTableError(
                f"{where}: no {SPAN_ID!r} column or index; expected a Phoenix spans dataframe "
                "(Client().spans.get_spans_dataframe), with columns "
                f"{SPAN_ID}, {TRACE_ID}, name, span_kind, …, attributes.*"
            )
        df = df.reset_index()
    records: list[dict[str, Any]] = df.to_dict(orient="records")
    return records


def _json_lines(path: Path) -> list[dict[str, Any]]:
    records = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as exc:
        raise TraceTableError(
            f"{path}: neither Parquet nor UTF-8 JSON Lines ({exc.reason}); "
            "expected a saved Phoenix spans dataframe"
        ) from exc
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except (json.JSONDecodeError, RecursionError) as exc:
            raise TraceTableError(
                f"{path}, line {number}: not JSON ({json_problem(exc)}); expected "
                'a Phoenix spans dataframe as df.to_json(orient="records", lines=True)'
            ) from exc
        if not isinstance(record, dict):
            raise TraceTableError(f"{path}, line {number}: not a JSON object (one span a line)")
        records.append(record)
    if not records:
        raise TraceTableError(f"{path}: no spans; expected a saved Phoenix spans dataframe")
    return records


def _table(records: Iterable[Mapping[str, Any]], where: str) -> pa.Table:
    spans = _spans(records, where)
    try:
        return build_table(rows_from_spans(spans, source=SOURCE))
    except TraceTableError as exc:
        raise TraceTableError(f"{where}: {exc}") from exc


def _spans(records: Iterable[Mapping[str, Any]], where: str) -> list[SpanRecord]:
    return [_span(record, f"{where}, row {index}") for index, record in enumerate(records)]


def _span(record: Mapping[str, Any], where: str) -> SpanRecord:
    values = {key: _plain(value) for key, value in record.items()}
    attributes: dict[str, Any] = {}
    for column, value in values.items():
        if column.startswith(ATTRIBUTES_PREFIX):
            _flatten(column.removeprefix(ATTRIBUTES_PREFIX), value, attributes)
    if values.get("span_kind") is not None:
        attributes.setdefault(semconv.SPAN_KIND, values["span_kind"])
    return SpanRecord(
        trace_id=_required(values, TRACE_ID, where),
        span_id=_required(values, SPAN_ID, where),
        parent_span_id=_optional_text(values.get("parent_id")),
        name=_optional_text(values.get("name")) or "",
        start_time=_time(values.get("start_time"), f"{where}, start_time"),
        end_time=_time(values.get("end_time"), f"{where}, end_time"),
        status_code=_status(values.get("status_code"), where),
        status_message=_optional_text(values.get("status_message")),
        attributes=attributes,
        events=tuple(
            _event(event, f"{where}, events[{n}]")
            for n, event in enumerate(values.get("events") or ())
        ),
    )


def _required(values: Mapping[str, Any], column: str, where: str) -> str:
    value = _optional_text(values.get(column))
    if not value:
        raise TraceTableError(f"{where}: no {column!r}; every span needs one")
    return value


def _optional_text(value: Any) -> str | None:
    return None if value is None else str(value)


def _status(value: Any, where: str) -> StatusCode:
    code = _STATUS.get("UNSET" if value is None else str(value).upper())
    if code is None:
        raise TraceTableError(
            f"{where}: status_code {value!r} is not one of {', '.join(sorted(_STATUS))}"
        )
    return code


def _event(event: Any, where: str) -> SpanEvent:
    if not isinstance(event, dict):
        raise TraceTableError(f"{where}: {event!r} is not an event (name, timestamp, attributes)")
    attributes: dict[str, Any] = {}
    for key, value in (event.get("attributes") or {}).items():
        _flatten(str(key), value, attributes)
    return SpanEvent(
        name=str(event.get("name", "")),
        time=_time(event.get("timestamp", event.get("time")), f"{where}, timestamp"),
        attributes=attributes,
    )


def _flatten(key: str, value: Any, into: dict[str, Any]) -> None:
    """Put `value` under `key`, turning nested dicts and lists of dicts into dotted keys."""
    if value is None:
        return
    if isinstance(value, dict) and not is_json_valued(key):
        for sub_key, item in value.items():
            _flatten(f"{key}.{sub_key}", item, into)
    elif isinstance(value, list) and any(isinstance(item, dict) for item in value):
        for index, item in enumerate(value):
            _flatten(f"{key}.{index}", item, into)
    else:
        into[key] = value


def _plain(value: Any) -> Any:
    """A cell as plain Python: NaN and NaT as None, numpy arrays as lists, numpy scalars unboxed."""
    if isinstance(value, np.ndarray | list | tuple):
        return [_plain(item) for item in value]
    if isinstance(value, dict):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, np.generic):
        value = value.item()
    if value is pd.NaT or (isinstance(value, float) and math.isnan(value)):
        return None
    return value


def _time(value: Any, where: str) -> datetime | None:
    """A time from a pandas Timestamp, a datetime, ISO text, or a number since the epoch.

    Numbers are read by size, as pandas writes them: seconds, milliseconds (`to_json`'s
    default), microseconds or nanoseconds.
    """
    if value is None:
        return None
    try:
        if isinstance(value, pd.Timestamp):
            nanos = value.value if value.tzinfo is not None else value.tz_localize("UTC").value
            return time_from_nanos(int(nanos))
        if isinstance(value, int | float) and not isinstance(value, bool):
            return time_from_nanos(int(value * _nanos_per_unit(abs(value))))
        return to_utc(value)
    except (TypeError, ValueError, AttributeError, OverflowError) as exc:
        raise TraceTableError(f"{where}: {value!r} is not a time") from exc


def _nanos_per_unit(magnitude: float) -> int:
    if magnitude >= 1e17:
        return 1
    if magnitude >= 1e14:
        return 1_000
    if magnitude >= 1e11:
        return 1_000_000
    return 1_000_000_000
