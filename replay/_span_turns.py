"""Which turn, and which trial, each span belongs to.

A turn is a trace: its roots (no parent, or one not in the input) and all under them, split by
trial. A span's trial is its own (`metadata`'s `trial`, `metadata.trial`, `plangate.trial`,
`trial`) or its nearest ancestor's. `turn_index` is `plangate.turn_index` where a turn has it,
else the rank of its root's start among its session's turns of the same trial without one
(untimed last, in input order). A session of several trials becomes one per trial,
`<session>/trial-<n>`, whose turns' `task_id` is `<session>#<turn_index>`: repeats of one task,
never one merged turn. `session_id` is a trace's first `session.id`, else
`gen_ai.conversation.id`, else its id.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from datetime import datetime
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


_Unit = tuple[str, int | None]  # the spans of one turn: a trace, and the trial they belong to


def span_turns(spans: list[SpanRecord], trials: list[int | None]) -> list[Turn]:
    """Each span's turn (by position)."""
    traces: dict[str, list[int]] = defaultdict(list)
    for position, span in enumerate(spans):
        traces[span.trace_id].append(position)
    sessions: dict[str, str] = {}
    units: dict[_Unit, list[SpanRecord]] = defaultdict(list)
    inherited: dict[str, list[int | None]] = {}
    for trace_id, positions in traces.items():
        members = [spans[p] for p in positions]
        sessions[trace_id] = _session(trace_id, members)
        inherited[trace_id] = own = _inherited_trials(members, [trials[p] for p in positions])
        if own.count(own[0]) == len(own):  # the usual: one trial (or none), one turn
            units[trace_id, own[0]] = members
            continue
        for span, trial in zip(members, own, strict=True):
            units[trace_id, trial].append(span)
    keys = _keys(_turn_indices(units, sessions), sessions)
    turns = {
        position: keys[trace_id, trial]
        for trace_id, positions in traces.items()
        for position, trial in zip(positions, inherited[trace_id], strict=True)
    }
    return [turns[position] for position in range(len(spans))]


def _session(trace_id: str, spans: list[SpanRecord]) -> str:
    found = (s.attributes.get(key) for key in (SESSION_ID, GenAI.CONVERSATION_ID) for s in spans)
    return next((str(value) for value in found if not is_missing(value) and str(value)), trace_id)


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
    for position, (unit, spans) in enumerate(units.items()):
        found = (as_integer(s.attributes.get(TURN_INDEX), TURN_INDEX, s) for s in spans)
        explicit = next((index for index in found if index is not None), None)
        if explicit is not None:
            turns[unit] = explicit
            continue
        start = _root_start(spans)
        group = (sessions[unit[0]], unit[1])  # the session and trial
        unnumbered[group].append((start is None, start or EPOCH, position, unit))
    for entries in unnumbered.values():
        for rank, entry in enumerate(sorted(entries)):
            turns[entry[3]] = rank
    return turns


def _keys(turns: Mapping[_Unit, int], sessions: Mapping[str, str]) -> dict[_Unit, Turn]:
    """Each turn's key; a session with several trials becomes one session per trial."""
    trials: dict[str, set[int | None]] = defaultdict(set)
    for trace_id, trial in turns:
        trials[sessions[trace_id]].add(trial)
    keys = {}
    for (trace_id, trial), index in turns.items():
        session = sessions[trace_id]
        keys[trace_id, trial] = Turn(session, index)
        if trial is not None and len(trials[session]) > 1:
            own = TRIAL_SESSION.format(session=session, trial=trial)
            keys[trace_id, trial] = Turn(own, index, f"{session}#{index}")
    return keys


def _root_start(spans: list[SpanRecord]) -> datetime | None:
    ids = {span.span_id for span in spans}
    starts = [s.start_time for s in spans if s.start_time and s.parent_span_id not in ids]
    return min(starts) if starts else None
