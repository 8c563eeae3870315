"""`tool_call_loops`' figures for every turn at once: reductions over stretches of calls.

Calls are in turn order, so a turn's calls, a run's calls and a turn's runs are each one
stretch of an array: a per-turn figure is a `reduceat` over stretches, scattered to the turns
that have calls (the others keep zeros).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from plangate.evaluators._arithmetic import group_sums, seconds_between
from plangate.evaluators._frame import TraceFrame
from plangate.replay.schema import END_TIME, ITERATION, START_TIME, TOKENS_COMPLETION, TOKENS_PROMPT

Ints = npt.NDArray[np.int64]
Bools = npt.NDArray[np.bool_]
Floats = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True, eq=False)
class Keys:
    """What the calls' codes stand for: a tool name and its arguments.

    Code `n * (len(arguments) + 1) + a` is the tool `names[n]` with the arguments
    `arguments[a]` (`a == len(arguments)`: no arguments).
    """

    names: pa.Array
    """The distinct tool names."""
    arguments: pa.Array
    """The distinct argument texts."""

    def texts(self, codes: Ints) -> list[str]:
        """The keys of some codes as text: the tool name, a space, the arguments."""
        name, argument = np.divmod(codes, len(self.arguments) + 1)
        missing = argument == len(self.arguments)
        names = self.names.take(pa.array(name)).to_pylist()
        index = pa.array(np.where(missing, 0, argument), mask=missing)
        arguments = self.arguments.take(index).to_pylist()
        return [f"{n} {a or ''}" for n, a in zip(names, arguments, strict=True)]


@dataclass(frozen=True, slots=True, eq=False)
class Calls:
    """Every TOOL span of a frame as a call, in turn order."""

    turn: Ints
    """Each call's turn number."""
    number: Ints
    """Each call's place in its turn, from 0."""
    code: Ints
    """Each call's key (tool name plus arguments) as a code of `keys`; -1 without a tool name."""
    named: Bools
    """Whether the call has a tool name (a call without one matches no neighbour)."""
    keys: Keys
    """What the codes stand for."""
    repeated: Bools
    """Whether the call's key comes more than once in its turn."""
    result: Ints | None
    """Each call's result as a code, -1 where unknown; None when none is compared (results
    are not compared, or no call made again has one)."""
    recorded: Bools
    """Whether each call's output is recorded."""


@dataclass(frozen=True, slots=True, eq=False)
class Runs:
    """Every maximal run of identical calls with the same result (length 1 included), in order."""

    starts: Ints
    """Each run's first call."""
    lengths: Ints
    """How many calls each run holds."""
    progress: Bools
    """Whether each run begins where the same call's result changed."""


@dataclass(frozen=True, slots=True, eq=False)
class TurnStats:
    """Each turn's figures, aligned with `frame.turns` (zeros for a turn without calls)."""

    calls: Ints
    """How many calls the turn made."""
    longest: Ints
    """The longest run."""
    loop_start: Ints
    """Where the longest run (the first of the longest) starts, as a call number."""
    loop_code: Ints
    """The longest run's key code."""
    loop_known: Ints
    """How many of the longest run's results are known."""
    identical: Ints
    """The longest stretch of identical calls, whatever their results."""
    progress: Ints
    """The longest stretch of identical calls whose results changed (0: none)."""
    progress_start: Ints
    """Where that stretch starts, as a call number."""
    progress_code: Ints
    """That stretch's key code."""
    changes: Ints
    """How many times that stretch's results changed."""
    redundant: Ints
    """Calls that repeat an earlier identical call of the turn (with the same result)."""
    cycle: Ints
    """The longest A,B,A,B alternation, in calls (0: none)."""
    cycle_start: Ints
    """Where the longest alternation starts, as a call number."""
    recorded: Ints
    """How many calls have a recorded output."""
    seconds: Floats
    """Seconds spent on calls that repeat the call before them in a run (NaN: untimed turn)."""
    tokens: Floats
    """Tokens of the model calls that issued those repeats (NaN: none known)."""


