"""`task_completion`'s rubric checks as columns.

Each turn gets its rubric (its own, else the default) by code, and each rubric's checks are
listed once. Every (turn, check) pair is an instance; the instances of one kind of check are
judged together: calls counted by binary search over the tool spans sorted by (turn, tool), plan
items looked up per distinct (item, plan), and what only Python can judge (a call's arguments,
an answer) once per distinct (check, text). Check number k of every rubric makes one column, so
a turn's failures keep its rubric's order.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from plangate.evaluators._frame import Ints, TraceFrame
from plangate.evaluators._rubric import AnswerCheck, Rubric, RubricSet, ToolExpectation
from plangate.evaluators._task_completion_evidence import Check, Flags, Plans, agent_values
from plangate.replay.schema import OUTPUT_VALUE, TOOL_ARGS, TOOL_NAME

Verdict = tuple[Flags, list[str]]
"""Whether each instance passes, and the failures' texts in instance order."""
Texts = npt.NDArray[np.object_]
"""Python strings (or None), one per instance."""
KINDS = ("plan_expected", "required_tools", "forbidden_tools", "required_plan_items", "answer")
"""The rubric's checks, in the order a turn's failures are told."""


@dataclass(frozen=True, slots=True, eq=False)
class Listed:
    """The checks of some rubrics, each rubric's in order."""

    start: Ints
    """Each rubric's first check."""
    count: Ints
    """How many checks each rubric has."""
    kind: Ints
    """Each check's kind, an index into `KINDS`."""
    number: Ints
    """Each check's place in `values` of its kind."""
    values: tuple[list[Any], ...]
    """By kind: what each check expects (a flag, a `ToolExpectation`, a name, a text, a check)."""


def rubric_checks(
    frame: TraceFrame, rubrics: RubricSet, plans: Plans, judged: Flags
) -> list[Check]:
    """The rubrics' checks of the `judged` turns, one column per place in a rubric's list."""
    if rubrics.default is None and not rubrics.turns:
        return []
    chosen, code = rubric_codes(frame, rubrics)
    listed = listing(chosen)
    turns = np.flatnonzero(judged & (code >= 0))
    count = listed.count[code[turns]]
    turn = np.repeat(turns, count)
    place = _offsets(count)
    check = np.repeat(listed.start[code[turns]], count) + place
    ok, messages = _judge(_Evidence(frame, plans), listed, check, turn)
    return [_column(len(code), turn, ok, messages, place == p) for p in range(_places(place))]


def listing(chosen: Sequence[Rubric]) -> Listed:
    """The checks of each rubric, in the order its failures are told."""
    kinds: list[int] = []
    numbers: list[int] = []
    values: tuple[list[Any], ...] = tuple([] for _ in KINDS)
    start, count = [], []
    for rubric in chosen:
        own: list[tuple[int, Any]] = []
        own += [(0, rubric.plan_expected)] if rubric.plan_expected is not None else []
        own += [(1, tool) for tool in rubric.required_tools]
        own += [(2, name) for name in rubric.forbidden_tools]
        own += [(3, text) for text in rubric.required_plan_items]
        own += [(4, answer) for answer in rubric.answer]
        start.append(len(kinds))
        count.append(len(own))
        for kind, value in own:
            kinds.append(kind)
            numbers.append(len(values[kind]))
            values[kind].append(value)
    return Listed(_ints(start), _ints(count), _ints(kinds), _ints(numbers), values)


def rubric_codes(frame: TraceFrame, rubrics: RubricSet) -> tuple[list[Rubric], Ints]:
    """The rubrics in use, and each turn's one by index (-1: none), as `RubricSet.lookup`."""
    chosen: list[Rubric] = []
    code = np.full(len(frame.turns), -1, dtype=np.int64)
    if rubrics.default is not None:
        chosen.append(rubrics.default)
        code[:] = 0
    if rubrics.turns:
        turn = _turn_numbers(frame, list(rubrics.turns))
        found = turn >= 0
        code[turn[found]] = len(chosen) + np.flatnonzero(found)
        chosen.extend(rubrics.turns.values())
    return chosen, code


