"""`plangate eval` on a folder or a glob: streamed, summarized from the parts, written in parts."""

from __future__ import annotations

import json
import stat
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from plangate.ci._summary import MAX_FAILURES, SummaryBuilder, summarize
from plangate.ci.cli._arguments import EVAL_BATCH_ROWS
from plangate.evaluators import DEFAULT_BATCH_ROWS, evaluate, score_batches
from plangate.evaluators.scores import ScoreTableError, read_scores
from tests.ci.bad_inputs import assert_one_line_naming, run_main
from tests.evaluators.test_stream import sorted_scores, traces, write_interleaved
from tests.helpers import plangate

TABLE = traces(200, 3)
"""800 turns' sessions of 4 turns, 1,800 spans; task ids repeated, some failures and errors."""
WHOLE = evaluate(TABLE)
SUMMARY = summarize(WHOLE)


def test_the_table_has_what_the_summary_must_get_right() -> None:
    assert len(SUMMARY["repeats"]) > 1  # pass^k with k > 1
    assert SUMMARY["failures_total"] > MAX_FAILURES
    assert SUMMARY["errors_total"] > MAX_FAILURES
    assert EVAL_BATCH_ROWS == DEFAULT_BATCH_ROWS  # the parser's default is the engine's


def test_the_streamed_summary_equals_the_whole_tables(tmp_path: Path) -> None:
    write_interleaved(TABLE, tmp_path, files=5)
    builder = SummaryBuilder()
    batches = 0
    for scores in score_batches(tmp_path, batch_rows=500):
        builder.add(scores)
        batches += 1

    assert batches > 2
    assert builder.summary() == SUMMARY


@settings(max_examples=25)
@given(st.integers(1, 12), st.integers(0, 2**32 - 1))
def test_the_summary_does_not_depend_on_the_batches(parts: int, seed: int) -> None:
    """Score rows cut anywhere between turns, the batches in any order: the same summary."""
    order = np.random.default_rng(seed)
    turns = WHOLE.group_by(["session_id", "turn_index"]).aggregate([]).to_pylist()
    home = dict(
        zip(
            [(t["session_id"], t["turn_index"]) for t in turns],
            order.integers(0, parts, len(turns)).tolist(),
            strict=True,
        )
    )
    rows = np.array(
        [
            home[(s, t)]
            for s, t in zip(
                WHOLE["session_id"].to_pylist(), WHOLE["turn_index"].to_pylist(), strict=True
            )
        ]
    )
    builder = SummaryBuilder()
    for part in order.permutation(parts):
        builder.add(WHOLE.filter(pa.array(rows == part)))
    assert builder.summary() == SUMMARY


# -- the command ---------------------------------------------------------------------------------


def test_eval_of_a_folder_writes_parts_and_summarizes_them(tmp_path: Path) -> None:
    write_interleaved(TABLE, tmp_path / "traces", files=5)
    out = tmp_path / "scores"
    done = plangate(
        "eval", str(tmp_path / "traces"), "--batch-rows", "500", "-o", str(out), "--json"
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""  # no progress bar: stderr is not a terminal
    assert json.loads(done.stdout) == SUMMARY
    parts = sorted(p.name for p in out.iterdir())
    assert len(parts) > 2
    assert parts == [f"part-{i:05d}.parquet" for i in range(len(parts))]
    assert sorted_scores(read_scores(out)).equals(sorted_scores(WHOLE))
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no staging left


def test_eval_of_a_glob_and_of_hive_partitions(tmp_path: Path) -> None:
    halves = [TABLE.slice(0, 900), TABLE.slice(900)]
    for day, half in zip(("2026-11-30", "2026-12-01"), halves, strict=True):
        write_interleaved(half, tmp_path / "hive" / f"date={day}", files=2, seed=len(day))
    for source in (
        str(tmp_path / "hive"),
        f"{tmp_path}/hive/*/*.parquet",
        f"{tmp_path}/hive/date=*/",
    ):
        done = plangate("eval", source, "--batch-rows", "700", "--json")
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout) == SUMMARY, source


def test_one_file_in_gives_one_file_out_and_the_rate(tmp_path: Path) -> None:
    source = tmp_path / "traces.parquet"
    pq.write_table(TABLE, source)
    out = tmp_path / "scores.parquet"
    done = plangate("eval", str(source), "--batch-rows", "700", "-o", str(out))
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert out.is_file()
    assert pq.ParquetFile(out).metadata.num_row_groups > 1  # written batch by batch
    assert sorted_scores(read_scores(out)).equals(sorted_scores(WHOLE))
    last = done.stdout.strip().splitlines()[-1]
    assert last.startswith(f"{TABLE.num_rows:,} spans scored in ") and "spans/s" in last


def test_an_existing_output_is_kept_without_force(tmp_path: Path) -> None:
    write_interleaved(TABLE, tmp_path / "traces", files=2)
    out = tmp_path / "scores"
    out.mkdir()
    (out / "part-00000.parquet").write_bytes(b"earlier scores")
    args = ["eval", str(tmp_path / "traces"), "--batch-rows", "700", "-o", str(out)]

    done = plangate(*args)
    assert done.returncode == 2
    assert "already exists; pass --force to replace it with a score table" in done.stderr
    assert [p.name for p in out.iterdir()] == ["part-00000.parquet"]
    assert (out / "part-00000.parquet").read_bytes() == b"earlier scores"

    done = plangate(*args, "--force")
    assert done.returncode == 0, done.stderr
    assert sorted_scores(read_scores(out)).equals(sorted_scores(WHOLE))
    assert stat.S_IMODE(out.stat().st_mode) == 0o755  # not the staging folder's private mode