def turn_stats(frame: TraceFrame, calls: Calls, runs: Runs) -> TurnStats:
    """Every turn's figures."""
    turns = len(frame.turns)
    recorded = np.bincount(calls.turn[calls.recorded], minlength=turns)
    seconds, tokens = _waste(frame, calls, runs, turns)
    longest = _longest(calls, runs, turns)
    return TurnStats(
        calls=np.bincount(calls.turn, minlength=turns).astype(np.int64),
        **longest,
        **_stretches(calls, runs, turns, longest["longest"]),
        redundant=_redundant(calls, turns),
        **_cycles(calls, turns),
        recorded=recorded.astype(np.int64),
        seconds=seconds,
        tokens=tokens,
    )


def find_runs(code: Ints, named: Bools, turn: Ints, result: Ints | None) -> Runs:
    """Every maximal run of identical calls with the same result, as `call_runs` finds them.

    A run never crosses a turn, a call without a tool name, nor a change of result: a known
    result (a code >= 0) that differs from the last one known before it in the stretch of
    identical calls. `result` None: calls alone decide.
    """
    count = len(code)
    if count == 0:
        empty = np.zeros(0, dtype=np.int64)
        return Runs(starts=empty, lengths=empty, progress=np.zeros(0, dtype=bool))
    same = (code[1:] == code[:-1]) & named[1:] & (turn[1:] == turn[:-1])
    changed = np.zeros(count - 1, dtype=bool)
    if result is not None:
        changed = _result_changes(result, same)
    starts = np.concatenate(([0], np.flatnonzero(~same | changed) + 1)).astype(np.int64)
    lengths = np.diff(np.append(starts, count)).astype(np.int64)
    progress = np.concatenate(([False], changed[starts[1:] - 1]))
    return Runs(starts=starts, lengths=lengths, progress=progress)


def _result_changes(result: Ints, same: Bools) -> Bools:
    """For each neighbour pair (i-1, i) of identical calls: did call i's result change?

    True where i's known result differs from the last result known before it in their stretch
    of identical calls (`call_runs`' rule, on codes).
    """
    index = np.arange(len(result))
    known = result >= 0
    stretch_start = np.maximum.accumulate(np.where(np.append(True, ~same), index, 0))
    before = np.maximum.accumulate(np.where(known, index, -1))[:-1]
    comparable = np.flatnonzero(same & known[1:] & (before >= stretch_start[1:]))
    changed = np.zeros(len(same), dtype=bool)
    changed[comparable] = result[comparable + 1] != result[before[comparable]]
    return changed


def _longest(calls: Calls, runs: Runs, turns: int) -> dict[str, Ints]:
    """Each turn's longest run (the first, of equals), and how many of its results are known."""
    run_turn = calls.turn[runs.starts]
    best = first_largest(runs.lengths, run_turn)
    turn, start, length = run_turn[best], runs.starts[best], runs.lengths[best]
    known = np.zeros(len(calls.turn) + 1, dtype=np.int64)
    if calls.result is not None:
        np.cumsum(calls.result >= 0, out=known[1:])
    return {
        "longest": scatter(turns, turn, length),
        "loop_start": scatter(turns, turn, calls.number[start]),
        "loop_code": scatter(turns, turn, calls.code[start]),
        "loop_known": scatter(turns, turn, known[start + length] - known[start]),
    }