def _turn_numbers(frame: TraceFrame, keys: list[tuple[str, int]]) -> Ints:
    """The turn number of each (session_id, turn_index), -1 where the frame has no such turn."""
    if not len(frame.turns):
        return np.full(len(keys), -1, dtype=np.int64)
    sessions = frame.turns.session_id.dictionary_encode()
    # Turns are sorted by session, so codes (by first appearance) rise with them: keys sort.
    session = np.asarray(sessions.indices.to_numpy(zero_copy_only=False), dtype=np.int64)
    ordered = (session << 32) + frame.turns.turn_index + 2**31
    asked = pc.index_in(pa.array([s for s, _ in keys], pa.string()), value_set=sessions.dictionary)
    known = np.asarray(asked.fill_null(-1).to_numpy(zero_copy_only=False), dtype=np.int64)
    inside = np.array([-(2**31) <= t < 2**31 for _, t in keys], dtype=bool)
    index = np.array([t if -(2**31) <= t < 2**31 else 0 for _, t in keys], dtype=np.int64)
    wanted = (known << 32) + index + 2**31
    place = np.minimum(np.searchsorted(ordered, wanted), len(ordered) - 1)
    hit = inside & (known >= 0) & (ordered[place] == wanted)
    return np.where(hit, place, -1).astype(np.int64)


def _judge(evidence: _Evidence, listed: Listed, check: Ints, turn: Ints) -> tuple[Flags, Texts]:
    """Every instance judged, kind by kind: passed, and what failed (None where it passed)."""
    ok = np.ones(len(check), dtype=bool)
    messages = np.full(len(check), None, dtype=object)
    kind = listed.kind[check]
    judges: tuple[Callable[[list[Any], Ints, Ints], Verdict], ...] = (
        evidence.planned, evidence.required, evidence.forbidden, evidence.plan_item,
        evidence.answer,
    )  # fmt: skip
    for index, judge in enumerate(judges):
        at = np.flatnonzero(kind == index)
        if len(at):
            passed, told = judge(listed.values[index], listed.number[check[at]], turn[at])
            ok[at] = passed
            messages[at[~passed]] = told
    return ok, messages


def _column(rows: int, turn: Ints, ok: Flags, messages: Texts, here: Flags) -> Check:
    """The check at one place of every rubric, as a column over the turns."""
    applied = np.zeros(rows, dtype=bool)
    applied[turn[here]] = True
    failing = np.flatnonzero(here & ~ok)
    failed = np.zeros(rows, dtype=bool)
    failed[turn[failing]] = True
    return Check(applied, failed, pa.array(list(messages[failing]), pa.string()))


def _places(place: Ints) -> int:
    return int(place.max()) + 1 if len(place) else 0


