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
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pandas as pd

from plangate.evaluators._frame import TraceFrame
from plangate.evaluators._plan_components import Limits, verdict
from plangate.evaluators._registry import evaluator
from plangate.evaluators._rubric import RubricSet
from plangate.evaluators.scores import RESULT_COLUMNS, TURN_KEY
from plangate.replay.schema import (
    CONTROL_TOOLS,
    PLAN,
    PLAN_TOOLS,
    SESSION_ID,
    SPAN_KIND,
)

CLOSED = ("completed", "blocked", "failed")
"""Statuses that say what became of an item."""

_STEP = ["turn", "seq"]


@evaluator("plan_adherence", version=2)
def plan_adherence(
    frame: TraceFrame,
    rubrics: RubricSet,
    max_bookkeeping_ratio: float = 1.5,
    min_tracked_share: float = 0.5,
) -> pd.DataFrame:
    """Work tracked by the plan, one item at a time, completions earned, nothing dropped.

    Args:
        frame: The prepared trace table.
        rubrics: Rubrics; a turn without a plan fails only when its rubric has
            `plan_expected = true`.
        max_bookkeeping_ratio: Most plan calls per work call before the turn fails.
        min_tracked_share: Least share of work calls made while an item was in progress.

    Returns:
        One row per turn.
    """
    turns = frame.turn_frame[TURN_KEY].reset_index(drop=True)
    calls = _calls(frame, turns)
    snaps = _snapshots(frame, turns, calls)
    items = _items(snaps)
    summary = pd.concat(
        [
            _tracking(calls, snaps, items, turns),
            _one_at_a_time(snaps, items),
            _worked_on(calls, snaps, items),
            _bookkeeping(calls),
            _kept(snaps, items),
            _dependency_order(snaps, items),
        ],
        axis=1,
    ).reindex(turns.index)
    limits = Limits(max_bookkeeping_ratio, min_tracked_share)
    rows = []
    for turn, record in zip(turns.itertuples(index=False), summary.to_dict("records"), strict=True):
        key = (str(turn.session_id), int(turn.turn_index))
        rubric = rubrics.lookup(*key)
        expected = rubric is not None and rubric.plan_expected is True
        rows.append(verdict(key, record, limits, expected))
    return pd.DataFrame(rows, columns=RESULT_COLUMNS)


# -- the frames --------------------------------------------------------------------------------


def _calls(frame: TraceFrame, turns: pd.DataFrame) -> pd.DataFrame:
    """Tool calls in order: turn id, seq, call number, tool, kind, work calls so far."""
    tools = frame.tool_frame
    calls = pd.DataFrame(
        {
            "turn": _turn_ids(tools, turns),
            "seq": tools["seq"].to_numpy("int64"),
            "call": tools["call"].to_numpy("int64") + 1,
            "tool": tools["tool"].to_numpy(object),
        }
    )
    calls["plan"] = calls["tool"].isin(PLAN_TOOLS)
    calls["work"] = ~calls["plan"] & ~calls["tool"].isin(CONTROL_TOOLS)
    calls["work_so_far"] = calls.groupby("turn")["work"].cumsum().astype("int64")
    return calls.sort_values("seq", kind="stable").reset_index(drop=True)


def _snapshots(frame: TraceFrame, turns: pd.DataFrame, calls: pd.DataFrame) -> pd.DataFrame:
    """Plan snapshots in order; a turn's initial plan (from earlier turns) has seq -1."""
    spans = frame.span_frame
    rows = spans[spans[PLAN].notna() & (spans[SPAN_KIND] != "AGENT")]
    own = pd.DataFrame(
        {
            "turn": _turn_ids(rows, turns),
            "seq": rows["seq"].to_numpy("int64"),
            "plan": rows[PLAN].astype(str).to_numpy(object),
            "inherited": False,
        }
    )
    last = own.groupby("turn")["plan"].last().reindex(turns.index)
    carried = last.groupby(turns[SESSION_ID].to_numpy(object)).shift(1)
    carried = carried.groupby(turns[SESSION_ID].to_numpy(object)).ffill()
    carried = carried[carried.notna() & carried.index.isin(own["turn"])]
    initial = pd.DataFrame(
        {"turn": carried.index, "seq": -1, "plan": carried.to_numpy(object), "inherited": True}
    )
    snaps = pd.concat([initial, own], ignore_index=True).astype({"turn": "int64", "seq": "int64"})
    snaps = snaps.sort_values(_STEP, kind="stable").reset_index(drop=True)
    snaps["snap"] = snaps.index
    snaps["before"] = snaps.groupby("turn")["seq"].shift(1).fillna(-1).astype("int64")
    snaps["after_call"] = _calls_up_to(snaps, calls)
    return snaps