def test_a_bad_row_midway_leaves_no_output(tmp_path: Path) -> None:
    kinds = TABLE["span_kind"].to_pylist()
    kinds[-1] = "BOGUS"  # in the last file, read after the first batches are scored
    bad = TABLE.set_column(TABLE.schema.get_field_index("span_kind"), "span_kind", pa.array(kinds))
    folder = tmp_path / "traces"
    folder.mkdir()
    for index, start in enumerate((0, 600, 1200)):
        pq.write_table(bad.slice(start, 600), folder / f"part-{index}.parquet")
    out = tmp_path / "scores"
    done = plangate("eval", str(folder), "--batch-rows", "300", "-o", str(out))
    assert_one_line_naming(done.returncode, done.stderr, folder / "part-2.parquet", "bad row")
    assert "'BOGUS'" in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["traces"]  # no output, no staging


def bad_sources(tmp_path: Path) -> dict[str, tuple[str, Path]]:
    """Each kind of source that holds no trace table: (argument, the path the error names)."""
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "notes.txt").write_text("no tables here")
    mixed = tmp_path / "mixed"
    write_interleaved(TABLE.slice(0, 100), mixed, files=2)
    pq.write_table(pa.table({"a": [1]}), mixed / "part-9.parquet")
    (tmp_path / "junk.parquet").write_text("not parquet")
    nothing = tmp_path / "nothing"
    write_interleaved(TABLE.slice(0, 0), nothing, files=2)
    return {
        "no spans": (str(nothing), nothing),
        "matches no file": (f"{tmp_path}/none-*.parquet", tmp_path / "none-*.parquet"),
        "no Parquet file": (str(tmp_path / "empty"), tmp_path / "empty"),
        "not a trace table": (str(mixed), mixed / "part-9.parquet"),
        "not a readable Parquet file": (str(tmp_path / "junk.parquet"), tmp_path / "junk.parquet"),
    }


def test_bad_sources_exit_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for needle, (source, named) in bad_sources(tmp_path).items():
        out = tmp_path / f"out-{len(needle)}"
        code, stdout, err = run_main(["eval", source, "-o", str(out)], capsys)
        assert_one_line_naming(code, err, named, needle)
        assert needle in err
        assert stdout == ""
        assert not out.exists()


def test_address_needs_ray_and_ray_needs_installing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    source = tmp_path / "t.parquet"
    pq.write_table(TABLE.slice(0, 50), source)
    code, _, err = run_main(["eval", str(source), "--address", "ray://head:10001"], capsys)
    assert code == 2
    assert "'ray://head:10001' is for a Ray cluster" in err

    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` fails as if not installed
    code, _, err = run_main(["eval", str(source), "--engine", "ray"], capsys)
    assert code == 2
    assert len(err.strip().splitlines()) == 1
    assert "pip install 'plangate[ray]'" in err


def test_a_score_folder_without_scores_is_named(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(ScoreTableError, match="empty: no .parquet file in this folder"):
        read_scores(tmp_path / "empty")
    (tmp_path / "other").mkdir()
    pq.write_table(WHOLE.slice(0, 5), tmp_path / "other" / "part-00000.parquet")
    pq.write_table(pa.table({"a": [1]}), tmp_path / "other" / "part-00001.parquet")
    with pytest.raises(ScoreTableError, match=r"part-00001\.parquet: not a score table"):
        read_scores(tmp_path / "other")


def test_scores_are_not_written_where_the_source_is_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # They would be read as traces by the next run over the same source.
    traces_folder = tmp_path / "traces"
    write_interleaved(TABLE.slice(0, 100), traces_folder, files=2)
    one = traces_folder / "part-0.parquet"
    refused = [
        (str(traces_folder), traces_folder / "scores"),
        (f"{traces_folder}/*.parquet", traces_folder / "more.parquet"),
        (f"{traces_folder}/*/", traces_folder / "scores"),
        (f"{tmp_path}/**/*.parquet", tmp_path / "scores"),
        (str(one), one),  # the source itself, even with --force
    ]
    for source, out in refused:
        code, _, err = run_main(["eval", source, "-o", str(out), "--force"], capsys)
        assert_one_line_naming(code, err, out, source)
        assert "where the source" in err
    assert not (traces_folder / "scores").exists() and one.stat().st_size > 1_000
    # A hidden name, and a glob that does not reach the scores' files, are never read: fine.
    code, _, err = run_main(
        ["eval", str(traces_folder), "-o", str(traces_folder / "_scores")], capsys
    )
    assert code == 0, err
    code, _, err = run_main(
        ["eval", str(traces_folder), "-o", str(traces_folder / "_scores"), "--force"], capsys
    )
    assert code == 0, err
    code, _, err = run_main(["eval", f"{traces_folder}/*", "-o", str(traces_folder / "_s")], capsys)
    assert code == 0, err
    glob = f"{traces_folder}/*.parquet"
    code, _, err = run_main(["eval", glob, "-o", str(traces_folder / "scores")], capsys)
    assert code == 0, err
