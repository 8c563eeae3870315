"""The few span attributes the evaluators read, as typed values, from the `attributes` JSON.

`tokens` and `cost` read four things that OpenInference and OpenTelemetry keep among a span's
other attributes: the prompt tokens served from a cache, a recorded cost, the provider, and how
many attributes the sender dropped. A production model call carries kilobytes of messages
there, so parsing every span's JSON at every evaluation cost more than all the evaluators
together. A trace table holds them in typed columns of their own instead (`schema`), read here
once: when the table is built, or when a table written before those columns existed is read.

Arrow's JSON reader reads just these fields from the whole column, where it lies; where it
cannot read a column exactly as Python would (a text that is not one JSON object, a field of
another type, a null slot that holds bytes), Python parses each distinct text once, with the
same result.
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

CACHED_TOKENS = "llm.token_count.prompt_details.cache_read"
"""OpenInference's attribute for the prompt tokens served from a cache."""
COST_TOTAL = "llm.cost.total"
"""OpenInference's attribute for a call's cost in US dollars."""
PROVIDER_KEYS = ("llm.provider", "gen_ai.provider.name", "llm.system", "gen_ai.system")
"""Where a span names its provider, the first present winning (OpenInference, then GenAI)."""
DROPPED_ATTRIBUTES = "otel.dropped_attributes_count"
"""How many attributes the sender's SDK dropped from the span over its limit (OpenTelemetry
keeps 128 by default, the oldest or the newest going by language): OpenTelemetry's name for
OTLP's `dropped_attributes_count` where a format has no field for it; written only when not 0."""

TOKENS_CACHED = "tokens_cached"
COST_USD = "cost_usd"
PROVIDER = "provider"
DROPPED_COUNT = "dropped_attributes"
ATTRIBUTE_FIELDS: dict[str, tuple[str, ...]] = {
    TOKENS_CACHED: (CACHED_TOKENS,),
    COST_USD: (COST_TOTAL,),
    PROVIDER: PROVIDER_KEYS,
    DROPPED_COUNT: (DROPPED_ATTRIBUTES,),
}
"""The trace table's columns that hold, typed, what a span's `attributes` say (and keep saying:
the JSON is not changed), read from them when a table is built; a column given a value keeps
it. What the evaluators read, so that scoring does not parse JSON. Each column's attributes,
the first present winning."""
COLUMN_FIELDS = (
    pa.field(TOKENS_CACHED, pa.int64()),
    pa.field(COST_USD, pa.float64()),
    pa.field(PROVIDER, pa.string()),
    pa.field(DROPPED_COUNT, pa.int64()),
)
"""Their fields in the trace table's schema, in `ATTRIBUTE_FIELDS`' order."""

ARROW_FROM = 256
"""Texts from which Arrow's JSON reader reads them (below, its fixed cost is more than Python's:
1.1 ms against 0.3 ms for 20 texts, even at 100)."""

Fields = tuple[pa.Array, pa.Array, pa.Array, pa.Array]
"""Per span: cached tokens (int64), recorded cost (float64), provider (string) and dropped
attributes (int64); null where the span's attributes do not say, or say something else than a
count, a cost or a name."""

_FIELDS = pa.schema(
    [(CACHED_TOKENS, pa.int64()), (COST_TOTAL, pa.float64()), (DROPPED_ATTRIBUTES, pa.int64())]
    + [(key, pa.string()) for key in PROVIDER_KEYS]
)
"""The fields read, as Arrow's JSON reader reads them: a count must be a whole number (1.0 is
not one, as for `_count`)."""


def with_attribute_fields(table: pa.Table, attributes: str) -> pa.Table:
    """The table with its attribute fields' columns read from column `attributes` where null.

    Added where the table has none of them (a table of schema version 1); a value a column
    already holds is kept. Reads the JSON only when some column has a null to fill.
    """
    present = [name for name in ATTRIBUTE_FIELDS if name in table.column_names]
    if len(present) == len(ATTRIBUTE_FIELDS) and not any(table[n].null_count for n in present):
        return table
    read = attribute_columns(table.column(attributes))
    for field in COLUMN_FIELDS:
        if field.name not in present:
            table = table.append_column(field, read[field.name])
        elif table.column(field.name).null_count:
            filled = pc.coalesce(table.column(field.name), read[field.name])
            table = table.set_column(table.schema.get_field_index(field.name), field, filled)
    return table


def attribute_columns(texts: pa.Array | pa.ChunkedArray) -> dict[str, pa.ChunkedArray]:
    """The attribute fields' columns (`ATTRIBUTE_FIELDS`) of spans with these `attributes`.

    Chunk by chunk, as the texts lie: a column may hold more than one array can (2 GiB).
    """
    chunks = texts.chunks if isinstance(texts, pa.ChunkedArray) else [texts]
    read = [
        attribute_fields(chunk)
        if chunk.null_count < len(chunk)
        else tuple(pa.nulls(len(chunk), field.type) for field in COLUMN_FIELDS)
        for chunk in chunks
    ]
    return {
        field.name: pa.chunked_array([fields[i] for fields in read], field.type)
        for i, field in enumerate(COLUMN_FIELDS)
    }


