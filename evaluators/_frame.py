"""A trace table prepared once for every evaluator: spans grouped by turn, as NumPy and Arrow.

Nothing is converted to Python objects or pandas here: a turn is a number, a span a position,
and a column is taken (in turn order) only when an evaluator asks for it. A table already in
turn order, as importers and the harness write them, is not copied at all.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from plangate.evaluators._threads import started, two_threads
from plangate.replay.schema import (
    NAME,
    SESSION_ID,
    START_TIME,
    TOOL_NAME,
    TOOL_SPAN_PREFIX,
    TURN_INDEX,
    one_chunk,
    upgrade_table,
    validate_table,
)

Ints = npt.NDArray[np.int64]
T = TypeVar("T")


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

    def __init__(
        self,
        table: pa.Table,
        kinds: npt.NDArray[np.int8],
        order: tuple[Ints | None, Ints, Ints] | None = None,
    ) -> None:
        self.table = table
        """The validated table, in its own order."""
        self._kept: dict[str, Any] = {}
        self._computing: dict[str, threading.RLock] = {}
        self._guard = threading.Lock()
        self.order, self.turn, turn_starts = order or _turn_order(table)
        """`order`: each position's row in `table` (None: the table is in turn order);
        `turn`: each position's turn number (`order`, what `_turn_order` gives, when known)."""
        kind = kinds if self.order is None else kinds[self.order]
        self.kind = kind
        """Each position's kind: an index into `SPAN_KIND_CODES` (0 AGENT, 1 LLM, 2 TOOL, ...)."""
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

    def __getstate__(self) -> dict[str, Any]:
        """What a copy in another process needs (a lock is not copied: it gets its own)."""
        return {k: v for k, v in self.__dict__.items() if k not in ("_guard", "_computing")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state, _guard=threading.Lock(), _computing={})

    def column(self, name: str) -> pa.Array:
        """A whole column in turn order (taken once, then kept)."""

        def ordered() -> pa.Array:
            column = one_chunk(self.table.column(name))
            return column if self.order is None else column.take(self.order)

        return self.kept(f"column {name}", ordered)

    def codes(self, name: str) -> tuple[Ints, pa.Array]:
        """A column as codes into its distinct values, in turn order (-1: null); kept.

        The table's column is encoded where it lies: only the codes are put in turn order.
        """

        def encoded() -> tuple[Ints, pa.Array]:
            if self.empty(name):
                return constant(-1, len(self), np.int64), pa.array([], pa.string())
            codes, distinct = _encoded(one_chunk(self.table.column(name)))
            return codes if self.order is None else codes[self.order], distinct

        return self.kept(f"codes {name}", encoded)

    def kept(self, key: str, compute: Callable[[], T]) -> T:
        """What `compute` gives, computed once for this frame.

        Evaluators that read the same thing share it: `tokens` and `cost` the model calls'
        usage (counts, costs, models and providers per call and per turn). Evaluators that run
        at once (`evaluate`, on threads) wait for the one computing it.
        """
        if key not in self._kept:
            with self._guard:
                computing = self._computing.setdefault(key, threading.RLock())
            with computing:
                if key not in self._kept:
                    self._kept[key] = compute()
        return self._kept[key]  # type: ignore[no-any-return]

    def empty(self, name: str) -> bool:
        """Whether a column is null in every row (nothing to read: the fast paths skip it)."""
        return bool(self.table.column(name).null_count == self.table.num_rows)

    def valid(self, name: str) -> npt.NDArray[np.bool_]:
        """Where a column is not null, in turn order."""
        column = self.table.column(name)
        if column.null_count in (0, len(column)):  # all or none: nothing to read
            return np.full(len(column), not column.null_count, dtype=bool)
        known = np.asarray(column.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
        return known if self.order is None else known[self.order]

    def values(self, name: str, positions: Ints) -> pa.Array:
        """A column's values at some positions (-1: null)."""
        missing = positions < 0
        if not missing.any():
            rows = positions if self.order is None else self.order[positions]
            return self.table.column(name).take(rows).combine_chunks()
        rows = positions if self.order is None else np.where(missing, -1, self.order[positions])
        return self.table.column(name).take(pa.array(rows, mask=missing)).combine_chunks()

    def integers(self, name: str, positions: Ints) -> Ints:
        """A column of whole numbers at some positions, as int64 (the column has no nulls)."""
        return np.asarray(self.values(name, positions).to_numpy(zero_copy_only=False), np.int64)

    def numbers(self, name: str, positions: Ints) -> npt.NDArray[np.float64]:
        """A numeric column at some positions, as float64 with NaN for null (all null: not read)."""
        if self.empty(name):
            return constant(np.nan, len(positions))
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
    """Validate a trace table and prepare its frame (a table of an older schema upgraded).

    On a large table, the checks run on a second thread while this one puts the rows in turn
    order (NumPy and Arrow let go of the GIL); a table that fails a check gets that error.
    """
    table = upgrade_table(table)
    if not two_threads(table.num_rows):
        return TraceFrame(table, validate_table(table))
    (checked,) = started([lambda: validate_table(table)])
    try:
        order = _turn_order(table)
    except Exception:
        checked.result()  # the table's own error first
        raise
    return TraceFrame(table, checked.result(), order)


def _turn_order(table: pa.Table) -> tuple[Ints | None, Ints, Ints]:
    """The turn order of a table's rows: (order or None, turn of each position, turn starts).

    Turns are ordered by session id (as strings sort), then turn index; spans within a turn by
    start time (none last), then row. A table whose turns each come as one block of rows, in
    order within, is put in order by moving the blocks, without sorting its rows.
    """
    rows = table.num_rows
    if rows == 0:
        empty = np.zeros(0, dtype=np.int64)
        return None, empty, empty
    key = _turn_keys(table)
    start = table.column(START_TIME).combine_chunks()
    untimed = np.asarray(start.is_null().to_numpy(zero_copy_only=False), dtype=np.int64)
    at = np.asarray(start.cast(pa.int64()).fill_null(0).to_numpy(), dtype=np.int64)
    new = np.ones(rows, dtype=bool)
    new[1:] = key[1:] != key[:-1]
    blocks = np.flatnonzero(new)
    in_blocks = _timed_in_order(new, untimed, at)
    if in_blocks and (np.diff(key[blocks]) > 0).all():  # in order already: nothing is copied
        return None, np.cumsum(new) - 1, blocks
    order = _block_order(key[blocks], blocks, rows) if in_blocks else None
    if order is None:
        order = np.lexsort((at, untimed, key)).astype(np.int64)  # stable: ties keep row order
    key = key[order]
    new[1:] = key[1:] != key[:-1]
    return order, np.cumsum(new) - 1, np.flatnonzero(new)


def _turn_keys(table: pa.Table) -> Ints:
    """Each row's turn as a number that sorts as (session id as a string, turn index).

    Only the rows where the turn changes from the row before are hashed: a turn's rows
    usually come together, so that is one row per turn, not per span.
    """
    sessions = one_chunk(table.column(SESSION_ID))
    index = table.column(TURN_INDEX)
    index = index.fill_null(0) if index.null_count else index  # refused by its checks, beside
    turn_index = np.asarray(index.to_numpy(), dtype=np.int64)
    rows = len(turn_index)
    head = np.ones(rows, dtype=bool)
    head[1:] = turn_index[1:] != turn_index[:-1]
    head[1:] |= np.asarray(pc.not_equal(sessions[1:], sessions[:-1]), dtype=bool)
    heads = np.flatnonzero(head)
    encoded = sessions.take(heads).dictionary_encode()
    rank = np.empty(len(encoded.dictionary), dtype=np.int64)
    rank[np.asarray(pc.sort_indices(encoded.dictionary))] = np.arange(len(rank))
    low = int(turn_index.min())
    key = rank[np.asarray(encoded.indices)] * (int(turn_index.max()) - low + 1)
    key += turn_index[heads] - low
    return np.repeat(key, np.diff(np.append(heads, rows))).astype(np.int64, copy=False)


def _timed_in_order(new: npt.NDArray[np.bool_], untimed: Ints, at: Ints) -> bool:
    """Whether each block's rows (`new` marks a block's first) are in start time order.

    Rows without a start time come last; timed rows with equal start times keep row order.
    """
    same = ~new[1:]
    if not untimed.any():
        return not (same & (np.diff(at) < 0)).any()
    later = np.diff(untimed)
    if (same & (later < 0)).any():
        return False
    timed_pair = same & (later == 0) & (untimed[1:] == 0)
    return not (timed_pair & (np.diff(at) < 0)).any()


def _block_order(block_key: Ints, blocks: Ints, rows: int) -> Ints | None:
    """The rows in turn order, moved by blocks, when each turn is one block (else None).

    `blocks` are the blocks' first rows and `block_key` their turn keys.
    """
    by_key = np.argsort(block_key, kind="stable")
    if (np.diff(block_key[by_key]) == 0).any():  # a turn in several blocks: sort the rows
        return None
    sizes = np.diff(np.append(blocks, rows))[by_key]
    moved_to = np.cumsum(sizes) - sizes
    return np.repeat(blocks[by_key] - moved_to, sizes) + np.arange(rows, dtype=np.int64)


def _encoded(column: pa.Array) -> tuple[Ints, pa.Array]:
    """A column's codes into its distinct values (-1: null), and the distinct values.

    Nulls are encoded as a value of their own, then taken out of the codes: cheaper than
    filling the nulls of the codes Arrow would give them.
    """
    encoded = column.dictionary_encode(null_encoding="encode")
    codes = np.asarray(encoded.indices, dtype=np.int64)
    distinct = encoded.dictionary
    if not column.null_count:
        return codes, distinct
    null = int(pc.index(pc.is_null(distinct), True).as_py())  # the one null value
    shift = np.arange(len(distinct), dtype=np.int64)
    shift[null] = -1
    shift[null + 1 :] -= 1
    return shift[codes], distinct.drop_null()


def constant(value: float, size: int, dtype: type = np.float64) -> npt.NDArray[Any]:
    """`size` copies of `value`, read only: a view of one value, nothing is allocated."""
    return np.broadcast_to(np.asarray(value, dtype=dtype), (size,))
