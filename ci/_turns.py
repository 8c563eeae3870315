"""Which turns of a golden dataset a command replays: the sessions and turns asked for, sharded."""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

from plangate.harness import PlangateError
from plangate.replay import (
    DatasetError,
    GoldenDataset,
)
from plangate.replay.schema import SESSION_ID, TURN_INDEX


def select_turns(
    dataset: GoldenDataset,
    sessions: Sequence[str] | None,
    turns: Sequence[int] | None,
    shard: str | None,
) -> list[tuple[str, int]]:
    """The (session, turn) pairs to replay, in a stable order, after filters and sharding."""
    known = set(dataset.sessions[SESSION_ID].to_pylist())
    for session in sessions or ():
        if session not in known:
            dataset.session(session)  # raises, naming some known sessions
    pairs = sorted(
        zip(
            dataset.turns[SESSION_ID].to_pylist(),
            dataset.turns[TURN_INDEX].to_pylist(),
            strict=True,
        )
    )
    chosen = [
        (s, k) for s, k in pairs if (not sessions or s in sessions) and (not turns or k in turns)
    ]
    if not chosen:
        raise DatasetError(f"{dataset.name}: no turn matches --session/--turn")
    if shard is None:
        return chosen
    index, count = parse_shard(shard)
    return chosen[index - 1 :: count]


def parse_shard(text: str) -> tuple[int, int]:
    """`i/n` as (i, n), 1 ≤ i ≤ n."""
    first, sep, second = text.partition("/")
    if sep and first.isdecimal() and second.isdecimal() and 1 <= int(first) <= int(second):
        return int(first), int(second)
    raise PlangateError(f"--shard {text!r}: expected i/n with 1 <= i <= n, e.g. 1/4")


def recorded_spans(dataset: GoldenDataset, pairs: Sequence[tuple[str, int]]) -> pa.Table:
    """The recorded spans of some turns (what a cassette replay of them plays back)."""
    spans = dataset.spans
    chosen = set(pairs)
    keys = zip(spans[SESSION_ID].to_pylist(), spans[TURN_INDEX].to_pylist(), strict=True)
    return spans.filter(pa.array([key in chosen for key in keys], pa.bool_()))