def _stretches(calls: Calls, runs: Runs, turns: int, longest: Ints) -> dict[str, Ints]:
    """Runs joined across changes of result: stretches of identical calls.

    `identical` is each turn's longest; `progress` (with its start, key and `changes`) the
    longest whose results changed at least once. Without a change, stretches are the runs.
    """
    if not runs.progress.any():
        none = np.zeros(turns, dtype=np.int64)
        return {
            "identical": longest,
            "progress": none,
            "progress_start": none,
            "progress_code": none,
            "changes": none,
        }
    heads = np.flatnonzero(~runs.progress)  # the first run is never progress
    lengths = np.add.reduceat(runs.lengths, heads)
    changes = np.add.reduceat(runs.progress.astype(np.int64), heads)
    first = runs.starts[heads]
    turn = calls.turn[first]
    top = first_largest(lengths, turn)
    moved = np.flatnonzero(changes > 0)
    best = moved[first_largest(lengths[moved], turn[moved])]
    at = turn[best]
    return {
        "identical": scatter(turns, turn[top], lengths[top]),
        "progress": scatter(turns, at, lengths[best]),
        "progress_start": scatter(turns, at, calls.number[first[best]]),
        "progress_code": scatter(turns, at, calls.code[first[best]]),
        "changes": scatter(turns, at, changes[best]),
    }


def _redundant(calls: Calls, turns: int) -> Ints:
    """Calls that repeat an earlier call of their turn (with the same result, where compared).

    Only calls whose key comes again in their turn can repeat one: those are sorted by turn,
    key and result, and each but the first of equals is a repeat.
    """
    rows = np.flatnonzero(calls.repeated)
    turn, code = calls.turn[rows], calls.code[rows]
    result = np.zeros(len(rows), dtype=np.int64)
    if calls.result is not None:
        result = calls.result[rows]
    order = np.lexsort((result, code, turn))
    turn, code, result = turn[order], code[order], result[order]
    again = (np.diff(turn) == 0) & (np.diff(code) == 0) & (np.diff(result) == 0)
    return np.bincount(turn[1:][again], minlength=turns).astype(np.int64)


def _cycles(calls: Calls, turns: int) -> dict[str, Ints]:
    """Each turn's longest A,B,A,B stretch (A != B) in calls, and its first call.

    Call i+2 continues the alternation when it is call i again (same turn, a tool name, another
    call between) and its known result is not a change from call i's.
    """
    code, turn = calls.code, calls.turn
    alternating = (code[2:] == code[:-2]) & (code[2:] != code[1:-1]) & calls.named[2:]
    alternating &= (turn[2:] == turn[:-2]) & (turn[1:-1] == turn[2:])
    if calls.result is not None:
        later, earlier = calls.result[2:], calls.result[:-2]
        alternating &= ~((later >= 0) & (earlier >= 0) & (later != earlier))
    edges = np.diff(np.concatenate(([0], alternating.astype(np.int8), [0])))
    starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    length = (ends - starts + 2).astype(np.int64)
    best = first_largest(length, turn[starts])
    at = turn[starts[best]]
    return {
        "cycle": scatter(turns, at, length[best]),
        "cycle_start": scatter(turns, at, calls.number[starts[best]]),
    }


def _waste(frame: TraceFrame, calls: Calls, runs: Runs, turns: int) -> tuple[Floats, Floats]:
    """Seconds and tokens spent on calls that repeat the call right before them (in a run).

    Seconds only for a turn whose calls all have a start time (a repeat without an end adds
    nothing); tokens of the model calls of the repeats' iterations.
    """
    repeat = np.ones(len(calls.turn), dtype=bool)
    repeat[runs.starts] = False
    position = frame.tools.position
    at = position[repeat]
    spent = np.zeros(len(calls.turn))
    spent[repeat] = seconds_between(frame.micros(START_TIME, at), frame.micros(END_TIME, at))
    firsts = stretch_starts(calls.turn)
    seconds = np.full(turns, np.nan)
    seconds[calls.turn[firsts]] = group_sums(spent, firsts)
    if frame.table.column(START_TIME).null_count:
        untimed = ~frame.valid(START_TIME)[position]
        seconds[np.bincount(calls.turn[untimed], minlength=turns) > 0] = np.nan
    return seconds, _tokens(frame, calls.turn[repeat], at, turns)


