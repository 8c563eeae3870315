"""Streaming a trace table larger than memory: batches of whole sessions, scored batch by batch."""

from __future__ import annotations

import itertools
import sys
import tempfile
import types
from collections import Counter
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from plangate.evaluators import (
    DEFAULT_BATCH_ROWS,
    EvaluatorError,
    _source,
    _stream,
    contiguous_sessions,
    evaluate,
    score_batches,
    session_batches,
    trace_source,
)
from plangate.replay import SCHEMA, TraceTableError, validate_table
from plangate.replay.schema import SPAN_ONCE
from tests.bench.bench_evaluators import synthetic_table

SCORE_ORDER = [("evaluator", "ascending"), ("session_id", "ascending"), ("turn_index", "ascending")]


def traces(turns: int = 160, calls: int = 3, seed: int = 5) -> pa.Table:
    """The bench's synthetic table, with repeats and outcomes of every kind.

    Sessions of four turns; the same task ids come back across sessions (task `t{s % 5}-{turn}`,
    so pass^k has k > 1); some turns stop at the iteration limit (task completion fails), some
    on a model error (every evaluator says `error`).
    """
    table, _ = synthetic_table(turns, calls, seed)
    sessions = [int(s[1:]) for s in table["session_id"].to_pylist()]
    agent = [k == "AGENT" for k in table["span_kind"].to_pylist()]
    turn = table["turn_index"].to_pylist()
    task = [f"t{s % 5}-{t}" if a else None for s, t, a in zip(sessions, turn, agent, strict=True)]
    stop = [
        None
        if not a
        else "model_error"
        if s % 7 == 3
        else "max_iterations"
        if (s + t) % 3 == 0
        else "finished"
        for s, t, a in zip(sessions, turn, agent, strict=True)
    ]
    table = table.set_column(SCHEMA.get_field_index("task_id"), "task_id", pa.array(task))
    return table.set_column(SCHEMA.get_field_index("stop_reason"), "stop_reason", pa.array(stop))


def write_interleaved(table: pa.Table, folder: Path, files: int = 4, seed: int = 0) -> list[Path]:
    """The rows dealt at random over `files` files: every session spread over several of them."""
    folder.mkdir(parents=True, exist_ok=True)
    owner = np.random.default_rng(seed).integers(0, files, table.num_rows)
    paths = []
    for index in range(files):
        path = folder / f"part-{index}.parquet"
        pq.write_table(table.filter(pa.array(owner == index)), path)
        paths.append(path)
    return paths


def write_in_order(table: pa.Table, folder: Path, cuts: list[int]) -> None:
    """The rows in order, cut into files at `cuts` (sessions cut across files, still in order)."""
    folder.mkdir(parents=True, exist_ok=True)
    bounds = [0, *cuts, table.num_rows]
    for index, (start, end) in enumerate(itertools.pairwise(bounds)):
        pq.write_table(table.slice(start, end - start), folder / f"part-{index}.parquet")


def sorted_scores(table: pa.Table) -> pa.Table:
    return table.sort_by(SCORE_ORDER)


# -- batches never split a session ---------------------------------------------------------------


def spans(sizes: list[int], names: list[int]) -> pa.Table:
    """Sessions of the given sizes (turns of three spans), named so that name order is random."""
    rows: dict[str, list[Any]] = {name: [] for name in SCHEMA.names}
    for size, name in zip(sizes, names, strict=True):
        for index in range(size):
            row = {
                "session_id": f"s{name}", "turn_index": index // 3, "trace_id": f"s{name}",
                "span_id": f"s{name}-{index}", "span_kind": "AGENT" if index % 3 == 0 else "TOOL",
                "name": "span", "status_code": "OK", "source": "test",
            }  # fmt: skip
            for column in SCHEMA.names:
                rows[column].append(row.get(column))
    return pa.Table.from_pydict(rows, schema=SCHEMA)


