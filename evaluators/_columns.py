"""What a vectorized evaluator returns, and the column helpers that build its text.

An evaluator computes its verdicts for every turn at once (`TurnScores`). Text is built the
same way: a template over columns (`text`), JSON objects over columns (`json_objects`), and only
the turns that need more than a template (failures, mostly) get their text from Python, laid
over the rest (`overlay`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

Floats = npt.NDArray[np.float64]
Column: TypeAlias = "pa.Array | npt.NDArray[Any] | str"
"""An array (Arrow or NumPy) with one value per turn, or one string for all."""


@dataclass(frozen=True, slots=True, eq=False)
class TurnScores:
    """An evaluator's verdict on every turn of a frame, aligned with `frame.turns`."""

    passed: Floats
    """1.0 pass, 0.0 fail, NaN not applicable."""
    score: Floats
    """NaN where there is none."""
    label: Column
    explanation: Column
    details: pa.Array
    """JSON text, null where there is none."""
    errored: npt.NDArray[np.bool_] | None = None
    """Turns the evaluator could not judge for a reason outside the turn (the judge model's
    endpoint kept failing): `error`, with the evaluator's explanation. None: no such turn."""


def strings(values: Column, rows: int) -> pa.Array:
    """A column as an Arrow string array of `rows` values."""
    if isinstance(values, str):
        return pa.repeat(pa.scalar(values, pa.string()), rows)  # no Python object per row
    if isinstance(values, pa.Array | pa.ChunkedArray):
        if pa.types.is_string(values.type):
            return values
        if pa.types.is_floating(values.type):
            return _float_text(values)
        return pc.cast(values, pa.string())
    array = np.asarray(values)
    if array.dtype.kind == "f":
        return _float_text(pa.array(array, from_pandas=True))
    if array.dtype.kind in "iub":
        return pc.cast(pa.array(array), pa.string())
    return pa.array(array, pa.string())


def text(*parts: Column, rows: int) -> pa.Array:
    """Strings and columns joined, row by row (a null anywhere gives a null).

    Neighbouring strings are joined first: every part costs a pass over the rows.
    """
    columns: list[Column] = []
    for part in parts:
        if isinstance(part, str) and columns and isinstance(columns[-1], str):
            columns[-1] += part
        else:
            columns.append(part if isinstance(part, str) else strings(part, rows))
    if all(isinstance(c, str) for c in columns):
        return strings("".join(str(c) for c in columns), rows)
    return pc.binary_join_element_wise(*columns, "")


def json_text(fields: Mapping[str, Column], rows: int) -> pa.Array:
    """One JSON object per row from values already written as JSON, keys sorted.

    Keys are written as `json.dumps(..., sort_keys=True)` writes them. Each field is a column
    of JSON text (or of whole numbers), or one JSON text for every row.
    """
    parts: list[Column] = []
    for index, name in enumerate(sorted(fields)):
        parts += [("{" if index == 0 else ", ") + json.dumps(name) + ": ", fields[name]]
    return text(*parts, "}" if fields else "{}", rows=rows)


def json_objects(fields: Mapping[str, Column], rows: int) -> pa.Array:
    """One JSON object per row, as `json.dumps(..., sort_keys=True)` writes it.

    Values: whole numbers, floats (NaN: null), booleans, strings (JSON-quoted) and nulls.
    """
    written = {name: pc.fill_null(_json_values(v, rows), "null") for name, v in fields.items()}
    return json_text(written, rows)


def overlay(
    base: pa.Array, rows: npt.NDArray[np.int64], values: pa.Array | Sequence[Any]
) -> pa.Array:
    """`base` with the values at `rows` replaced.

    The values are Python values (the turns whose text Python built) or an Arrow array (text
    built column-wise for those turns only).
    """
    if len(rows) == 0:
        return base
    index = np.arange(len(base), dtype=np.int64)
    index[rows] = len(base) + np.arange(len(rows), dtype=np.int64)
    if isinstance(values, pa.Array | pa.ChunkedArray):
        extra = values.cast(base.type)
        if isinstance(extra, pa.ChunkedArray):
            extra = extra.combine_chunks()
    else:
        extra = pa.array(list(values), base.type)
    return pa.concat_arrays([base, extra]).take(pa.array(index))


def quoted(values: pa.Array) -> pa.Array:
    """Strings as JSON strings (null stays null), each distinct one written once."""
    encoded = values.dictionary_encode()
    written = pa.array([json.dumps(v) for v in encoded.dictionary.to_pylist()], pa.string())
    return written.take(encoded.indices)


def dumps(values: Sequence[Any]) -> list[str | None]:
    """Python values as JSON text, as the registry stores details (None stays None)."""
    return [None if v is None else json.dumps(v, sort_keys=True, default=str) for v in values]


def _json_values(values: Column, rows: int) -> pa.Array:
    if isinstance(values, str):
        return strings(json.dumps(values), rows)
    array = values if isinstance(values, pa.Array) else None
    if array is None:
        numbers = np.asarray(values)
        if numbers.dtype.kind == "b":
            return pa.array(np.where(numbers, "true", "false"), pa.string())
        array = pa.array(numbers, from_pandas=True)
    if pa.types.is_string(array.type) or pa.types.is_large_string(array.type):
        return quoted(array)
    if pa.types.is_boolean(array.type):
        return pc.if_else(array, "true", "false")
    if pa.types.is_floating(array.type):
        return _float_text(array)
    return pc.cast(array, pa.string())


def _float_text(values: pa.Array) -> pa.Array:
    """Floats as Python's `repr` writes them (`2.0`, not `2`); NaN and null as null."""
    values = pc.if_else(pc.is_nan(values), pa.scalar(None, values.type), values)
    written = pc.cast(values, pa.string())
    whole = pc.match_substring_regex(written, r"^-?\d+$")
    written = pc.if_else(whole, pc.binary_join_element_wise(written, ".0", ""), written)
    return _exponents(written)


def _exponents(written: pa.Array) -> pa.Array:
    """Floats whose Arrow and Python forms may differ (`0.00001`, `1e-05`), written by Python."""
    odd = pc.or_(pc.match_substring(written, "e"), pc.starts_with(written, "0.0000"))
    odd = pc.or_(odd, pc.starts_with(written, "-0.0000"))
    if not pc.any(odd).as_py():
        return written
    rows = np.flatnonzero(np.asarray(odd.fill_null(False).to_numpy(zero_copy_only=False)))
    python = [repr(float(written[int(i)].as_py())) for i in rows]
    return overlay(written, rows.astype(np.int64), python)
