"""`trajectory_match`'s inputs as codes: tools, each turn's rubric, the rubrics' expected calls.

A tool is a code into the frame's distinct tool names, a call's arguments a code into the
distinct argument texts, a turn's rubric an index into the distinct rubrics naming tools (then
into their shapes: rubrics that expect the same calls alike), and shape r's j-th expected call
the flat index `base[r] + j`. Whether a call fits an expected call is decided in Python once per
distinct (argument check, argument text), each text parsed once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from plangate.evaluators._frame import Ints, TraceFrame, Turns
from plangate.evaluators._rubric import Rubric, RubricSet, ToolExpectation
from plangate.evaluators._trajectory_rows import parse
from plangate.replay.schema import TOOL_NAME

Bools = npt.NDArray[np.bool_]
ORDERS = ("strict", "unordered", "subset", "superset")
"""The rubric orders, by code."""


@dataclass(frozen=True, slots=True, eq=False)
class ToolCodes:
    """Every TOOL span's tool as a code, and whether the turn's sequence keeps it."""

    names: list[str]
    """The distinct tool names, by code."""
    code: Ints
    """Each TOOL span's tool (frame.tools order)."""
    kept: Bools
    """Each TOOL span: compared (its tool is not ignored)."""


def tool_codes(frame: TraceFrame, ignored: frozenset[str]) -> ToolCodes:
    """The frame's TOOL spans' tools as codes; `ignored` tools are not kept."""
    names = frame.values(TOOL_NAME, frame.tools.position)
    if names.null_count:  # some tools are named by their span only
        names = frame.tool_names()
    encoded = names.dictionary_encode()
    distinct = [str(name) for name in encoded.dictionary.to_pylist()]
    code = np.asarray(encoded.indices.to_numpy(zero_copy_only=False), dtype=np.int64)
    dropped = np.array([name in ignored for name in distinct], dtype=bool)
    return ToolCodes(names=distinct, code=code, kept=~dropped[code])


@dataclass(frozen=True, slots=True, eq=False)
class Assignment:
    """Each turn's rubric, as an index into the distinct rubrics that name tools."""

    rubrics: list[Rubric]
    """The distinct rubrics (by identity) with required tools that some turn uses."""
    slot: Ints
    """Per turn: its rubric in `rubrics`; -1 when it has none, or one naming no tools."""


def assign(turns: Turns, rubrics: RubricSet) -> Assignment:
    """Look up every turn's rubric (its own, else the default) column-wise."""
    keys = [key for key in rubrics.turns if isinstance(key[0], str)]
    own = (
        rubrics.turns.values() if len(keys) == len(rubrics.turns) else map(rubrics.turns.get, keys)
    )
    candidates = [rubrics.default, *own]
    ids = np.fromiter(map(id, candidates), dtype=np.uint64, count=len(candidates))
    _, first, inverse = np.unique(ids, return_index=True, return_inverse=True)
    naming = np.array([_names_tools(candidates[i]) for i in first.tolist()], dtype=bool)
    index = np.where(naming[inverse], inverse, -1)  # per candidate: its distinct rubric, or -1
    slot = np.full(len(turns), index[0], dtype=np.int64)
    if keys and len(turns):
        _place(slot, turns, keys, index[1:])
    used = np.unique(slot[slot >= 0])
    renumber = np.full(len(first) + 1, -1, dtype=np.int64)
    renumber[used] = np.arange(len(used))
    chosen = [candidates[first[i]] for i in used.tolist()]
    return Assignment(rubrics=[r for r in chosen if r is not None], slot=renumber[slot])


def _names_tools(rubric: Rubric | None) -> bool:
    return rubric is not None and bool(rubric.required_tools)


def _place(slot: Ints, turns: Turns, keys: Sequence[tuple[str, int]], index: Ints) -> None:
    """Give the turns that have their own rubric (at `keys`) that rubric's `index` (in place)."""
    sessions = pa.array([session for session, _ in keys], pa.string()).dictionary_encode()
    known = sessions.dictionary
    entry_session = np.asarray(sessions.indices, dtype=np.int64)
    turn_session = pc.index_in(turns.session_id, value_set=known).fill_null(-1)
    turn_session_codes = np.asarray(turn_session.to_numpy(zero_copy_only=False), dtype=np.int64)
    entry_turn = np.fromiter((turn for _, turn in keys), dtype=np.int64, count=len(keys))
    low = min(int(entry_turn.min()), int(turns.turn_index.min()))
    width = max(int(entry_turn.max()), int(turns.turn_index.max())) - low + 1
    entry_key = entry_session * width + entry_turn - low
    turn_key = turn_session_codes * width + turns.turn_index - low
    order = np.argsort(entry_key, kind="stable")
    sorted_keys = entry_key[order]
    at = np.minimum(np.searchsorted(sorted_keys, turn_key), len(order) - 1)
    found = (turn_session_codes >= 0) & (sorted_keys[at] == turn_key)
    slot[found] = index[order[at[found]]]


