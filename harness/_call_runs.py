"""The loop detector: runs of identical consecutive tool calls.

One function, `call_runs`, serves the `tool_call_loops` evaluator (on every call of a whole
trace table at once, with turn boundaries given as `groups`). It is vectorized: comparing
neighbours of an already canonical key column is cheap, which is why keys are canonicalized
once, when a call is recorded. The harness's loop guard asks one question of the running
turn after every call, how long is the run that ends here, and `trailing_run` answers it by
walking back over a few keys: `call_runs`' last run, without building arrays for it (tested
to agree).

Calls are compared by `call_key`: tool name plus canonical arguments; call ids are ignored,
since some agents reuse one id for every repeat.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt


def call_key(name: str, canonical_arguments: str) -> str:
    """The identity of a call: tool name plus canonical arguments (call ids are ignored)."""
    return f"{name} {canonical_arguments}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Runs:
    """Every maximal run of identical consecutive keys (length 1 included), in order."""

    starts: npt.NDArray[np.int64]
    """Index of each run's first call in the input sequence."""
    lengths: npt.NDArray[np.int64]
    """How many identical calls each run holds."""


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
) -> Runs:
    """Split `keys` into maximal runs of identical neighbours; a run never crosses a group.

    `groups` (one label per key, equal labels adjacent) marks where a sequence ends and the
    next begins, so the calls of many turns are handled in one pass.
    """
    values = np.asarray(keys, dtype=object)
    count = len(values)
    if count == 0:
        empty = np.zeros(0, dtype=np.int64)
        return Runs(starts=empty, lengths=empty)
    changed = values[1:] != values[:-1]
    if groups is not None:
        labels = np.asarray(groups, dtype=object)
        changed |= labels[1:] != labels[:-1]
    starts = np.concatenate(([0], np.flatnonzero(changed) + 1)).astype(np.int64)
    lengths = np.diff(np.append(starts, count)).astype(np.int64)
    return Runs(starts=starts, lengths=lengths)


def identical_runs(keys: Sequence[str], min_length: int = 2) -> list[CallRun]:
    """Every run of at least `min_length` identical consecutive keys, in order."""
    runs = call_runs(keys)
    keep = runs.lengths >= min_length
    return [
        CallRun(key=keys[int(start)], start=int(start), length=int(length))
        for start, length in zip(runs.starts[keep], runs.lengths[keep], strict=True)
    ]


def trailing_run(keys: Sequence[str]) -> int:
    """Length of the run of identical calls that ends the sequence (0 when empty)."""
    length = 0
    for key in reversed(keys):
        if key != keys[-1]:
            break
        length += 1
    return length
