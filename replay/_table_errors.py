"""The errors of a trace table that is not valid."""

from __future__ import annotations

from plangate.harness import PlangateError


class TraceTableError(PlangateError):
    """A trace table (or a file that should hold one) is not valid; the message says where."""


class DuplicateSpanError(TraceTableError):
    """Two rows with one `key` (trace_id, span_id): a caller with the files can say where."""

    def __init__(self, message: str, key: tuple[str, str]) -> None:
        super().__init__(message)
        self.key = key

    def __reduce__(self) -> tuple[type, tuple[str, tuple[str, str]]]:
        return type(self), (str(self), self.key)  # whole across processes (Ray's workers)
