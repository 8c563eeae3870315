"""A trace table prepared once for every evaluator: spans in order, and one row per turn."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import pyarrow as pa

from plangate.evaluators.scores import TURN_KEY
from plangate.replay.schema import (
    NAME,
    SPAN_KIND,
    START_TIME,
    TOOL_NAME,
    TOOL_SPAN_PREFIX,
    validate_table,
)


@dataclass(frozen=True, slots=True)
class TraceFrame:
    """The spans of a trace table as pandas frames, sorted within each turn.

    Order within a turn: start time where the source has one, then the order of the table
    (importers write spans in trajectory order).
    """

    spans: pd.DataFrame
    """Every span, sorted by session, turn, start time, original order; column `seq` is the
    position within the turn."""
    turns: pd.DataFrame
    """One row per turn: the turn key plus its AGENT row's columns (null where it has none)."""
    tools: pd.DataFrame
    """TOOL spans, in order; `call` is the position of the call within the turn, `tool` the
    tool's name (`tool_name`, else the span's name without its `tool.` prefix)."""
    llms: pd.DataFrame
    """LLM spans, in order."""


def prepare(table: pa.Table) -> TraceFrame:
    """Validate a trace table and prepare its frames."""
    validate_table(table)
    spans = table.to_pandas()
    spans["row"] = range(len(spans))
    spans = spans.sort_values(
        [*TURN_KEY, START_TIME, "row"], na_position="last", kind="stable"
    ).reset_index(drop=True)
    spans["seq"] = spans.groupby(TURN_KEY, sort=False).cumcount()
    keys = spans[TURN_KEY].drop_duplicates().reset_index(drop=True)
    agents = spans[spans[SPAN_KIND] == "AGENT"].drop_duplicates(TURN_KEY)
    turns = keys.merge(agents, on=TURN_KEY, how="left")
    tools = spans[spans[SPAN_KIND] == "TOOL"].reset_index(drop=True)
    tools["call"] = tools.groupby(TURN_KEY, sort=False).cumcount()
    tools["tool"] = tools[TOOL_NAME].fillna(tools[NAME].str.removeprefix(TOOL_SPAN_PREFIX))
    tools["tool"] = tools["tool"].astype(str)
    llms = spans[spans[SPAN_KIND] == "LLM"].reset_index(drop=True)
    return TraceFrame(spans=spans, turns=turns, tools=tools, llms=llms)