def _calls_up_to(snaps: pd.DataFrame, calls: pd.DataFrame) -> Any:
    """For each snapshot, the number of the last tool call at or before it (0: none)."""
    joined = pd.merge_asof(
        snaps[_STEP].reset_index().sort_values("seq"), calls[[*_STEP, "call"]], on="seq", by="turn"
    ).set_index("index")
    return joined["call"].reindex(snaps.index).fillna(0).astype("int64").to_numpy()


def _items(snaps: pd.DataFrame) -> pd.DataFrame:
    """One row per item per snapshot, with its key, previous status and where it stood."""
    parsed = [_parse_plan(text) for text in snaps["plan"]]
    counts = np.array([len(p) for p in parsed], dtype="int64")
    flat = [item for plan in parsed for item in plan]
    items = snaps.loc[np.repeat(snaps.index.to_numpy(), counts), [*_STEP, "snap", "inherited"]]
    items = items.reset_index(drop=True)
    ids = [str(i.get("id", "")) for i in flat]
    # Other agents' todo lists say `content` where ours say `text`.
    texts = [str(i.get("text", i.get("content", ""))) for i in flat]
    names = [f"{i} {t!r}" if i else repr(t) for i, t in zip(ids, texts, strict=True)]
    items["id"] = pd.Series(ids, dtype=object)
    items["text"] = pd.Series(texts, dtype=object)
    items["name"] = pd.Series(names, dtype=object)
    items["status"] = pd.Series([str(i.get("status", "")) for i in flat], dtype=object)
    items["depends_on"] = pd.Series(
        [_dependencies(i.get("depends_on")) for i in flat], dtype=object
    )
    has_id = items["id"] != ""
    named = items["depends_on"].map(bool) | (has_id & ~items["id"].str.fullmatch(r"\d+"))
    by_id = named.groupby(items["turn"]).transform("any").astype(bool) & has_id
    base = pd.Series(np.where(by_id, items["id"], items["text"]), index=items.index, dtype=object)
    # Two items with the same text in one list stay apart: the n-th copy matches the n-th copy.
    copy = base.groupby([items["snap"], base]).cumcount().astype(str)
    items["key"] = base + "#" + copy
    items = items.sort_values(["turn", "key", "seq"], kind="stable").reset_index(drop=True)
    previous = items.groupby(["turn", "key"])["status"].shift(1)
    items["previous"] = previous.fillna("").astype(str)
    return items


# -- the components ----------------------------------------------------------------------------


def _tracking(
    calls: pd.DataFrame, snaps: pd.DataFrame, items: pd.DataFrame, turns: pd.DataFrame
) -> pd.DataFrame:
    """(a) Work calls made while an item was in progress (two-status plans: while one was open)."""
    states = items.assign(
        active=items["status"] == "in_progress",
        open=items["status"].isin(("pending", "in_progress")),
    )
    per_snap = states.groupby("snap")[["active", "open"]].any()
    snap_state = snaps[_STEP].join(per_snap).fillna({"active": False, "open": False})
    four = _four_status(items, turns)
    work = calls[calls["work"]]
    joined = pd.merge_asof(
        work, snap_state.sort_values("seq"), on="seq", by="turn", allow_exact_matches=False
    )
    four_status = joined["turn"].map(four).fillna(False).astype(bool)
    tracked = np.where(four_status, joined["active"], joined["open"])
    joined["tracked"] = pd.Series(tracked, index=joined.index).fillna(False).astype(bool)
    joined["evidence"] = "call " + joined["call"].astype(str) + " " + joined["tool"]
    untracked = joined[~joined["tracked"]].groupby("turn")["evidence"].agg(list)
    return pd.DataFrame(
        {
            "work_calls": joined.groupby("turn").size(),
            "tracked_calls": joined.groupby("turn")["tracked"].sum(),
            "untracked": untracked,
            "four_status": four,
        }
    )