def attribute_fields(texts: pa.Array) -> Fields:
    """The fields of spans whose `attributes` are `texts` (one JSON object each, or null).

    Python reads a few texts faster than Arrow's reader starts (a replayed turn's table).
    """
    if len(texts) - texts.null_count < ARROW_FROM:
        return _parse_fields(texts)
    read = _read_fields(texts)
    return read if read is not None else _parse_fields(texts)


def _parse_fields(texts: pa.Array) -> Fields:
    """`attribute_fields` by Python: each distinct text parsed once."""
    encoded = texts.dictionary_encode()
    parsed = [json_object(text) for text in encoded.dictionary.to_pylist()]
    index = encoded.indices
    return (
        pa.array([_count(p.get(CACHED_TOKENS)) for p in parsed], pa.int64()).take(index),
        pa.array([recorded_dollars(p.get(COST_TOTAL)) for p in parsed], pa.float64()).take(index),
        pa.array([_provider(p) for p in parsed], pa.string()).take(index),
        pa.array([_count(p.get(DROPPED_ATTRIBUTES)) for p in parsed], pa.int64()).take(index),
    )


def _read_fields(texts: pa.Array) -> Fields | None:
    """`attribute_fields` by Arrow's JSON reader, or None where only Python can say the same."""
    rows = _json_rows(texts)
    if rows is None:
        return None
    known, read = rows
    where = np.full(len(texts), -1, dtype=np.int64)
    where[known] = np.arange(len(known))
    spread = pa.array(where, mask=where < 0)  # each text's row in `read`; null: no text

    def column(key: str) -> pa.Array:
        return read.column(key).combine_chunks().take(spread)

    cached, dropped = column(CACHED_TOKENS), column(DROPPED_ATTRIBUTES)
    cost = column(COST_TOTAL)
    named = [pc.if_else(pc.equal(v, ""), None, v) for v in map(column, PROVIDER_KEYS)]
    return (
        pc.if_else(pc.less(cached, 0), None, cached),
        pc.if_else(pc.and_(pc.is_finite(cost), pc.greater_equal(cost, 0)), cost, None),
        pc.coalesce(*named),
        pc.if_else(pc.less(dropped, 0), None, dropped),
    )


def _json_rows(texts: pa.Array) -> tuple[npt.NDArray[np.int64], pa.Table] | None:
    """The texts that are not null, and `_FIELDS` read from each; None where Arrow cannot.

    Read one after the other, two broken texts could spell objects spanning both: so each
    must begin with `{` and end with `}`, and a newline follows it. No object can then span
    two texts (a newline cannot be inside a string, and after an object's last `}` another
    `{` is a value only at the top level), and as many rows as texts means one object each.
    Anything else makes the reader fail or count otherwise, and Python reads the texts.
    """
    valid = np.asarray(texts.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    known = np.flatnonzero(valid)
    if not len(known) or not pc.all(pc.starts_with(texts, "{")).as_py():
        return None
    if not pc.all(pc.ends_with(texts, "}")).as_py():
        return None
    if texts.nbytes + len(texts) >= 2**31 - 1:  # the newlines would not fit 32-bit offsets
        texts = texts.cast(pa.large_string())
    lines = pc.binary_join_element_wise(texts, "\n", "")
    _, offsets, data = lines.buffers()
    width = np.int64 if pa.types.is_large_string(lines.type) else np.int32
    bounds = np.frombuffer(offsets, width, len(lines) + 1, np.dtype(width).itemsize * lines.offset)
    if np.diff(bounds)[~valid].any():  # a null holding bytes (Arrow allows it): not here
        return None
    body = pa.py_buffer(memoryview(data)[bounds[0] : bounds[-1]])
    options = pj.ParseOptions(
        explicit_schema=_FIELDS, unexpected_field_behavior="ignore", newlines_in_values=False
    )
    try:
        read = pj.read_json(pa.BufferReader(body), parse_options=options)
    except pa.ArrowInvalid:
        return None
    return (known, read) if read.num_rows == len(known) else None


def json_object(text: str) -> dict[str, Any]:
    """A JSON object's text, parsed; {} for any other text."""
    try:
        value = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        return {}
    return value if isinstance(value, dict) else {}


def _count(value: Any) -> int | None:
    """A whole count at least 0 (a source's own, never guessed); None for anything else."""
    ok = isinstance(value, int) and not isinstance(value, bool) and value >= 0
    return min(value, 2**63 - 1) if ok else None  # past int64: as large as a column holds


def recorded_dollars(value: Any) -> float | None:
    """A recorded cost in US dollars; None where it is not a finite number at least 0."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return None
    try:
        dollars = float(value)
    except OverflowError:  # a whole number past any float
        return None
    return dollars if math.isfinite(dollars) and dollars >= 0 else None


def _provider(attributes: dict[str, Any]) -> str | None:
    found = (attributes.get(key) for key in PROVIDER_KEYS)
    return next((v for v in found if isinstance(v, str) and v), None)