@dataclass(frozen=True, slots=True, eq=False)
class Expectations:
    """The assigned rubrics' expected calls, flattened: shape r's j-th at `base[r] + j`.

    Rubrics that expect the same calls in the same order share a shape (rubrics read from a
    file are equal objects, not one); expected calls that compare the same way (same tool, same
    argument check) share a `check`.
    """

    shape: Ints
    """Per assigned rubric: its shape."""
    rubrics: list[Rubric]
    """Per shape: a rubric of that shape."""
    base: Ints
    """Per shape: its first expected call's flat index."""
    size: Ints
    """Per shape: how many calls it expects."""
    order: Ints
    """Per shape: its order, as a code into `ORDERS`."""
    simple: Bools
    """Per shape: every tool it names is checked one way (a matching is then a count)."""
    check: Ints
    """Per expected call: its argument check, an index into `checks`."""
    group: Ints
    """Per expected call: how many of its shape's calls name its tool, on the first of them;
    0 on the others."""
    checks: list[ToolExpectation]
    """The distinct checks (one expectation standing for all that compare like it)."""
    tool: Ints
    """Per check: its tool's code, -1 when no TOOL span has that tool."""
    compares_arguments: Bools
    """Per check: whether arguments are compared."""
    described: list[str]
    """Per check: the expected call described (`ToolExpectation.describe`)."""


def expectations(rubrics: Sequence[Rubric], names: Sequence[str]) -> Expectations:
    """Flatten the rubrics' expected calls (Python per expected call of each rubric)."""
    shapes: dict[tuple[str, tuple[Any, ...]], int] = {}
    shape = np.empty(len(rubrics), dtype=np.int64)
    for index, rubric in enumerate(rubrics):
        key = (rubric.order, tuple(map(_key, rubric.required_tools)))
        shape[index] = shapes.setdefault(key, len(shapes))
    chosen = [rubrics[i] for i in np.unique(shape, return_index=True)[1].tolist()]
    checks: dict[Any, int] = {}
    items: list[ToolExpectation] = []
    check: list[int] = []
    for (_, keys), rubric in zip(shapes, chosen, strict=True):
        for key, expectation in zip(keys, rubric.required_tools, strict=True):
            if key not in checks:
                checks[key] = len(items)
                items.append(expectation)
            check.append(checks[key])
    size = np.array([len(r.required_tools) for r in chosen], dtype=np.int64)
    tool_code = {name: code for code, name in enumerate(names)}
    return Expectations(
        shape=shape,
        rubrics=chosen,
        base=np.cumsum(size) - size,
        size=size,
        order=np.array([ORDERS.index(r.order) for r in chosen], dtype=np.int64),
        simple=np.array([_simple(keys) for _, keys in shapes], dtype=bool),
        check=np.array(check, dtype=np.int64),
        group=np.array([g for r in chosen for g in _groups(r.required_tools)], dtype=np.int64),
        checks=items,
        tool=np.array([tool_code.get(e.name, -1) for e in items], dtype=np.int64),
        compares_arguments=np.array([_compares(e) for e in items], dtype=bool),
        described=[e.describe() for e in items],
    )


def _compares(expectation: ToolExpectation) -> bool:
    return expectation.arguments is not None and expectation.match != "ignore"


def _key(expectation: ToolExpectation) -> Any:
    """Equal for expectations that accept the same calls and describe themselves alike.

    Arguments count by their `repr`, which tells JSON's values apart (`1`, `1.0`, `True`);
    the same arguments in another key order are another check, which costs time only.
    """
    if not _compares(expectation):
        return (expectation.name,)
    return (expectation.name, expectation.match, repr(expectation.arguments))


def _groups(required: Sequence[ToolExpectation]) -> list[int]:
    counts: dict[str, int] = {}
    for expectation in required:
        counts[expectation.name] = counts.get(expectation.name, 0) + 1
    first: set[str] = set()
    sizes = []
    for expectation in required:
        sizes.append(0 if expectation.name in first else counts[expectation.name])
        first.add(expectation.name)
    return sizes


def _simple(keys: Sequence[Any]) -> bool:
    """Whether each tool among the keys is checked one way."""
    check_of: dict[str, Any] = {}
    return all(check_of.setdefault(key[0], key) == key for key in keys)


class Arguments:
    """The distinct argument texts of the compared calls, each parsed once when first needed."""

    def __init__(self, texts: pa.Array) -> None:
        """Keep the distinct texts (null already replaced by the empty text)."""
        self.texts = texts
        """The distinct texts, by code."""
        self._listed: list[str] | None = None
        self._parsed: dict[int, Mapping[str, Any] | None] = {}

    def __len__(self) -> int:
        return len(self.texts)

    def text(self, code: int) -> str:
        """The text of one code."""
        if self._listed is None:
            self._listed = [str(t) for t in self.texts.to_pylist()]
        return self._listed[code]

    def parsed(self, code: int) -> Mapping[str, Any] | None:
        """The parsed arguments of one code (None: not a JSON object)."""
        if code not in self._parsed:
            self._parsed[code] = parse(self.text(code))
        return self._parsed[code]


def fits(
    table: Expectations, arguments: Arguments, flat: Ints, tool: Ints, argument: Ints
) -> Bools:
    """Whether each call (tool and argument codes) fits the expected call at `flat`, row by row.

    The tool is compared as codes; arguments, where checked, once per distinct (check, text).
    """
    check = table.check[flat]
    fit: Bools = np.asarray(table.tool[check] == tool, dtype=bool)
    needed = np.flatnonzero(fit & table.compares_arguments[check])
    if not len(needed):
        return fit
    texts = len(arguments)
    key = pa.array(check[needed] * texts + argument[needed]).dictionary_encode()
    pairs = np.asarray(key.dictionary.to_numpy(zero_copy_only=False))
    checks, parsed = table.checks, arguments.parsed
    verdicts = np.array(
        [
            checks[c].matches(checks[c].name, parsed(a))
            for c, a in zip((pairs // texts).tolist(), (pairs % texts).tolist(), strict=True)
        ],
        dtype=bool,
    )
    fit[needed] = verdicts[np.asarray(key.indices.to_numpy(zero_copy_only=False))]
    return fit
