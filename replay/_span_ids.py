"""Each span is one row: no two rows of a trace table share a trace id and span id.

Told fast for the common answer (span ids alone all differ: `surely_distinct`), then exactly.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from plangate.replay._fingerprint import surely_distinct
from plangate.replay._table_errors import DuplicateSpanError

SPAN_ONCE = "a span is one row: drop the copy (a file given twice, or spans exported twice)"
"""What to do about two rows of one span."""


def check_unique_spans(
    trace_ids: pa.ChunkedArray,
    span_ids: pa.Array,
    where: str = "trace table",
    first_row: int = 0,
) -> None:
    """Raise `DuplicateSpanError` naming the first two rows of one (trace_id, span_id).

    `span_ids` is one array (`schema.one_chunk`): the fast check reads its buffers. Rows are
    numbered from `first_row` (a part of a file: the file's own numbers).
    """
    if surely_distinct(span_ids):  # span ids alone unique: so are the pairs
        return
    encoded = span_ids.dictionary_encode()
    if len(encoded.dictionary) == len(encoded):
        return
    traces = trace_ids.combine_chunks().dictionary_encode()
    pairs = np.asarray(traces.indices, np.int64) * len(encoded.dictionary) + np.asarray(
        encoded.indices, np.int64
    )
    if len(np.unique(pairs)) == len(pairs):
        return
    keys = zip(trace_ids.to_pylist(), span_ids.to_pylist(), strict=True)
    seen: dict[tuple[str, str], int] = {}
    for index, key in enumerate(keys):
        if key in seen:
            raise DuplicateSpanError(
                f"{where}: rows {first_row + seen[key]} and {first_row + index} have the same "
                f"trace_id/span_id {'/'.join(key)!r}; {SPAN_ONCE}",
                key,
            )
        seen[key] = index
