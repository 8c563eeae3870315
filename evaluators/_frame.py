"""A trace table prepared once for every evaluator: spans grouped by turn, as NumPy and Arrow.

Nothing is converted to Python objects or pandas here: a turn is a number, a span a position,
and a column is taken (in turn order) only when an evaluator asks for it. A table already in
turn order, as importers and the harness write them, is not copied at all.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from plangate.replay.schema import (
    NAME,
    SESSION_ID,
    SPAN_KIND,
    START_TIME,
    TOOL_NAME,
    TOOL_SPAN_PREFIX,
    TURN_INDEX,
    validate_table,
)

Ints = npt.NDArray[np.int64]
KINDS = ("AGENT", "LLM", "TOOL")
"""The span kinds evaluators read, by code (0, 1, 2); any other kind is -1."""


@dataclass(frozen=True, slots=True, eq=False)
class Spans:
    """Some spans of a frame (one kind, say), in turn order."""

    position: Ints
    """Each span's position in the frame (turn order)."""
    turn: Ints
    """Each span's turn number."""
    number: Ints
    """Each span's place among these spans of its turn, from 0 (a call's number)."""

    def __len__(self) -> int:
        return len(self.position)

    @classmethod
    def at(cls, position: Ints, turn_of: Ints) -> Spans:
        """The spans at `position` (ascending), numbered within their turns."""
        turn = turn_of[position]
        first = np.ones(len(turn), dtype=bool)
        first[1:] = turn[1:] != turn[:-1]
        starts = np.flatnonzero(first)
        number = np.arange(len(turn)) - np.repeat(starts, np.diff(np.append(starts, len(turn))))
        return cls(position=position, turn=turn, number=number)

    def counts(self, turns: int) -> Ints:
        """How many of these spans each turn has."""
        return np.bincount(self.turn, minlength=turns).astype(np.int64)


@dataclass(frozen=True, slots=True, eq=False)
class Turns:
    """One entry per turn, in the order of the score table (session_id, then turn_index)."""

    session_id: pa.Array
    turn_index: Ints
    start: Ints
    """The position of the turn's first span."""
    agent: Ints
    """The position of the turn's AGENT span (its first), -1 where it has none."""

    def __len__(self) -> int:
        return len(self.turn_index)


class TraceFrame:
    """The spans of a trace table grouped by turn, in order.

    Order within a turn: start time where the source has one (spans without one last), then the
    order of the table (importers write spans in trajectory order).
    """

    def __init__(self, table: pa.Table) -> None:
        self.table = table
        """The validated table, in its own order."""
        self._columns: dict[str, pa.Array] = {}
        self.order, self.turn, turn_starts = _turn_order(table)
        """`order`: each position's row in `table` (None: the table is in turn order);
        `turn`: each position's turn number."""
        kind = _kind_codes(self.column(SPAN_KIND))
        self.kind = kind
        """Each position's kind: an index into `KINDS`, -1 for another kind."""
        self.agents = Spans.at(np.flatnonzero(kind == 0), self.turn)
        self.llms = Spans.at(np.flatnonzero(kind == 1), self.turn)
        self.tools = Spans.at(np.flatnonzero(kind == 2), self.turn)
        agent = np.full(len(turn_starts), -1, dtype=np.int64)
        firsts = self.agents.number == 0
        agent[self.agents.turn[firsts]] = self.agents.position[firsts]
        self.turns = Turns(
            session_id=self.values(SESSION_ID, turn_starts),
            turn_index=self.integers(TURN_INDEX, turn_starts),
            start=turn_starts,
            agent=agent,
        )

    def __len__(self) -> int:
        return len(self.turn)

    def column(self, name: str) -> pa.Array:
        """A whole column in turn order (taken once, then kept)."""
        if name not in self._columns:
            column = self.table.column(name).combine_chunks()
            self._columns[name] = column if self.order is None else column.take(self.order)
        return self._columns[name]

    def values(self, name: str, positions: Ints) -> pa.Array:
        """A column's values at some positions (-1: null)."""
        missing = positions < 0
        rows = positions if self.order is None else np.where(missing, -1, self.order[positions])
        if missing.any():
            return self.table.column(name).take(pa.array(rows, mask=missing)).combine_chunks()
        return self.table.column(name).take(rows).combine_chunks()

    def integers(self, name: str, positions: Ints) -> Ints:
        """A column of whole numbers at some positions, as int64 (the column has no nulls)."""
        return np.asarray(self.values(name, positions).to_numpy(zero_copy_only=False), np.int64)

    def numbers(self, name: str, positions: Ints) -> npt.NDArray[np.float64]:
        """A numeric column at some positions, as float64 with NaN for null."""
        values = self.values(name, positions)
        return np.asarray(values.to_numpy(zero_copy_only=False), dtype=np.float64)

    def micros(self, name: str, positions: Ints) -> npt.NDArray[np.float64]:
        """A timestamp column at some positions, in microseconds since the epoch, NaN for null.

        Exact (whole microseconds below 2**53). For seconds equal to pandas' `total_seconds`,
        split a difference as it does (whole seconds plus the rest / 1e6): see `_latency`.
        """
        values = self.values(name, positions).cast(pa.int64())
        return np.asarray(values.to_numpy(zero_copy_only=False), dtype=np.float64)

    def tool_names(self) -> pa.Array:
        """Each TOOL span's tool: `tool_name`, else its span name without the `tool.` prefix."""
        names = self.values(TOOL_NAME, self.tools.position)
        spans = self.values(NAME, self.tools.position)
        prefixed = pc.starts_with(spans, TOOL_SPAN_PREFIX)
        stripped = pc.if_else(
            prefixed, pc.utf8_slice_codeunits(spans, len(TOOL_SPAN_PREFIX)), spans
        )
        return pc.coalesce(names, stripped)