class _Evidence:
    """What rubric checks read of a frame, each read when first asked for."""

    def __init__(self, frame: TraceFrame, plans: Plans) -> None:
        self.frame = frame
        self.plans = plans
        self._arguments: dict[int, Mapping[str, Any] | None] = {}

    @cached_property
    def names(self) -> tuple[Ints, dict[str, int]]:
        """Each tool span's `tool_name` by code ("None" for none), and the codes by name."""
        names = self.frame.values(TOOL_NAME, self.frame.tools.position).fill_null("None")
        encoded = names.dictionary_encode()
        codes = np.asarray(encoded.indices.to_numpy(zero_copy_only=False), dtype=np.int64)
        return codes, {n: i for i, n in enumerate(encoded.dictionary.to_pylist())}

    @cached_property
    def by_name(self) -> tuple[Ints, Ints]:
        """The tool spans sorted by (turn, tool): their keys, and their numbers."""
        codes, known = self.names
        key = self.frame.tools.turn * (len(known) + 1) + codes
        order = np.argsort(key, kind="stable")
        return key[order], order.astype(np.int64)

    @cached_property
    def argument_texts(self) -> tuple[Ints, list[str | None]]:
        """Each tool span's arguments by code, and the distinct texts (the last: none)."""
        return _encoded(self.frame.values(TOOL_ARGS, self.frame.tools.position))

    @cached_property
    def answers(self) -> tuple[Ints, list[str | None]]:
        """Each turn's answer by code, and the distinct answers (the last: none)."""
        return _encoded(agent_values(self.frame, OUTPUT_VALUE))

    def planned(self, values: list[bool], number: Ints, turns: Ints) -> Verdict:
        """`plan_expected`: a plan with items was made (True), or none was (False)."""
        expected = np.array(values, dtype=bool)[number]
        items = self.plans.items[self.plans.code[turns]]
        ok = np.where(expected, items > 0, items == 0)
        told = [
            "a plan was expected but none was made"
            if wanted
            else f"planned a request that needed no plan ({n} items)"
            for wanted, n in zip(expected[~ok], items[~ok], strict=True)
        ]
        return ok, told

    def required(self, values: list[ToolExpectation], number: Ints, turns: Ints) -> Verdict:
        """A required call: some call of the turn matches it."""
        first, end = self._calls([t.name for t in values], number, turns)
        ok = end > first
        compared = [t.arguments is not None and t.match != "ignore" for t in values]
        rows = np.flatnonzero(np.array(compared, dtype=bool)[number] & ok)
        if len(rows):
            ok[rows] = self._matching(values, number[rows], first[rows], end[rows])
        return ok, [f"required call {values[n].describe()} was never made" for n in number[~ok]]

    def forbidden(self, values: list[str], number: Ints, turns: Ints) -> Verdict:
        """A forbidden tool: never called."""
        first, end = self._calls(values, number, turns)
        count = end - first
        ok = count == 0
        told = [
            f"called forbidden tool {values[n]} ({c} times)"
            for n, c in zip(number[~ok], count[~ok], strict=True)
        ]
        return ok, told

    def plan_item(self, values: list[str], number: Ints, turns: Ints) -> Verdict:
        """A required plan item: a completed or blocked item's text contains it."""
        plans = self.plans
        distinct, inverse = np.unique(
            number * len(plans.items) + plans.code[turns], return_inverse=True
        )
        found = [
            any(values[n].lower() in c for c in plans.closed[p])
            for n, p in (divmod(int(pair), len(plans.items)) for pair in distinct)
        ]
        ok = np.array(found, dtype=bool)[inverse]
        return ok, [f"plan item {values[n]!r} was not completed" for n in number[~ok]]

    def answer(self, values: list[AnswerCheck], number: Ints, turns: Ints) -> Verdict:
        """An answer check, on the turn's answer (its AGENT span's output; none: "")."""
        codes, texts = self.answers
        distinct, inverse = np.unique(number * len(texts) + codes[turns], return_inverse=True)
        problems = [
            values[n].check(texts[a] or "")
            for n, a in (divmod(int(pair), len(texts)) for pair in distinct)
        ]
        ok = np.array([p is None for p in problems], dtype=bool)[inverse]
        return ok, [problems[i] or "" for i in inverse[~ok]]

    def _calls(self, names: list[str], number: Ints, turns: Ints) -> tuple[Ints, Ints]:
        """Where each instance's calls (of its tool, in its turn) start and end in `by_name`."""
        _, known = self.names
        code = np.array([known.get(n, len(known)) for n in names], dtype=np.int64)[number]
        keys, _ = self.by_name
        wanted = turns * (len(known) + 1) + code
        return np.searchsorted(keys, wanted, "left"), np.searchsorted(keys, wanted, "right")

    def _matching(
        self, values: list[ToolExpectation], number: Ints, first: Ints, end: Ints
    ) -> Flags:
        """Whether some call in each range has the arguments its expectation asks for."""
        count = end - first
        owner = np.repeat(np.arange(len(number), dtype=np.int64), count)
        codes, texts = self.argument_texts
        spans = self.by_name[1][np.repeat(first, count) + _offsets(count)]
        distinct, inverse = np.unique(
            number[owner] * len(texts) + codes[spans], return_inverse=True
        )
        hit = [
            values[n].matches(values[n].name, self._parsed(a, texts))
            for n, a in (divmod(int(pair), len(texts)) for pair in distinct)
        ]
        matched = np.array(hit, dtype=bool)[inverse]
        return np.bincount(owner[matched], minlength=len(number)) > 0

    def _parsed(self, code: int, texts: list[str | None]) -> Mapping[str, Any] | None:
        if code not in self._arguments:
            self._arguments[code] = _parse(texts[code])
        return self._arguments[code]


def _offsets(count: Ints) -> Ints:
    """0, 1, …, count - 1 for each count, one after another."""
    total = int(count.sum())
    return np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(count) - count, count)


def _ints(values: Sequence[int]) -> Ints:
    return np.array(values, dtype=np.int64)


def _encoded(values: pa.Array) -> tuple[Ints, list[str | None]]:
    """Codes into the distinct values, the last code standing for null."""
    encoded = values.dictionary_encode()
    texts: list[str | None] = encoded.dictionary.to_pylist()
    codes = encoded.indices.fill_null(len(texts)).to_numpy(zero_copy_only=False)
    return np.asarray(codes, dtype=np.int64), [*texts, None]


def _parse(arguments: str | None) -> Mapping[str, Any] | None:
    if arguments is None:
        return None
    try:
        value = json.loads(arguments)
    except (TypeError, json.JSONDecodeError, RecursionError):
        return None
    return value if isinstance(value, dict) else None
