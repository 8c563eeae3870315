"""The loop detector: runs of identical consecutive tool calls that return the same result.

One function, `call_runs`, serves the `tool_call_loops` evaluator (on every call of a whole
trace table at once, with turn boundaries given as `groups`). It is vectorized: comparing
neighbours of an already canonical key column is cheap, which is why keys are canonicalized
once, when a call is recorded. The harness's loop guard asks one question of the running
turn before every call, how long is the run that this call would extend, and `trailing_run`
answers it by walking back over a few keys: `call_runs`' last run, without building arrays
for it (tested to agree).

Calls are compared by `call_key`: tool name plus canonical arguments; call ids are ignored,
since some agents reuse one id for every repeat.

Results tell a loop from progress. Identical calls whose results change (scrolling a page,
paging a list, polling a job that moves on) are progress; identical calls that get the same
result back are a loop. The rule: a run is a maximal stretch of identical consecutive calls
in which no recorded result differs from the last recorded result before it in the stretch.
So each change of result starts a new run: five scrolls that each return a new page are five
runs of one; a poll answered "running" three times and then "done" is a run of three, then a
run of one (the three identical answers are a loop of three, whatever came after). A missing
result (None: not recorded, or the call has not run yet) is no evidence either way: it stays
in the run, and the next recorded result is compared with the last one before it, so a gap
never hides a change. Without results (`results=None`, or all None) calls alone decide, as
they always did. `Runs.progress` marks the runs that begin where the same call's result
changed, so that a caller can report the progress it did not count.

The harness keeps each call of the running turn as a key, and once the call has run, adds a
digest of the tool's own result to it (`with_result`; `split_result` takes them apart):
the guard compares what the tool returned, never the notes the harness adds to it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

RESULT_SEPARATOR = "\x1f"
"""Between a call key and its result's digest (canonical JSON never holds a raw control
character; a raw argument text that ends with one and sixteen hex digits would be misread)."""
_DIGEST_SIZE = 8
_NONE = np.array(None, dtype=object)


def call_key(name: str, canonical_arguments: str) -> str:
    """The identity of a call: tool name plus canonical arguments (call ids are ignored)."""
    return f"{name} {canonical_arguments}"


def with_result(key: str, result: str) -> str:
    """A call's key once the call has run: the call key and a digest of its result."""
    digest = hashlib.blake2b(result.encode("utf-8", "surrogatepass"), digest_size=_DIGEST_SIZE)
    return f"{key}{RESULT_SEPARATOR}{digest.hexdigest()}"


def split_result(key: str) -> tuple[str, str | None]:
    """The call key and the result's digest of a key (None: the call has no result yet)."""
    call, separator, digest = key.rpartition(RESULT_SEPARATOR)
    if separator and len(digest) == 2 * _DIGEST_SIZE:
        return call, digest
    return key, None


@dataclass(frozen=True, slots=True, kw_only=True)
class Runs:
    """Every maximal run (length 1 included), in order; see the module for the rule."""

    starts: npt.NDArray[np.int64]
    """Index of each run's first call in the input sequence."""
    lengths: npt.NDArray[np.int64]
    """How many calls each run holds."""
    progress: npt.NDArray[np.bool_]
    """Whether each run begins where the same call's result changed (the run before it is the
    same call in the same group): progress, not a new call. All False without results."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CallRun:
    """A run of identical consecutive calls."""

    key: str
    """The repeated call's key (tool name plus canonical arguments)."""
    start: int
    """Index of the first call of the run in the sequence."""
    length: int
    """How many identical calls in a row."""


def call_runs(
    keys: Sequence[Hashable] | npt.NDArray[Any],
    groups: Sequence[Hashable] | npt.NDArray[Any] | None = None,
    results: Sequence[Hashable | None] | npt.NDArray[Any] | None = None,
) -> Runs:
    """Split `keys` into maximal runs; a run never crosses a group nor a change of result.

    `groups` (one label per key, equal labels adjacent) marks where a sequence ends and the
    next begins, so the calls of many turns are handled in one pass. `results` (one per key,
    None where unknown) splits a run of identical calls where the result changes. Linear in
    the number of calls.
    """
    values = np.asarray(keys, dtype=object)
    count = len(values)
    if count == 0:
        empty = np.zeros(0, dtype=np.int64)
        return Runs(starts=empty, lengths=empty, progress=np.zeros(0, dtype=bool))
    same_call = values[1:] == values[:-1]
    if groups is not None:
        labels = np.asarray(groups, dtype=object)
        same_call &= labels[1:] == labels[:-1]
    changed = np.zeros(count - 1, dtype=bool)
    if results is not None:
        if len(results) != count:
            raise ValueError(f"{len(results)} results for {count} calls")
        changed = _result_changes(np.asarray(results, dtype=object), same_call)
    starts = np.concatenate(([0], np.flatnonzero(~same_call | changed) + 1)).astype(np.int64)
    lengths = np.diff(np.append(starts, count)).astype(np.int64)
    progress = np.concatenate(([False], changed[starts[1:] - 1]))
    return Runs(starts=starts, lengths=lengths, progress=progress)


def _result_changes(
    results: npt.NDArray[Any], same_call: npt.NDArray[np.bool_]
) -> npt.NDArray[np.bool_]:
    """For each neighbour pair (i-1, i): did call i's result change?

    True where both are the same call and i's recorded result differs from the last result
    recorded before it in their stretch of identical calls.
    """
    count = len(results)
    index = np.arange(count)
    known = np.not_equal(results, _NONE)  # elementwise `is not None` for text and None
    stretch_start = np.maximum.accumulate(np.where(np.append(True, ~same_call), index, 0))
    last_known = np.maximum.accumulate(np.where(known, index, -1))
    before = last_known[:-1]  # the last recorded result at or before i-1
    comparable = np.flatnonzero(same_call & known[1:] & (before >= stretch_start[1:]))
    changed = np.zeros(count - 1, dtype=bool)
    changed[comparable] = results[comparable + 1] != results[before[comparable]]
    return changed


def identical_runs(
    keys: Sequence[str], min_length: int = 2, results: Sequence[Hashable | None] | None = None
) -> list[CallRun]:
    """Every run of at least `min_length` identical consecutive calls, in order."""
    runs = call_runs(keys, results=results)
    keep = runs.lengths >= min_length
    return [
        CallRun(key=keys[int(start)], start=int(start), length=int(length))
        for start, length in zip(runs.starts[keep], runs.lengths[keep], strict=True)
    ]


def trailing_run(keys: Sequence[str], results: Sequence[Hashable | None] | None = None) -> int:
    """Length of the run that ends the sequence (0 when empty): `call_runs`' last run."""
    length = 0
    anchor: Hashable | None = None  # the earliest recorded result seen, walking back
    anchored = 0  # the run's length up to and including that result
    for position in range(len(keys) - 1, -1, -1):
        if keys[position] != keys[-1]:
            break
        result = results[position] if results is not None else None
        if result is not None:
            if anchor is not None and result != anchor:
                return anchored  # the result changed here: the run began after this call
            anchor, anchored = result, length + 1
        length += 1
    return length