def prepare(table: pa.Table) -> TraceFrame:
    """Validate a trace table and prepare its frame."""
    validate_table(table)
    return TraceFrame(table)


def _turn_order(table: pa.Table) -> tuple[Ints | None, Ints, Ints]:
    """The turn order of a table's rows: (order or None, turn of each position, turn starts).

    Turns are ordered by session id (as strings sort), then turn index; spans within a turn by
    start time (none last), then row.
    """
    rows = table.num_rows
    if rows == 0:
        empty = np.zeros(0, dtype=np.int64)
        return None, empty, empty
    sessions = table.column(SESSION_ID).combine_chunks().dictionary_encode()
    rank = np.empty(len(sessions.dictionary), dtype=np.int64)
    rank[np.asarray(pc.sort_indices(sessions.dictionary))] = np.arange(len(rank))
    turn_index = np.asarray(table.column(TURN_INDEX).to_numpy(), dtype=np.int64)
    low = int(turn_index.min())
    key = rank[np.asarray(sessions.indices)] * (int(turn_index.max()) - low + 1) + turn_index - low
    start = table.column(START_TIME).combine_chunks()
    untimed = np.asarray(start.is_null().to_numpy(zero_copy_only=False), dtype=np.int64)
    at = np.asarray(start.cast(pa.int64()).fill_null(0).to_numpy(), dtype=np.int64)
    order: Ints | None = None
    if not _in_order(key, untimed, at):
        order = np.lexsort((at, untimed, key)).astype(np.int64)  # stable: ties keep row order
        key = key[order]
    new = np.ones(rows, dtype=bool)
    new[1:] = key[1:] != key[:-1]
    return order, np.cumsum(new) - 1, np.flatnonzero(new)


def _in_order(key: Ints, untimed: Ints, at: Ints) -> bool:
    """Whether rows are already sorted by (key, untimed, at), ties in row order."""
    step = np.diff(key)
    if (step < 0).any():
        return False
    same = step == 0
    later = np.diff(untimed)
    if (same & (later < 0)).any():
        return False
    timed_pair = same & (later == 0) & (untimed[1:] == 0)
    return not (timed_pair & (np.diff(at) < 0)).any()


def _kind_codes(kinds: pa.Array) -> npt.NDArray[np.int8]:
    encoded = kinds.dictionary_encode()
    names = encoded.dictionary.to_pylist()
    codes = np.array([KINDS.index(n) if n in KINDS else -1 for n in names], dtype=np.int8)
    indices = np.asarray(encoded.indices.to_numpy(zero_copy_only=False))
    return codes[indices] if len(codes) else np.zeros(len(indices), dtype=np.int8)
