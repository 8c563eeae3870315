"""`plan_adherence`: did the agent work the way its plan says, and keep the plan honest?

Read from the plan snapshots (the `plan` column: the plan as it stood after the span that
changed it) and the tool calls in order. A call is plan bookkeeping (`PLAN_TOOLS`), control
(`finish`) or work (every other tool). Six components, each a share in [0, 1]:

- tracked work: the share of work calls made while some item was in progress, by the latest
  snapshot before the call. A plan that never shows an item in progress is taken as a
  two-status plan (pending / completed): there a call counts when the plan had an open item;
- one at a time: the share of the turn's snapshots with at most one item in progress;
- worked on: the share of completions with at least one work call between the item going in
  progress (else: the plan change before the completion, else the turn's start) and the
  completion;
- bookkeeping: plan calls per work call; the component is 1 up to `max_bookkeeping_ratio` and
  `max_bookkeeping_ratio / ratio` above it;
- kept: the share of items not dropped without a word (an item that is missing from the turn's
  last snapshot and was never completed, blocked or failed is dropped);
- dependency order: the share of starts and completions of items with `depends_on` made when
  every dependency was completed.

A turn's initial plan is the last snapshot of the session's earlier turns; a plan on an AGENT row
is the turn's end state, not a change, and is not read. Items are matched
across snapshots by text (todo lists number their items by position, so a rewritten list
renumbers them), or by id when the ids are names or items carry `depends_on` (dependency plans).
The score is the mean of the components that apply; the turn passes when the hard rules (one at a
time, worked on, kept, dependency order) hold, bookkeeping is within its limit and the tracked
share is at least `min_tracked_share`.

Every turn is judged at once. A turn without a plan snapshot of its own is "no plan", decided
column-wise with no per-item work; only the turns with plans are read item by item: each distinct
plan text is parsed once (`_plan_items`), the evidence is counted over NumPy arrays
(`_plan_evidence`) and the verdicts are written from templates over columns (`_plan_components`).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from plangate.evaluators._columns import TurnScores, text
from plangate.evaluators._frame import TraceFrame, Turns
from plangate.evaluators._plan_components import Limits, verdicts
from plangate.evaluators._plan_evidence import Calls, Snapshots, tally
from plangate.evaluators._plan_items import Bools, Ints, changes, items_of, parse_entries
from plangate.evaluators._registry import evaluator, number_param
from plangate.evaluators._rubric import RubricSet
from plangate.replay.schema import (
    CONTROL_TOOLS,
    NAME,
    PLAN,
    PLAN_TOOLS,
    SPAN_KIND_CODES,
    TOOL_NAME,
    TOOL_SPAN_PREFIX,
)

AGENT = SPAN_KIND_CODES.index("AGENT")


@evaluator("plan_adherence", version=2)
def plan_adherence(
    frame: TraceFrame,
    rubrics: RubricSet,
    max_bookkeeping_ratio: float = 1.5,
    min_tracked_share: float = 0.5,
) -> TurnScores:
    """Work tracked by the plan, one item at a time, completions earned, nothing dropped.

    Args:
        frame: The prepared trace table.
        rubrics: Rubrics; a turn without a plan fails only when its rubric has
            `plan_expected = true`.
        max_bookkeeping_ratio: Most plan calls per work call before the turn fails.
        min_tracked_share: Least share of work calls made while an item was in progress.

    Returns:
        Every turn's verdict.
    """
    limits = Limits(
        number_param("plan_adherence", "max_bookkeeping_ratio", max_bookkeeping_ratio, low=0),
        number_param("plan_adherence", "min_tracked_share", min_tracked_share, low=0, high=1),
    )
    expected = plan_expected(frame.turns, rubrics)
    session = _sessions(frame.turns)
    snapshots = _snapshots(frame, session)
    if not len(snapshots):
        return verdicts(None, limits, expected)
    entries = parse_entries(snapshots.texts)
    items = items_of(snapshots.text, snapshots.turn, entries)
    calls = _calls(frame, snapshots.turn)
    return verdicts(tally(session, snapshots, calls, items, entries), limits, expected)


def plan_expected(turns: Turns, rubrics: RubricSet) -> Bools:
    """Whether each turn's rubric (its own, else the default) says `plan_expected = true`."""
    default = rubrics.default is not None and rubrics.default.plan_expected is True
    if not rubrics.turns:
        return np.full(len(turns), default, dtype=bool)
    # A turn's key is its session id, NUL and its index: the last NUL splits it unambiguously.
    own = {f"{s}\0{t}": rubric.plan_expected is True for (s, t), rubric in rubrics.turns.items()}
    keys = text(turns.session_id, "\0", turns.turn_index, rows=len(turns))
    found = pc.index_in(keys, value_set=pa.array(list(own), pa.string())).fill_null(-1)
    index = np.asarray(found.to_numpy(zero_copy_only=False), dtype=np.int64)
    return np.array([*own.values(), default], dtype=bool)[index]  # -1, no rubric: the default


