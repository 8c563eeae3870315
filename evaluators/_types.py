"""Columns of other types than the trace table's, read as its types where nothing is lost.

Parquet written by other tools stores the same values in other types: pandas writes timestamps
in nanoseconds, nullable integers as floats and (pandas 3) strings as `large_string`; Spark and
DuckDB write `int64` turn numbers; some writers dictionary-encode strings. Such a column is read
as the schema's type; a value that does not fit (a float with a fraction where a whole number
goes, a number past int32) is refused when it is read, with its file and column.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.types as pt

from plangate.replay.schema import TraceTableError, first_line


def castable(given: pa.DataType, wanted: pa.DataType) -> bool:
    """Whether a column of type `given` can be read as `wanted` (values checked as read)."""
    if given == wanted or pt.is_null(given):
        return True
    if pt.is_dictionary(given):
        return castable(given.value_type, wanted)
    kinds: tuple[Callable[[pa.DataType], Any], ...]
    if pt.is_string(wanted):
        kinds = (pt.is_string, pt.is_large_string, pt.is_string_view)
    elif pt.is_integer(wanted) or pt.is_floating(wanted):
        kinds = (pt.is_integer, pt.is_floating)
    elif pt.is_timestamp(wanted):
        kinds = (pt.is_timestamp,)  # any unit; a time zone or none (read as UTC)
    else:
        kinds = ()
    return any(bool(kind(given)) for kind in kinds)


def as_type(column: pa.Array, wanted: pa.DataType, path: str, name: str) -> pa.Array:
    """`column` as `wanted`: whole numbers checked, a timestamp's nanoseconds cut to µs."""
    if column.type == wanted:
        return column
    given = column.type
    try:
        if pt.is_timestamp(wanted) and pt.is_timestamp(given):
            return column.cast(wanted, safe=False)  # only sub-microsecond digits are dropped
        return column.cast(wanted)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise TraceTableError(
            f"{path}: column {name!r} is {given} and a value does not fit {wanted} "
            f"({first_line(exc)}); write it as {wanted}"
        ) from exc
