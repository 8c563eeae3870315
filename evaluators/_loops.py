"""`tool_call_loops`: repeated identical tool calls, back-and-forth cycles, and what they cost.

A call is its tool name plus canonical arguments (call ids are ignored: some agents reuse one id
for every repeat). Runs follow the rule of the harness's loop guard (`plangate.harness.call_runs`,
tested to agree), applied to every turn of the table in one pass.

Where the table records results (`tool_output`), they tell a loop from progress: identical calls
whose results change (scrolling, paging, polling a job that moves on) are progress, and only a
run of identical calls that got the same result back counts as a loop (the detector's rule: a
change of result starts a new run; a missing result is no evidence either way). The parameter
`compare_results = false` turns this off: then identical calls alone count, as in version 2.
Results are compared as the tool returned them: the notes plangate's own harness appends to a
result for the model (the loop guard's warning, which counts the repeats, and the plan status
reminder) are left out, and a long result stored by reference is compared without its
reference number. The same rule applies to the other measures: a redundant call repeats an
earlier identical call with the same result, an A,B,A,B cycle repeats its results, and only
repeats inside a run waste time and tokens.

Per turn: the longest run and where it starts, the longest stretch of identical calls whose
results changed (progress, reported and not counted), redundant calls (exact repeats of an
earlier call anywhere in the turn), the longest A,B,A,B alternation, and the time and tokens
the repeats cost. The score is the share of calls that were not redundant.

Every turn is computed at once: calls and results become integer codes (Arrow dictionaries),
runs are found by comparing neighbouring codes, and per-turn figures are reductions over
stretches of calls (`_loops_stats`); the text is built column by column (`_loops_text`). A call
without a tool name matches no neighbour (it starts no run and no cycle), though two of them in
one turn with the same result count as a redundant repeat, as they always did.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from plangate.evaluators._columns import TurnScores
from plangate.evaluators._frame import TraceFrame
from plangate.evaluators._loops_stats import (
    Bools,
    Calls,
    Ints,
    Keys,
    encode,
    find_runs,
    numpy_ints,
    turn_stats,
)
from plangate.evaluators._loops_text import scores
from plangate.evaluators._registry import EvaluatorError, evaluator
from plangate.evaluators._rubric import RubricSet
from plangate.replay.schema import TOOL_ARGS, TOOL_NAME, TOOL_OUTPUT

_HARNESS_NOTES = ("[Loop guard: ", "[Plan: ")
"""How the lines start that plangate's harness appends to a tool's result for the model."""
_STORED = re.compile(r"\[Stored as ref-\d+: ")
_REFERENCE = re.compile(r"\bref-\d+\b")


@evaluator("tool_call_loops", version=3)
def tool_call_loops(
    frame: TraceFrame,
    rubrics: RubricSet,
    max_repeats: int = 2,
    max_cycle_calls: int = 3,
    compare_results: bool = True,
) -> TurnScores:
    """Longest run of identical consecutive calls with the same result, redundant calls, cycles.

    A turn fails when a call is repeated more than `max_repeats` times in a row with the same
    result (with `compare_results` off: whatever its results), or when two calls alternate over
    more than `max_cycle_calls` calls. Identical calls whose results change are progress.
    """
    _check_params(max_repeats, max_cycle_calls, compare_results)
    calls = _calls(frame, compare_results)
    runs = find_runs(calls.code, calls.named, calls.turn, calls.result)
    stats = turn_stats(frame, calls, runs)
    return scores(stats, calls.keys, max_repeats, max_cycle_calls, compare_results)


def _check_params(max_repeats: Any, max_cycle_calls: Any, compare_results: Any) -> None:
    for name, value in (("max_repeats", max_repeats), ("max_cycle_calls", max_cycle_calls)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise EvaluatorError(
                f"evaluator 'tool_call_loops': {name!r} must be a whole number >= 0, not {value!r}"
            )
    if not isinstance(compare_results, bool):
        raise EvaluatorError(
            "evaluator 'tool_call_loops': 'compare_results' must be true or false, "
            f"not {compare_results!r}"
        )


def _calls(frame: TraceFrame, compare_results: bool) -> Calls:
    """Every TOOL span as a call: its key and its result, as codes."""
    tools = frame.tools
    code, keys = _keys(frame)
    repeated = _repeated(code, tools.turn)
    recorded = frame.valid(TOOL_OUTPUT)[tools.position]
    result = None
    if compare_results:
        result = _results(frame, np.flatnonzero(repeated & recorded))
    return Calls(
        turn=tools.turn,
        number=tools.number,
        code=code,
        named=code >= 0,
        keys=keys,
        repeated=repeated,
        result=result,
        recorded=recorded,
    )


def _repeated(code: Ints, turn: Ints) -> Bools:
    """Whether each call's key comes more than once in its turn (calls without a name alike).

    Counted by (turn, key): in a table of bins when there are few enough of them, else over
    the distinct pairs (hashed).
    """
    if not len(code):
        return np.zeros(0, dtype=bool)
    width = int(code.max()) + 2
    pair = turn * width + code + 1
    if (int(turn[-1]) + 1) * width <= 4 * len(code):  # calls are in turn order: the last, largest
        return np.asarray(np.bincount(pair)[pair] >= 2)
    index, _ = encode(pair)
    return np.asarray(np.bincount(index)[index] >= 2)


def _keys(frame: TraceFrame) -> tuple[Ints, Keys]:
    """Each call's key as a code: its tool name and arguments, encoded apart, as one number.

    A call without a tool name has the code -1. Two pairs that join to the same text ("a b"
    and "c", "a" and "b c") are one key: where a tool name holds a space, the pairs made are
    written out and those of the same text take the first one's code. Empty arguments are no
    arguments ("search" and "" join as "search" and null do).
    """
    name, names = _codes_at(frame, TOOL_NAME)
    argument, arguments = _codes_at(frame, TOOL_ARGS)
    keys = Keys(names=names, arguments=arguments)
    empty = pc.index(arguments, "").as_py()
    argument[(argument < 0) | (argument == empty)] = len(arguments)  # no arguments
    code = np.where(name >= 0, name * (len(arguments) + 1) + argument, -1)
    if any(" " in n for n in names.to_pylist()):
        code = _by_text(code, keys)
    return code, keys


def _by_text(code: Ints, keys: Keys) -> Ints:
    """The codes with the keys of the same text made one: the first code of each text."""
    named = code >= 0
    made = np.unique(code[named])
    first: dict[str, int] = {}
    texts = zip(keys.texts(made), made.tolist(), strict=True)
    same = np.asarray([first.setdefault(text, c) for text, c in texts], dtype=np.int64)
    merged = code.copy()
    merged[named] = same[np.searchsorted(made, code[named])]
    return merged


def _codes_at(frame: TraceFrame, column: str) -> tuple[Ints, pa.Array]:
    """A text column at the TOOL spans as codes into its distinct values (-1: null)."""
    codes, distinct = frame.codes(column)
    return codes[frame.tools.position], distinct


def _results(frame: TraceFrame, rows: Ints) -> Ints | None:
    """Each call's result as a code (-1: not compared), for the calls at `rows` only.

    Only calls made more than once in their turn are compared: the others have nothing to be
    compared with, so their results are never read (most calls of most turns). Each distinct
    output is read once. None when there is no result to compare: calls alone decide.
    """
    if not len(rows):
        return None
    result = np.full(len(frame.tools), -1, dtype=np.int64)
    encoded = frame.values(TOOL_OUTPUT, frame.tools.position[rows]).dictionary_encode()
    codes: dict[str, int] = {}
    cleaned = [
        codes.setdefault(_tool_result(o), len(codes)) for o in encoded.dictionary.to_pylist()
    ]
    result[rows] = np.asarray(cleaned, dtype=np.int64)[numpy_ints(encoded.indices)]
    return result


def _tool_result(output: str) -> str:
    """A recorded tool output as the tool returned it, to compare with another.

    Without the harness's notes to the model (`_HARNESS_NOTES` lines at its end), and, for a
    result stored by reference, without the reference's number.
    """
    text = output
    while text.endswith("]"):
        head, newline, last = text.rpartition("\n")
        if not newline or not last.startswith(_HARNESS_NOTES):
            break
        text = head
    if _STORED.match(text):
        text = _REFERENCE.sub("ref", text)
    return text
