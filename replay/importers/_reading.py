"""Reading other formats' files: JSON with located errors, typed fields, and stable ids.

Every importer reports bad input as a `TraceTableError` that names the file, the record and the
field (`located` adds where the reader is); ids are derived from the session and the position,
so that importing the same file twice gives the same trace table.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

from plangate.harness import canonical_json, json_problem
from plangate.replay.schema import (
    TraceTableError,
    to_utc,
)

Row = dict[str, Any]
"""One trace-table row: column name to value."""


def trace_id_for(session_id: str, turn_index: int) -> str:
    """The deterministic trace id of a turn: 32 hex digits hashed from its session and index."""
    return _digest(f"{session_id}\x1f{turn_index}")[:32]


def span_id_for(trace_id: str, position: int) -> str:
    """The deterministic span id of the row at `position` (0 = the AGENT row) in a trace."""
    return _digest(f"{trace_id}\x1f{position}")[:16]


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def load_json(path: Path, expected: str) -> Any:
    """Parse a JSON file; the error names the file and says what it should hold."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, RecursionError) as exc:
        raise TraceTableError(
            f"{path}: not JSON ({json_problem(exc)}); expected {expected}"
        ) from exc
    except UnicodeDecodeError as exc:
        raise TraceTableError(f"{path}: not UTF-8 text; expected {expected}") from exc


@contextmanager
def located(where: str) -> Iterator[None]:
    """Prefix the message of a `TraceTableError` raised inside with `where` (file, record)."""
    try:
        yield
    except TraceTableError as exc:
        raise TraceTableError(f"{where}: {exc}") from exc


def require(record: Any, field: str, kinds: type | tuple[type, ...], expected: str) -> Any:
    """`record[field]`, checked to be of `kinds`; the error names the field and the expectation.

    `bool` is refused where a number is expected: JSON `true` is not a reward or a trial.
    """
    if not isinstance(record, Mapping):
        raise TraceTableError(f"is {type(record).__name__}, expected an object with {field!r}")
    if field not in record:
        raise TraceTableError(f"field {field!r} is missing; expected {expected}")
    value = record[field]
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in _as_tuple(kinds)):
        raise TraceTableError(f"field {field!r} is {value!r}; expected {expected}")
    return value


def optional(record: Mapping[str, Any], field: str, kinds: type | tuple[type, ...]) -> Any:
    """`record[field]` if present and not null, checked like `require`; else None."""
    if record.get(field) is None:
        return None
    return require(record, field, kinds, f"{_kind_names(kinds)} or null")


def timestamp(value: Any, field: str) -> datetime | None:
    """A source timestamp as UTC (naive means UTC); the error names the field."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, str | int | float | datetime):
        raise TraceTableError(f"field {field!r} is {value!r}; expected an ISO 8601 time")
    try:
        return to_utc(value)
    except (ValueError, OverflowError, OSError) as exc:
        raise TraceTableError(f"field {field!r} is {value!r}; expected an ISO 8601 time") from exc


def text_of(content: Any) -> str | None:
    """Message content as text: a string as is, content parts joined, anything else as JSON."""
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(part, Mapping) for part in content):
        texts = [part["text"] for part in content if isinstance(part.get("text"), str)]
        if len(texts) == len(content):
            return "\n".join(texts)
    return canonical_json(content)


def _as_tuple(kinds: type | tuple[type, ...]) -> tuple[type, ...]:
    return kinds if isinstance(kinds, tuple) else (kinds,)


def _kind_names(kinds: type | tuple[type, ...]) -> str:
    names = {"str": "text", "int": "an integer", "float": "a number", "list": "a list"}
    words = [names.get(kind.__name__, kind.__name__) for kind in _as_tuple(kinds)]
    return " or ".join(words)