def _one_at_a_time(snaps: pd.DataFrame, items: pd.DataFrame) -> pd.DataFrame:
    """(b) Snapshots with more than one item in progress."""
    own = snaps[~snaps["inherited"].astype(bool)]
    active = items[(items["status"] == "in_progress") & ~items["inherited"].astype(bool)]
    shown = active["id"].where(active["id"] != "", active["text"])
    per_snap = shown.groupby(active["snap"]).agg(list)
    counts = per_snap.map(len).reindex(own.index, fill_value=0)
    several = own[counts > 1].assign(ids=per_snap)
    several["evidence"] = [
        f"after call {after}: items {', '.join(ids)} in progress"
        for after, ids in zip(several["after_call"], several["ids"], strict=True)
    ]
    return pd.DataFrame(
        {
            "snapshots": own.groupby("turn").size(),
            "max_in_progress": counts.groupby(own["turn"]).max(),
            "several_active": several.groupby("turn")["evidence"].agg(list),
        }
    )


def _worked_on(calls: pd.DataFrame, snaps: pd.DataFrame, items: pd.DataFrame) -> pd.DataFrame:
    """(c) Completions with at least one work call since the item went in progress."""
    inherited = items["inherited"].astype(bool)
    entered = (items["status"] == "in_progress") & (
        (items["previous"] != "in_progress") | inherited
    )
    since = items["seq"].where(entered).groupby([items["turn"], items["key"]]).ffill()
    done = (items["status"] == "completed") & (items["previous"] != "completed") & ~inherited
    events = items[done].assign(active_since=since[done])
    events = events.merge(snaps[["snap", "before", "after_call"]], on="snap", how="left")
    from_start = events["previous"] == "in_progress"
    start = np.where(from_start, events["active_since"], events["before"])
    events["start"] = pd.Series(start, index=events.index).fillna(-1).astype("int64")
    events["worked"] = _work_up_to(events, "seq", calls) - _work_up_to(events, "start", calls)
    events["started_at"] = _calls_at(events, "start", snaps)
    lazy = events[events["worked"] == 0]
    evidence = [
        f"item {n} completed at call {c} with no work call {_since(s, p)}"
        for n, c, s, p in zip(
            lazy["name"], lazy["after_call"], lazy["started_at"], lazy["previous"], strict=True
        )
    ]  # fmt: skip
    return pd.DataFrame(
        {
            "completions": events.groupby("turn").size(),
            "unworked": pd.Series(evidence, index=lazy["turn"], dtype=object)
            .groupby(level=0)
            .agg(list),
        }
    )


def _bookkeeping(calls: pd.DataFrame) -> pd.DataFrame:
    """(d) Plan calls per turn (work calls are counted by `_tracking`)."""
    return pd.DataFrame({"plan_calls": calls.groupby("turn")["plan"].sum()})


def _kept(snaps: pd.DataFrame, items: pd.DataFrame) -> pd.DataFrame:
    """(e) Items missing from the turn's last snapshot that were never completed/blocked/failed."""
    last_snap = snaps.groupby("turn")["snap"].max()
    flags = items.assign(
        in_last=items["snap"] == items["turn"].map(last_snap),
        closed=items["status"].isin(CLOSED),
        own=~items["inherited"].astype(bool),
    )
    per_item = flags.groupby(["turn", "key"]).agg(
        in_last=("in_last", "any"),
        closed=("closed", "any"),
        own=("own", "any"),
        name=("name", "last"),
        status=("status", "last"),
    )
    # Items closed in an earlier turn and not mentioned in this one are not this turn's items.
    per_item = per_item[per_item["own"] | ~per_item["closed"]]
    dropped = per_item[~per_item["in_last"] & ~per_item["closed"]]
    evidence = [f"{n} (last {s})" for n, s in zip(dropped["name"], dropped["status"], strict=True)]
    turns = dropped.index.get_level_values("turn")
    return pd.DataFrame(
        {
            "items": per_item.groupby(level="turn").size(),
            "dropped": pd.Series(evidence, index=turns, dtype=object).groupby(level=0).agg(list),
        }
    )


