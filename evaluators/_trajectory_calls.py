"""The turns `trajectory_match` judges, with their compared calls as codes.

A judged turn's verdict, explanation and details depend on nothing but its rubric and its
sequence of calls (tool, and arguments where the tool is compared): turns that share both (the
trials of one task, say) are judged once. `Judged.distinct` finds them column-wise, hashing each
turn's sequence of codes as one binary value.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from plangate.evaluators._frame import Ints, TraceFrame
from plangate.evaluators._trajectory_codes import Arguments, ToolCodes
from plangate.replay.schema import TOOL_ARGS


@dataclass(frozen=True, slots=True, eq=False)
class Judged:
    """The turns with a rubric naming tools, and their compared calls in turn order."""

    slot: Ints
    """Per judged turn: its rubric's shape (`Expectations`)."""
    calls: Ints
    """Per judged turn: compared calls."""
    skipped: Ints
    """Per judged turn: calls left out (ignored tools)."""
    start: Ints
    """Per judged turn: its first call in the call arrays below."""
    sequence: pa.Array
    """Per judged turn: its rubric's shape and every tool call's codes, as one binary value."""
    turn: Ints
    """Per call: its judged turn."""
    rank: Ints
    """Per call: its place among the turn's compared calls, from 0."""
    number: Ints
    """Per call: its 1-based position among all the turn's tool calls."""
    tool: Ints
    """Per call: its tool's code."""
    argument: Ints
    """Per call: its argument text's code in `arguments`."""
    arguments: Arguments
    """The distinct argument texts of these calls."""

    def __len__(self) -> int:
        return len(self.slot)

    @classmethod
    def of(cls, frame: TraceFrame, tools: ToolCodes, judged: Ints, slot: Ints) -> Judged:
        """Gather the judged turns' calls.

        Args:
            frame: The prepared trace table.
            tools: Its TOOL spans' tools as codes.
            judged: The judged turns' numbers, ascending.
            slot: Their rubrics' shapes.

        Returns:
            The judged turns.
        """
        inside, turn_of = _inside(frame, judged)
        kept = tools.kept[inside]
        everything = bool(kept.all())  # nothing left out: the kept calls are all of them
        chosen = inside if everything else inside[kept]
        turn = turn_of if everything else turn_of[kept]
        calls = np.bincount(turn, minlength=len(judged))
        start = np.cumsum(calls) - calls
        texts = frame.values(TOOL_ARGS, frame.tools.position[chosen]).fill_null("")
        encoded = texts.dictionary_encode()
        argument = np.asarray(encoded.indices.to_numpy(zero_copy_only=False), dtype=np.int64)
        code = tools.code[inside] * (len(encoded.dictionary) + 1)
        if everything:
            code += argument + 1
        else:
            code[kept] += argument + 1  # a left-out call counts by its tool alone
        every = calls if everything else np.bincount(turn_of, minlength=len(judged))
        return cls(
            slot=slot,
            calls=calls,
            skipped=every - calls,
            start=start,
            sequence=_sequences(slot, every, code),
            turn=turn,
            rank=np.arange(len(turn)) - start[turn],
            number=frame.tools.number[chosen] + 1,
            tool=tools.code[chosen],
            argument=argument,
            arguments=Arguments(encoded.dictionary),
        )

    def distinct(self) -> tuple[Judged, Ints]:
        """The first turn of each distinct (rubric shape, calls), and each turn's among them."""
        encoded = self.sequence.dictionary_encode()
        unit = np.asarray(encoded.indices.to_numpy(zero_copy_only=False), dtype=np.int64)
        if len(encoded.dictionary) == len(self):
            return self, unit
        first = np.full(len(encoded.dictionary), len(self), dtype=np.int64)
        np.minimum.at(first, unit, np.arange(len(self)))
        return self.select(first), unit

    def select(self, turns: Ints) -> Judged:
        """Some of the judged turns (ascending), with their calls."""
        where = np.full(len(self), -1, dtype=np.int64)
        where[turns] = np.arange(len(turns))
        rows = np.flatnonzero(where[self.turn] >= 0)
        calls = self.calls[turns]
        return Judged(
            slot=self.slot[turns],
            calls=calls,
            skipped=self.skipped[turns],
            start=np.cumsum(calls) - calls,
            sequence=self.sequence.take(pa.array(turns)),
            turn=where[self.turn[rows]],
            rank=self.rank[rows],
            number=self.number[rows],
            tool=self.tool[rows],
            argument=self.argument[rows],
            arguments=self.arguments,
        )


def _inside(frame: TraceFrame, judged: Ints) -> tuple[Ints, Ints]:
    """The TOOL spans (frame.tools rows) of the judged turns, and each one's judged turn.

    Where every turn is judged, that is every TOOL span and its own turn: nothing to look up.
    """
    if len(judged) == len(frame.turns):
        return np.arange(len(frame.tools)), frame.tools.turn
    where = np.full(len(frame.turns), -1, dtype=np.int64)
    where[judged] = np.arange(len(judged))
    inside = np.flatnonzero(where[frame.tools.turn] >= 0)
    return inside, where[frame.tools.turn[inside]]


def _sequences(slot: Ints, counts: Ints, code: Ints) -> pa.Array:
    """Per turn, its rubric followed by its calls' codes, as the bytes of int64 values."""
    header = np.cumsum(counts + 1) - (counts + 1)
    data = np.empty(len(code) + len(slot), dtype=np.int64)
    calls = np.ones(len(data), dtype=bool)
    calls[header] = False
    data[header] = slot
    data[calls] = code
    offsets = np.append(header, len(data)).astype(np.int64) * 8
    return pa.LargeBinaryArray.from_buffers(
        pa.large_binary(), len(slot), [None, pa.py_buffer(offsets), pa.py_buffer(data)]
    )
