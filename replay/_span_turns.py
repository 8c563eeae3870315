"""Which turn, and which trial, each span belongs to.

A turn is a trace: its roots (no parent, or one not in the input) and all under them, split by
session and by trial. A trace of one session (`session.id`, else `gen_ai.conversation.id`
where no span has a `session.id`, else the trace's id) is one turn of it, all its spans in it:
the usual. A trace of several, such as a batch of runs under one harness span, is split: a
span is in the session it names; a tool call in its caller's; else a span is in the one its
subtree names, else in its parent's, else in the one its own model calls name (an agent above
a sub-agent's conversation), else in a session named after the trace (a harness span).
A span's trial is its own (`metadata`'s `trial`, `metadata.trial`, `plangate.trial`, `trial`)
or its nearest ancestor's.
`turn_index` is `plangate.turn_index` where a turn has it, else the rank of its root's start
among its session's turns of the same trial without one (untimed last, in input order),
skipping the numbers the others have. A session of several trials becomes one per trial,
`<session>/trial-<n>`, whose turns' `task_id` is `<session>#<turn_index>`: repeats of one task,
never one merged turn.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping
from datetime import datetime
from itertools import count
from typing import NamedTuple

from plangate.harness.semconv import METADATA, SESSION_ID, TRIAL, TURN_INDEX, GenAI
from plangate.replay._spans import (
    EPOCH,
    SpanRecord,
    as_integer,
    first_key,
    is_missing,
    metadata_of,
)

_TRIAL_KEYS = (f"{METADATA}.trial", TRIAL, "trial")  # after `metadata`'s `trial`
TRIAL_SESSION = "{session}/trial-{trial}"
"""The session of one trial, where a session holds several."""


class Turn(NamedTuple):
    """Where a span belongs: its session, turn, and the task of a repeat."""

    session_id: str
    turn_index: int
    task_id: str | None = None  # a repeat's task, where its spans name none


_Unit = tuple[str, int | None]  # the spans of one turn: a part of a trace, and their trial


def span_turns(
    spans: list[SpanRecord], trials: list[int | None], kind: Callable[[SpanRecord], str]
) -> list[Turn]:
    """Each span's turn (by position); `kind` tells a span's kind (`LLM`, `TOOL`, …)."""
    traces: dict[str, list[int]] = defaultdict(list)
    for position, span in enumerate(spans):
        traces[span.trace_id].append(position)
    sessions: dict[str, str] = {}  # each part's session
    units: dict[_Unit, list[SpanRecord]] = defaultdict(list)
    placed: list[_Unit] = [("", None)] * len(spans)
    for trace_id, positions in traces.items():
        members = [spans[p] for p in positions]
        parts = _parts(trace_id, members, kind, sessions)
        own = _inherited_trials(members, [trials[p] for p in positions])
        for position, span, part, trial in zip(positions, members, parts, own, strict=True):
            units[part, trial].append(span)
            placed[position] = part, trial
    keys = _keys(_turn_indices(units, sessions), sessions)
    return [keys[unit] for unit in placed]


def _parts(
    trace_id: str,
    spans: list[SpanRecord],
    kind: Callable[[SpanRecord], str],
    sessions: dict[str, str],
) -> list[str]:
    """Each span's part of its trace (`sessions` gets each part's session)."""
    key = SESSION_ID if any(_text(s.attributes.get(SESSION_ID)) for s in spans) else None
    own = [_text(s.attributes.get(key or GenAI.CONVERSATION_ID)) for s in spans]
    found = dict.fromkeys(session for session in own if session is not None)
    if len(found) <= 1:  # the usual: one session, one part
        sessions[trace_id] = next(iter(found), trace_id)
        return [trace_id] * len(spans)
    parts = []
    for session in _split(spans, own, [kind(span) for span in spans]):
        part = trace_id if session is None else f"{trace_id}\x1f{session}"
        sessions[part] = trace_id if session is None else session
        parts.append(part)
    return parts


_SEVERAL = object()  # a subtree naming more than one session


def _split(spans: list[SpanRecord], own: list[str | None], kinds: list[str]) -> list[str | None]:
    """Each span's session in a trace of several.

    A span's own; else, for a tool call, its caller's (a tool that runs a sub-agent is still
    its caller's call); else the one its subtree names (an agent whose model call names its
    conversation, a case of a batch); else its parent's; else, under none, the one its own
    model calls name, if one (an agent above a sub-agent's conversation, a harness that asks a
    model of its own); else none: a harness span above a batch.
    """
    index = {span.span_id: i for i, span in enumerate(spans)}
    parents = [index.get(span.parent_span_id or "") for span in spans]
    children: dict[int, list[int]] = defaultdict(list)
    for i, parent in enumerate(parents):
        if parent is not None:
            children[parent].append(i)
    order = _top_down(parents, children)
    below: list[object] = list(own)  # the sessions a span's subtree names: None, one, or several
    for i in reversed(order):
        for child in children[i]:
            below[i] = _joined(below[i], below[child])
    sessions: list[str | None] = [None] * len(spans)
    for i in order:
        parent, mine = parents[i], below[i]
        inherited = None if parent is None else sessions[parent]
        if own[i] or (kinds[i] == "TOOL" and inherited):
            sessions[i] = own[i] or inherited
        elif isinstance(mine, str):
            sessions[i] = mine
        elif inherited:
            sessions[i] = inherited
        else:
            named = {own[child] for child in children[i] if kinds[child] == "LLM"} - {None}
            sessions[i] = named.pop() if len(named) == 1 else None
    return sessions


def _top_down(parents: list[int | None], children: Mapping[int, list[int]]) -> list[int]:
    """Every span once, parents before children (a cycle is walked from its first span)."""
    order, seen = [], [False] * len(parents)
    roots = [i for i, parent in enumerate(parents) if parent is None]
    for start in (*roots, *range(len(parents))):
        stack = [] if seen[start] else [start]
        seen[start] = True
        while stack:
            order.append(i := stack.pop())
            for child in children[i]:
                if not seen[child]:
                    seen[child] = True
                    stack.append(child)
    return order


def _joined(a: object, b: object) -> object:
    return a if b is None or a == b else b if a is None else _SEVERAL


def _text(value: object) -> str | None:
    return None if is_missing(value) or not str(value) else str(value)


def span_trial(span: SpanRecord) -> int | None:
    """The span's own trial: `metadata`'s `trial`, else the first plain trial attribute."""
    attributes = span.attributes
    value = metadata_of(attributes[METADATA]).get("trial") if METADATA in attributes else None
    if not is_missing(value):
        return as_integer(value, "metadata.trial", span)
    key = first_key(attributes, _TRIAL_KEYS)
    return None if key is None else as_integer(attributes[key], key, span)


def _inherited_trials(spans: list[SpanRecord], own: list[int | None]) -> list[int | None]:
    """Each span's trial: its own, else its nearest ancestor's (in the same trace)."""
    if own.count(None) == len(own):
        return own
    parents = {span.span_id: span.parent_span_id for span in spans}
    roots = [i for i, span in enumerate(spans) if span.parent_span_id not in parents]
    if len(roots) == 1 and own.count(None) == len(own) - 1 and own[roots[0]] is not None:
        return [own[roots[0]]] * len(own)  # the usual: the root alone says
    known: dict[str, int | None] = {}
    known.update((s.span_id, t) for s, t in zip(spans, own, strict=True) if t is not None)
    trials = []
    for span in spans:
        path: list[str] = []  # walk up to a known trial, and remember it on the way
        current: str | None = span.span_id
        while current in parents and current not in known and len(path) <= len(parents):
            path.append(current)
            current = parents[current]
        trial = known.get(current) if current is not None else None
        known.update(dict.fromkeys(path, trial))
        trials.append(trial)
    return trials


def _turn_indices(
    units: Mapping[_Unit, list[SpanRecord]], sessions: Mapping[str, str]
) -> dict[_Unit, int]:
    """Each turn's index: its own attribute, else its rank in the session's trial by start."""
    turns: dict[_Unit, int] = {}
    unnumbered: dict[_Unit, list[tuple[bool, datetime, int, _Unit]]] = defaultdict(list)
    taken: dict[_Unit, set[int]] = defaultdict(set)
    for position, (unit, spans) in enumerate(units.items()):
        group = (sessions[unit[0]], unit[1])  # the session and trial
        found = (as_integer(s.attributes.get(TURN_INDEX), TURN_INDEX, s) for s in spans)
        explicit = next((index for index in found if index is not None), None)
        if explicit is not None:
            turns[unit] = explicit
            taken[group].add(explicit)
            continue
        start = _root_start(spans)
        unnumbered[group].append((start is None, start or EPOCH, position, unit))
    for group, entries in unnumbered.items():
        free = (index for index in count() if index not in taken[group])
        for entry, index in zip(sorted(entries), free, strict=False):  # free never ends
            turns[entry[3]] = index
    return turns


def _keys(turns: Mapping[_Unit, int], sessions: Mapping[str, str]) -> dict[_Unit, Turn]:
    """Each turn's key; a session with several trials becomes one session per trial."""
    trials: dict[str, set[int | None]] = defaultdict(set)
    for part, trial in turns:
        trials[sessions[part]].add(trial)
    keys = {}
    for (part, trial), index in turns.items():
        session = sessions[part]
        keys[part, trial] = Turn(session, index)
        if trial is not None and len(trials[session]) > 1:
            own = TRIAL_SESSION.format(session=session, trial=trial)
            keys[part, trial] = Turn(own, index, f"{session}#{index}")
    return keys


def _root_start(spans: list[SpanRecord]) -> datetime | None:
    ids = {span.span_id for span in spans}
    starts = [s.start_time for s in spans if s.start_time and s.parent_span_id not in ids]
    return min(starts) if starts else None
