"""What a table's columns lack against a schema, said in one phrase for an error line."""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Sequence

import pyarrow as pa

_SEE = "plangate.replay.schema.SCHEMA"


def missing_columns(missing: Sequence[str], schema: pa.Schema) -> str:
    """The columns a table lacks, as a phrase: the first few, when many are missing."""
    shown = f"columns {list(missing)}"
    if len(missing) > 6:
        shown = f"{len(missing)} columns ({', '.join(missing[:5])}, …)"
    return f"missing {shown} of the trace table's {len(schema)} ({_SEE})"


def other_types(
    schema: pa.Schema,
    expected: pa.Schema,
    names: Iterable[str],
    accepts: Callable[[pa.DataType, pa.DataType], bool] = operator.eq,
    advice: str = f"cast the table to {_SEE}",
) -> str | None:
    """The columns of another type than `expected`'s, as a phrase (None: all as expected).

    `accepts(given, wanted)`: whether a column's type will do (the same type, by default).
    `advice` says what to do; `{it}` in it reads "it" or "them".
    """
    wrong = [
        f"{name!r} is {schema.field(name).type}, expected {expected.field(name).type}"
        for name in names
        if name in schema.names and not accepts(schema.field(name).type, expected.field(name).type)
    ]
    if not wrong:
        return None
    it = "them" if len(wrong) > 1 else "it"
    return f"column{'s' * (len(wrong) > 1)} {'; '.join(wrong)}; {advice.format(it=it)}"