def _tokens(frame: TraceFrame, turn: Ints, position: Ints, turns: int) -> Floats:
    """Tokens of the model calls of the same turn and iteration as the calls at `position`.

    A missing iteration matches a missing iteration (as the pandas merge this replaced did).
    """
    tokens = np.full(turns, np.nan)
    if not len(turn):
        return tokens
    llms = frame.llms
    repeating = np.zeros(turns, dtype=bool)
    repeating[turn] = True
    chosen = np.flatnonzero(repeating[llms.turn])
    iteration = _iterations(frame, np.concatenate((position, llms.position[chosen])))
    width = int(iteration.max()) + 1
    wanted = turn * width + iteration[: len(turn)]
    matched = chosen[members(llms.turn[chosen] * width + iteration[len(turn) :], wanted)]
    at = llms.position[matched]
    spent = frame.numbers(TOKENS_PROMPT, at) + frame.numbers(TOKENS_COMPLETION, at)
    known = ~np.isnan(spent)
    used = np.bincount(llms.turn[matched][known], minlength=turns)
    total = np.bincount(llms.turn[matched][known], weights=spent[known], minlength=turns)
    return np.where(used > 0, total, np.nan)


def _iterations(frame: TraceFrame, position: Ints) -> Ints:
    """The iterations of the spans at `position` as whole numbers from 0.

    A missing iteration is one more than the largest: it matches only another missing one.
    """
    column = frame.column(ITERATION)
    values = int32_values(column)[position].astype(np.int64)
    if column.null_count:
        valid = numpy_bools(column.is_valid())[position]
        values = np.where(valid, values, values[valid].max(initial=0) + 1)
    return np.asarray(values - values.min(), dtype=np.int64)


def members(found: Ints, wanted: Ints) -> Bools:
    """Whether each of `found` is among `wanted` (whole numbers >= 0).

    Looked up in a table of bits when the numbers are small enough, else hashed.
    """
    top = max(int(found.max(initial=0)), int(wanted.max()))
    if top < max(8 * (len(found) + len(wanted)), 1 << 16):
        table = np.zeros(top + 1, dtype=bool)
        table[wanted] = True
        return np.asarray(table[found])
    return numpy_bools(pc.is_in(pa.array(found), value_set=pa.array(wanted)))


def stretch_starts(labels: Ints) -> Ints:
    """Where each stretch of equal labels begins."""
    if not len(labels):
        return np.zeros(0, dtype=np.int64)
    return np.flatnonzero(np.concatenate(([True], labels[1:] != labels[:-1])))


def first_largest(values: Ints, labels: Ints) -> Ints:
    """For each stretch of equal labels, the index of its first largest value."""
    firsts = stretch_starts(labels)
    if not len(firsts):
        return firsts
    largest = np.maximum.reduceat(values, firsts)
    top = np.flatnonzero(values == np.repeat(largest, np.diff(np.append(firsts, len(values)))))
    return top[stretch_starts(labels[top])]


def scatter(turns: int, turn: Ints, values: Ints) -> Ints:
    """`values` at `turn` of an array of zeros, one per turn."""
    out = np.zeros(turns, dtype=np.int64)
    out[turn] = values
    return out


def encode(values: Ints) -> tuple[Ints, Ints]:
    """Whole numbers as codes (hashing, not sorting): each value's code, the distinct values."""
    encoded = pa.array(values, pa.int64()).dictionary_encode()
    return numpy_ints(encoded.indices), numpy_ints(encoded.dictionary)


def int32_values(values: pa.Array) -> npt.NDArray[np.int32]:
    """An int32 array's values as they lie in memory, without a copy (a null slot holds any)."""
    data = values.buffers()[1]
    if data is None:
        return np.zeros(len(values), dtype=np.int32)
    return np.frombuffer(data, np.int32, len(values), 4 * values.offset)


def numpy_ints(values: pa.Array) -> Ints:
    """An Arrow array of whole numbers without nulls as int64."""
    return np.asarray(values.to_numpy(zero_copy_only=False), dtype=np.int64)


def numpy_bools(values: pa.Array) -> Bools:
    """An Arrow array of booleans without nulls as NumPy."""
    return np.asarray(values.to_numpy(zero_copy_only=False), dtype=bool)