@st.composite
def layouts(draw: st.DrawFn) -> dict[str, Any]:
    sizes = draw(st.lists(st.integers(1, 12), min_size=1, max_size=25))
    return {
        "sizes": sizes,
        "interleaved": draw(st.booleans()),
        "files": draw(st.integers(1, 5)),
        "seed": draw(st.integers(0, 2**32 - 1)),
        "batch_rows": draw(st.integers(1, 80)),
        "read_rows": draw(st.integers(1, 40)),
        "merge_rows": draw(st.integers(1, 30)),
    }


def write_layout(layout: dict[str, Any], folder: Path) -> list[str]:
    """Write the layout's files; return the span ids in the source's order (files by name)."""
    rng = np.random.default_rng(layout["seed"])
    sizes = layout["sizes"]
    table = spans(sizes, list(rng.permutation(len(sizes))))
    if layout["interleaved"]:
        table = table.take(pa.array(rng.permutation(table.num_rows)))
    cuts = sorted(rng.integers(0, table.num_rows + 1, layout["files"] - 1).tolist())
    bounds = [0, *cuts, table.num_rows]
    pieces = [table.slice(a, b - a) for a, b in itertools.pairwise(bounds)]
    ranks = rng.permutation(len(pieces))  # file names put the pieces in a random order
    for piece, rank in zip(pieces, ranks, strict=True):
        pq.write_table(piece, folder / f"f{rank:02d}.parquet")
    ordered = [pieces[list(ranks).index(rank)] for rank in range(len(pieces))]
    return [span for piece in ordered for span in piece["span_id"].to_pylist()]


def session_of(span: str) -> str:
    return span.rsplit("-", 1)[0]


