"""The loop detector: runs of identical consecutive tool calls.

One function serves the harness's loop guard (on the calls of the running turn) and the
`tool_call_loops` evaluator (on a recorded trajectory). Calls are compared by `call_key`: tool
name plus canonical arguments; call ids are ignored, since some agents reuse one id for every
repeat.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True, kw_only=True)
class CallRun:
    """A run of identical consecutive calls."""

    key: str
    """The repeated call's key (tool name plus canonical arguments)."""
    start: int
    """Index of the first call of the run in the sequence."""
    length: int
    """How many identical calls in a row."""


def call_key(name: str, canonical_arguments: str) -> str:
    """The identity of a call: tool name plus canonical arguments (call ids are ignored)."""
    return f"{name} {canonical_arguments}"


def identical_runs(keys: Sequence[str], min_length: int = 2) -> list[CallRun]:
    """Every run of at least `min_length` identical consecutive keys, in order."""
    runs: list[CallRun] = []
    start = 0
    for index in range(1, len(keys) + 1):
        if index == len(keys) or keys[index] != keys[start]:
            if index - start >= min_length:
                runs.append(CallRun(key=keys[start], start=start, length=index - start))
            start = index
    return runs


def trailing_run(keys: Sequence[str]) -> int:
    """Length of the run of identical calls that ends the sequence (0 when empty)."""
    if not keys:
        return 0
    last = keys[-1]
    length = 1
    while length < len(keys) and keys[-1 - length] == last:
        length += 1
    return length