def _dependency_order(snaps: pd.DataFrame, items: pd.DataFrame) -> pd.DataFrame:
    """(f) Starts and completions of items with dependencies, made before those completed."""
    inherited = items["inherited"].astype(bool)
    started = (items["status"] == "in_progress") & (items["previous"] != "in_progress")
    done = (items["status"] == "completed") & (items["previous"] != "completed")
    checked = items[(started | done) & ~inherited & items["depends_on"].map(bool)]
    checked = checked.assign(
        event=np.where(checked["status"] == "completed", "completed", "started"),
        after_call=snaps["after_call"].reindex(checked["snap"]).to_numpy(),
    )
    needs = checked.explode("depends_on").rename(columns={"depends_on": "dependency"})
    status = items.drop_duplicates(["snap", "id"]).set_index(["snap", "id"])["status"]
    lookup = pd.MultiIndex.from_arrays([needs["snap"], needs["dependency"]])
    needs["dependency_status"] = status.reindex(lookup).fillna("missing").to_numpy(object)
    unmet = needs[needs["dependency_status"] != "completed"]
    unmet = unmet.assign(need=unmet["dependency"] + " (" + unmet["dependency_status"] + ")")
    grouped = unmet.groupby(level=0).agg(
        turn=("turn", "first"),
        id=("id", "first"),
        event=("event", "first"),
        after_call=("after_call", "first"),
        needs=("need", list),
    )
    evidence = [
        f"item {i} {e} at call {c} before {', '.join(n)}"
        for i, e, c, n in zip(
            grouped["id"], grouped["event"], grouped["after_call"], grouped["needs"], strict=True
        )
    ]
    return pd.DataFrame(
        {
            "dependency_checks": checked.groupby("turn").size(),
            "out_of_order": pd.Series(evidence, index=grouped["turn"], dtype=object)
            .groupby(level=0)
            .agg(list),
        }
    )


# -- helpers for the frames --------------------------------------------------------------------


def _turn_ids(rows: pd.DataFrame, turns: pd.DataFrame) -> Any:
    keys = turns.reset_index().rename(columns={"index": "turn"})
    return rows[TURN_KEY].merge(keys, on=TURN_KEY, how="left")["turn"].to_numpy("int64")


def _four_status(items: pd.DataFrame, turns: pd.DataFrame) -> pd.Series:
    """Per turn: whether its session's plans ever show an item in progress (four statuses)."""
    active = (items["status"] == "in_progress").groupby(items["turn"]).any()
    active = active.reindex(turns.index, fill_value=False).astype(bool)
    return active.groupby(turns[SESSION_ID].to_numpy(object)).transform("any").astype(bool)


def _work_up_to(events: pd.DataFrame, column: str, calls: pd.DataFrame) -> Any:
    """Work calls made at or before each event's `column` step."""
    left = pd.DataFrame({"turn": events["turn"], "seq": events[column]}).reset_index()
    joined = pd.merge_asof(
        left.sort_values("seq"), calls[[*_STEP, "work_so_far"]], on="seq", by="turn"
    ).set_index("index")
    return joined["work_so_far"].reindex(events.index).fillna(0).astype("int64").to_numpy()


def _calls_at(events: pd.DataFrame, column: str, snaps: pd.DataFrame) -> Any:
    """The call number of the plan change at each event's `column` step (0: the turn's start)."""
    at = snaps.set_index(_STEP)["after_call"]
    lookup = pd.MultiIndex.from_arrays([events["turn"], events[column]])
    return at.reindex(lookup).fillna(0).astype("int64").to_numpy()


def _since(call: int, previous: str) -> str:
    if call == 0:
        return "since the turn began"
    if previous == "in_progress":
        return f"since it went in progress at call {call}"
    return f"since the plan changed at call {call}"


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


# -- the rows ----------------------------------------------------------------------------------
