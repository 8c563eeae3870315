"""Plan items for `plan_adherence`: each distinct plan text parsed once, items keyed by turn.

A plan text becomes `Entries` (its items' id, text, status and dependencies as codes into one
list of words), once however many snapshots repeat it. A turn's snapshots then become `Items`:
one row per item per snapshot, all NumPy, each with the key that matches it across the turn's
snapshots and the status its key had in the previous snapshot that showed it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

Ints = npt.NDArray[np.int64]
Bools = npt.NDArray[np.bool_]

STATUSES = ("pending", "in_progress", "completed", "blocked", "failed")
"""The statuses the rules read, by code; other statuses get the codes after these."""
PENDING, IN_PROGRESS, COMPLETED, BLOCKED, FAILED = range(len(STATUSES))
NONE = -1
"""The previous status of an item's first snapshot."""
_NUMBER = re.compile(r"\d+")


@dataclass(frozen=True, slots=True, eq=False)
class Entries:
    """The items of every distinct plan text, flattened: text `t` has `start[t]:start[t + 1]`."""

    start: Ints
    ident: Ints
    """The code of each item's `id` as text in `words` ("" when it has none)."""
    text: Ints
    """The code of its `text` (other agents' todo lists say `content`)."""
    status: Ints
    """The code of its status in `statuses`."""
    named: Bools
    """It has dependencies, or an id that is not a number: the turn's items match by id."""
    depends_start: Ints
    """Entry `e`'s dependencies are `depends[depends_start[e]:depends_start[e+1]]`."""
    depends: Ints
    """Dependency ids, as codes in `words`."""
    words: list[str]
    statuses: list[str]

    def name(self, entry: int) -> str:
        """How evidence names an item: its id and quoted text, or the quoted text alone."""
        ident, text = self.words[self.ident[entry]], self.words[self.text[entry]]
        return f"{ident} {text!r}" if ident else repr(text)


def parse_entries(texts: list[str]) -> Entries:
    """The items of each distinct plan text (a text that is not a JSON list has none)."""
    words: dict[str, int] = {"": 0}
    statuses = {status: code for code, status in enumerate(STATUSES)}
    columns: dict[str, list[int]] = {"ident": [], "text": [], "status": [], "named": []}
    start, depends_start, depends = [0], [0], []
    for text in texts:
        for item in _parse_plan(text):
            ident = str(item.get("id", ""))
            needs = _dependencies(item.get("depends_on"))
            columns["ident"].append(words.setdefault(ident, len(words)))
            columns["text"].append(
                words.setdefault(str(item.get("text", item.get("content", ""))), len(words))
            )
            columns["status"].append(
                statuses.setdefault(str(item.get("status", "")), len(statuses))
            )
            columns["named"].append(bool(needs) or (ident != "" and not _NUMBER.fullmatch(ident)))
            depends += [words.setdefault(need, len(words)) for need in needs]
            depends_start.append(len(depends))
        start.append(len(columns["ident"]))
    return Entries(
        start=np.array(start, dtype=np.int64),
        ident=np.array(columns["ident"], dtype=np.int64),
        text=np.array(columns["text"], dtype=np.int64),
        status=np.array(columns["status"], dtype=np.int64),
        named=np.array(columns["named"], dtype=bool),
        depends_start=np.array(depends_start, dtype=np.int64),
        depends=np.array(depends, dtype=np.int64),
        words=list(words),
        statuses=list(statuses),
    )


@dataclass(frozen=True, slots=True, eq=False)
class Items:
    """One row per item per snapshot, sorted by turn, then key (as its text sorts), then snapshot.

    The key of an item is its text, or its id when the turn's items match by id (`Entries.named`),
    then `#` and the number of earlier items of its snapshot with that same text or id: two items
    with the same text stay apart. Rows of one key in one turn are a run (`first` marks each
    run's first row).
    """

    snapshot: Ints
    turn: Ints
    entry: Ints
    status: Ints
    previous: Ints
    """The status of the same key in the turn's previous snapshot that showed it (`NONE`)."""
    first: Bools

    def __len__(self) -> int:
        return len(self.snapshot)


def items_of(text: Ints, turn: Ints, entries: Entries) -> Items:
    """The items of snapshots with these plan texts (codes) and turns, sorted and keyed."""
    snapshot, entry = ranges(entries.start[text], entries.start[text + 1])
    by_id = np.zeros(int(turn.max()) + 1 if len(turn) else 0, dtype=bool)
    by_id[turn[snapshot][entries.named[entry]]] = True
    use_id = by_id[turn[snapshot]] & (entries.ident[entry] != 0)
    base = np.where(use_id, entries.ident[entry], entries.text[entry])
    key = _key_ranks(base, _copies(snapshot, base), entries.words)
    order = np.lexsort((snapshot, key, turn[snapshot]))
    snapshot, entry, key = snapshot[order], entry[order], key[order]
    first = changes(turn[snapshot], key)
    status = entries.status[entry]
    previous = np.concatenate(([NONE], status[:-1]))
    return Items(
        snapshot=snapshot,
        turn=turn[snapshot],
        entry=entry,
        status=status,
        previous=np.where(first, NONE, previous),
        first=first,
    )


def ranges(begin: Ints, end: Ints) -> tuple[Ints, Ints]:
    """Each index in `begin[i]:end[i]`, for every i in turn, with its `i`."""
    counts = end - begin
    owner = np.repeat(np.arange(len(begin), dtype=np.int64), counts)
    offset = np.arange(len(owner), dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)
    return owner, begin[owner] + offset


def run_starts(first: Bools) -> Ints:
    """For each row, the index of its run's first row."""
    return np.maximum.accumulate(np.where(first, np.arange(len(first)), 0))


def _copies(snapshot: Ints, base: Ints) -> Ints:
    """How many earlier items of the same snapshot share each item's text or id."""
    order = np.lexsort((np.arange(len(base)), base, snapshot))
    new = changes(snapshot[order], base[order])
    copies = np.empty(len(base), dtype=np.int64)
    copies[order] = np.arange(len(base)) - run_starts(new)
    return copies


def _key_ranks(base: Ints, copies: Ints, words: list[str]) -> Ints:
    """Each item's key (`<text or id>#<copy>`) as its rank among the keys sorted as text."""
    width = int(copies.max()) + 1 if len(copies) else 1
    pairs, inverse = np.unique(base * width + copies, return_inverse=True)
    keys = [f"{words[p // width]}#{p % width}" for p in pairs.tolist()]
    rank = np.empty(len(keys), dtype=np.int64)
    rank[sorted(range(len(keys)), key=keys.__getitem__)] = np.arange(len(keys))
    return rank[inverse]


def changes(*columns: Ints) -> Bools:
    """Where a row differs from the one before in any column (the first row always does)."""
    size = len(columns[0])
    new = np.zeros(size, dtype=bool)
    if size:
        new[0] = True
        for column in columns:
            new[1:] |= column[1:] != column[:-1]
    return new


def _parse_plan(text: str) -> list[dict[str, Any]]:
    try:
        value = json.loads(text)
    except (TypeError, json.JSONDecodeError, RecursionError):
        return []
    if not isinstance(value, list):
        return []
    return [item for item in value if isinstance(item, dict)]


def _dependencies(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [str(v) for v in value]
    return []