# -- the snapshots and the calls ----------------------------------------------------------------


def _snapshots(frame: TraceFrame, session: Ints) -> Snapshots:
    """Every non-AGENT span with a plan, and before each turn's first the session's last plan."""
    position = _planned_positions(frame)
    encoded = frame.values(PLAN, position).dictionary_encode()
    own_text, own_turn = _codes(encoded), frame.turn[position]
    planned = np.unique(own_turn)
    last_text = own_text[np.searchsorted(own_turn, planned, side="right") - 1]
    carries = session[planned[1:]] == session[planned[:-1]]
    carried = planned[1:][carries]
    turn = np.concatenate((own_turn, carried))
    step = np.concatenate((2 * position, 2 * frame.turns.start[carried] - 1))
    text = np.concatenate((own_text, last_text[:-1][carries]))
    order = np.argsort(step, kind="stable")
    turn, step, text = turn[order], step[order], text[order]
    first = changes(turn)
    return Snapshots(
        turn=turn,
        step=step,
        began=2 * frame.turns.start[turn] - 1,
        text=text,
        texts=encoded.dictionary.to_pylist(),
        inherited=order >= len(position),
        previous=np.where(first, -1, np.arange(len(turn)) - 1),
        last=np.roll(first, -1),
    )


def _planned_positions(frame: TraceFrame) -> Ints:
    """The positions of the spans with a plan, AGENT spans aside."""
    column = frame.table.column(PLAN)
    if column.null_count == len(column):
        return np.zeros(0, dtype=np.int64)
    valid = np.asarray(column.is_valid().to_numpy(zero_copy_only=False))
    if frame.order is not None:
        valid = valid[frame.order]
    return np.flatnonzero(valid & (frame.kind != AGENT)).astype(np.int64)


def _calls(frame: TraceFrame, planned: Ints) -> Calls:
    """The tool calls of the turns in `planned`, each bookkeeping, control or work."""
    tools = frame.tools
    wanted = np.zeros(len(frame.turns), dtype=bool)
    wanted[planned] = True
    chosen = wanted[tools.turn]
    position = tools.position[chosen]
    code, names = _tool_codes(frame, position)
    plan = np.array([n in PLAN_TOOLS for n in names], dtype=bool)[code]
    control = np.array([n in CONTROL_TOOLS for n in names], dtype=bool)[code]
    return Calls(
        turn=tools.turn[chosen],
        step=2 * position,
        number=tools.number[chosen] + 1,
        plan=plan,
        work=~plan & ~control,
        tool=code,
        tools=pa.array(names, pa.string()),
    )


def _tool_codes(frame: TraceFrame, position: Ints) -> tuple[Ints, list[str]]:
    """Each call's tool, as a code into the names returned with them.

    The tool is the span's `tool_name`, else its name without the `tool.` prefix (as in
    `TraceFrame.tool_names`); span names are read only where `tool_name` is missing.
    """
    named = frame.values(TOOL_NAME, position).dictionary_encode()
    names: list[str] = named.dictionary.to_pylist()
    code = np.asarray(named.indices.fill_null(-1).to_numpy(zero_copy_only=False), dtype=np.int64)
    missing = np.flatnonzero(code < 0)
    if len(missing):
        spans = frame.values(NAME, position[missing]).dictionary_encode()
        code[missing] = len(names) + _codes(spans)
        prefix = len(TOOL_SPAN_PREFIX)
        names += [
            n[prefix:] if n.startswith(TOOL_SPAN_PREFIX) else n
            for n in spans.dictionary.to_pylist()
        ]
    return code, names


def _sessions(turns: Turns) -> Ints:
    """Each turn's session, numbered from 0 (turns come grouped by session)."""
    ids = turns.session_id
    new = np.ones(len(ids), dtype=bool)
    new[1:] = pc.not_equal(ids[1:], ids[:-1]).to_numpy(zero_copy_only=False)
    return np.cumsum(new) - 1


def _codes(encoded: pa.DictionaryArray) -> Ints:
    return np.asarray(encoded.indices.to_numpy(zero_copy_only=False), dtype=np.int64)