@settings(max_examples=80)
@given(layouts())
def test_batches_hold_every_row_once_and_every_session_whole(layout: dict[str, Any]) -> None:
    with (  # small reads and merges: chunk edges and hash merges inside every source
        tempfile.TemporaryDirectory() as name,
        mock.patch.object(_source, "READ_ROWS", layout["read_rows"]),
        mock.patch.object(_stream, "MERGE_ROWS", layout["merge_rows"]),
    ):
        folder = Path(name)
        order = write_layout(layout, folder)
        batches = [b["span_id"].to_pylist() for b in session_batches(folder, layout["batch_rows"])]
        contiguous = contiguous_sessions(folder)

    assert Counter(span for batch in batches for span in batch) == Counter(order)
    homes = Counter(session for batch in batches for session in {session_of(s) for s in batch})
    assert set(homes.values()) == {1}, "a session is in more than one batch"
    for batch in batches:  # a session's spans keep the source's order
        for session in {session_of(s) for s in batch}:
            assert [s for s in batch if session_of(s) == session] == [
                s for s in order if session_of(s) == session
            ]
    runs = [session for session, _ in itertools.groupby(session_of(s) for s in order)]
    assert contiguous == (len(runs) == len(set(runs)))
    batch_rows = layout["batch_rows"]
    if len(order) <= batch_rows:
        assert len(batches) == 1
    elif contiguous:  # streamed in order, cut at the first session boundary at or after batch_rows
        assert [s for batch in batches for s in batch] == order
        for batch in batches[:-1]:
            last = session_of(batch[-1])
            before_last = [s for s in batch if session_of(s) != last]
            assert len(batch) >= batch_rows > len(before_last)
    else:  # spilled: one bucket a batch
        assert len(batches) <= -(-len(order) // batch_rows)


def test_a_spill_is_removed_when_done_or_abandoned(tmp_path: Path) -> None:
    write_interleaved(traces(40, 2), tmp_path / "in")
    spill = tmp_path / "spill"
    spill.mkdir()
    assert not contiguous_sessions(tmp_path / "in")
    batches = list(session_batches(tmp_path / "in", 100, spill_dir=spill))
    assert len(batches) > 1
    assert list(spill.iterdir()) == []
    started = session_batches(tmp_path / "in", 100, spill_dir=spill)
    next(started)
    assert len(list(spill.iterdir())) == 1  # the spill, while batches are read from it
    started.close()
    assert list(spill.iterdir()) == []


# -- streamed scores equal the whole table's -----------------------------------------------------


@pytest.mark.parametrize("layout", ["interleaved", "in order", "one file"])
def test_streamed_scores_equal_the_whole_tables_row_for_row(layout: str, tmp_path: Path) -> None:
    table = traces()
    if layout == "interleaved":
        write_interleaved(table, tmp_path)
        source: Path = tmp_path
    elif layout == "in order":
        write_in_order(table, tmp_path, [301, 302, 1000])
        source = tmp_path
    else:
        source = tmp_path / "table.parquet"
        pq.write_table(table, source, row_group_size=200)
    assert contiguous_sessions(source) == (layout != "interleaved")
    seen: list[int] = []
    parts = list(score_batches(source, batch_rows=400, progress=seen.append))

    assert len(parts) > 1
    assert sum(seen) == table.num_rows
    streamed = pa.concat_tables(parts)
    assert sorted_scores(streamed).equals(sorted_scores(evaluate(table)))


def test_hive_partitions_and_globs(tmp_path: Path) -> None:
    table = traces(40, 2)
    variant = SCHEMA.get_field_index("variant")
    halves = [table.slice(0, 200), table.slice(200)]
    for day, half in zip(("2026-11-30", "2026-12-01"), halves, strict=True):
        folder = tmp_path / "hive" / f"date={day}" / "variant=alyx"
        folder.mkdir(parents=True)
        pq.write_table(half.remove_column(variant), folder / "part-0.parquet")
    (tmp_path / "hive" / "_SUCCESS").write_text("")  # hidden, as Spark writes it
    (tmp_path / "hive" / "_temporary").mkdir()  # hidden too, with a file of another table
    pq.write_table(pa.table({"a": [1]}), tmp_path / "hive" / "_temporary" / "part-0.parquet")
    expected = table.set_column(variant, "variant", pa.array(["alyx"] * table.num_rows))

    for source in (tmp_path / "hive", f"{tmp_path}/hive/date=*/*/*.parquet", f"{tmp_path}/hive/*/"):
        found = trace_source(source)
        assert (len(found.files), found.rows) == (2, table.num_rows)
        (batch,) = session_batches(source)
        assert batch.schema.equals(SCHEMA)  # `date` dropped, `variant` from the folders
        assert batch.equals(expected)


def test_a_folder_named_after_a_column_the_files_have_does_not_rewrite_it(tmp_path: Path) -> None:
    """`session_id=x/` over files of many sessions: each row keeps its own session."""
    table = traces(40, 2)
    for name, half in (("x", table.slice(0, 200)), ("y", table.slice(200))):
        folder = tmp_path / f"session_id={name}"
        folder.mkdir()
        pq.write_table(half, folder / "part-0.parquet")
    read = pa.concat_tables(session_batches(tmp_path))
    assert sorted(read["session_id"].to_pylist()) == sorted(table["session_id"].to_pylist())


def test_a_linked_folder_is_read_in_a_folder_as_a_glob_reads_it(tmp_path: Path) -> None:
    table = traces(8, 1)
    (tmp_path / "elsewhere").mkdir()
    pq.write_table(table, tmp_path / "elsewhere" / "part-0.parquet")
    (tmp_path / "traces").mkdir()
    (tmp_path / "traces" / "linked").symlink_to(tmp_path / "elsewhere")
    for source in (tmp_path / "traces", f"{tmp_path}/traces/**/*.parquet"):
        assert trace_source(source).rows == table.num_rows


def test_a_file_named_with_a_slash_after_it_is_that_file(tmp_path: Path) -> None:
    """`t.parquet/` (a shell's completion, say) names the file: read, not an internal error."""
    pq.write_table(traces(4, 1), tmp_path / "t.parquet")
    found = trace_source(f"{tmp_path}/t.parquet/")
    assert (found.files, found.single_file) == ((f"{tmp_path}/t.parquet",), True)
    assert sum(t.num_rows for t in session_batches(found)) == found.rows > 0


# -- what is refused -----------------------------------------------------------------------------


def test_sources_that_hold_no_trace_table(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "notes.txt").write_text("no tables here")
    pq.write_table(pa.table({"a": [1]}), tmp_path / "other.parquet")
    (tmp_path / "text.parquet").write_text("not parquet")
    table = traces(4, 1)
    texts = table.set_column(1, "turn_index", table["turn_index"].cast(pa.string()))
    pq.write_table(texts, tmp_path / "text-turns.parquet")
    pq.write_table(table, tmp_path / "_hidden.parquet")  # named by a glob, still not read
    cases = {
        f"{tmp_path}/nothing-*.parquet": "matches no file",
        f"{tmp_path}/_hid*.parquet": r"matches no file, .* \(1 hidden: a name that begins with",
        str(tmp_path / "missing"): "no such file or folder",
        str(tmp_path / "empty"): "no Parquet file in this folder",
        str(tmp_path / "other.parquet"): r"not a trace table: missing \d\d columns \(session_id, ",
        str(tmp_path / "text.parquet"): "not a readable Parquet file",
        str(tmp_path / "text-turns.parquet"): "column 'turn_index' is string, expected int32; "
        "write it as that type",
    }
    for source, message in cases.items():
        with pytest.raises(TraceTableError, match=message) as caught:
            trace_source(source)
        assert str(caught.value).startswith(source.split("*")[0])


OTHER_TYPES = {
    "string": [pa.large_string(), pa.string_view(), pa.dictionary(pa.int32(), pa.string())],
    "int32": [pa.int64(), pa.int16(), pa.uint16(), pa.float64()],
    "int64": [pa.int32(), pa.uint32(), pa.float64()],
    "double": [pa.float32()],
    "timestamp[us, tz=UTC]": [
        pa.timestamp("ns", "UTC"), pa.timestamp("ms", "UTC"), pa.timestamp("us"),
        pa.timestamp("ns", "Europe/Paris"),
    ],
}  # fmt: skip
"""What other tools write where the schema has a type (pandas, Spark, DuckDB, Polars)."""


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_columns_another_tool_wrote_in_other_types_are_read_as_the_schemas(
    data: st.DataObject,
) -> None:
    """Each column in some type another tool writes it in: read as the schema's, row for row."""
    table = _whole_milliseconds(traces(6, 2))  # what each of the types holds exactly
    reward = pa.array([0.5, None] * (table.num_rows // 2), pa.float64())
    table = table.set_column(SCHEMA.get_field_index("reward"), "reward", reward)
    wanted = pa.schema(
        pa.field(f.name, data.draw(st.sampled_from([f.type, *OTHER_TYPES[str(f.type)]]), f.name))
        for f in SCHEMA
    )
    with tempfile.TemporaryDirectory() as folder:
        pq.write_table(table.cast(wanted), Path(folder) / "other-tool.parquet")
        read = pa.concat_tables(session_batches(Path(folder)))
    assert read.equals(table)


def _whole_milliseconds(table: pa.Table) -> pa.Table:
    for name in ("start_time", "end_time"):
        at = SCHEMA.get_field_index(name)
        micros = pc.cast(table[name], pa.int64())
        whole = pc.multiply(pc.divide(micros, 1000), 1000).cast(pa.timestamp("us", "UTC"))
        table = table.set_column(at, name, whole)
    return table


def test_a_value_that_does_not_fit_the_schemas_type_is_named_with_its_column(
    tmp_path: Path,
) -> None:
    table = traces(4, 1)
    halves = pc.divide(table["turn_index"].cast(pa.float64()), 2.0)  # 0.5: not a turn number
    pq.write_table(table.set_column(1, "turn_index", halves), tmp_path / "halves.parquet")
    with pytest.raises(TraceTableError) as caught:
        pa.concat_tables(session_batches(tmp_path))
    assert str(caught.value).startswith(
        f"{tmp_path / 'halves.parquet'}: column 'turn_index' is double and a value does not fit "
        "int32 ("
    )
    wider = SCHEMA.set(1, pa.field("turn_index", pa.int64()))  # in memory: the caller casts
    with pytest.raises(TraceTableError, match="cast the table to plangate.replay.schema.SCHEMA"):
        validate_table(table.cast(wider))


def test_one_span_in_two_files_is_named_by_both_files_and_rows(tmp_path: Path) -> None:
    # No chunk holds both rows: the batch finds them, then the files are searched for the span.
    table = traces(6, 1)
    pq.write_table(table, tmp_path / "a.parquet")
    pq.write_table(table.slice(5, 1), tmp_path / "b.parquet")
    key = f"{table['trace_id'][5]}/{table['span_id'][5]}"
    expected = (
        f"{tmp_path / 'a.parquet'}: row 5 and {tmp_path / 'b.parquet'}: row 0 have the same "
        f"trace_id/span_id {key!r}; {SPAN_ONCE}"
    )
    with pytest.raises(TraceTableError) as caught:
        list(score_batches(tmp_path))
    assert str(caught.value) == expected


def test_a_bad_row_names_its_file_and_its_row_there(tmp_path: Path) -> None:
    table = traces(8, 1)
    kinds = table["span_kind"].to_pylist()
    kinds[9] = "BOGUS"  # the file's row 7, read in its second chunk (rows 4-7)
    write_in_order(table.set_column(5, "span_kind", pa.array(kinds)), tmp_path, [2])
    where = r"part-1\.parquet: row 7, column 'span_kind' is 'BOGUS'"
    with mock.patch.object(_source, "READ_ROWS", 4):
        with pytest.raises(TraceTableError, match=where):
            list(session_batches(tmp_path, 5))
        with pytest.raises(TraceTableError, match=where):  # found by `evaluate`, then located
            list(score_batches(tmp_path, batch_rows=5))
    assert len(list(session_batches(tmp_path, 5, check=False))) > 1


def test_bad_settings_are_refused_before_any_work(tmp_path: Path) -> None:
    pq.write_table(traces(4, 1), tmp_path / "t.parquet")
    source = tmp_path / "t.parquet"
    with pytest.raises(EvaluatorError, match="batch_rows must be a whole number >= 1, not 0"):
        session_batches(source, 0)
    with pytest.raises(EvaluatorError, match="address 'ray://h:1' is for a Ray cluster"):
        score_batches(source, address="ray://h:1")
    with pytest.raises(EvaluatorError, match="unknown evaluator 'nope'"):
        score_batches(source, names=["nope"])
    with pytest.raises(EvaluatorError, match="engine 'spark'"):
        score_batches(source, engine="spark")  # type: ignore[arg-type]
    assert DEFAULT_BATCH_ROWS == 250_000


def test_the_ray_engine_gets_the_files_and_the_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_interleaved(traces(8, 1), tmp_path, files=3)
    calls: list[tuple[Any, dict[str, Any]]] = []
    scores = evaluate(traces(8, 1))

    def ray_score_batches(paths: Any, **settings: Any) -> Any:
        calls.append((paths, settings))
        yield scores

    fake = types.ModuleType("plangate.evaluators._ray")
    fake.ray_score_batches = ray_score_batches  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "plangate.evaluators._ray", fake)
    seen: list[int] = []
    got = list(
        score_batches(
            tmp_path, names=["latency"], batch_rows=7, engine="ray", address="ray://h:1",
            progress=seen.append,
        )
    )  # fmt: skip

    assert got == [scores]
    assert [(list(source.files), settings) for source, settings in calls] == [
        (
            [str(tmp_path / f"part-{i}.parquet") for i in range(3)],
            {"rubrics": None, "names": ["latency"], "params": None, "batch_rows": 7,
             "address": "ray://h:1", "progress": seen.append},
        )
    ]  # fmt: skip
