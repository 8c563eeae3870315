"""`ray_score_batches`: the evaluators on Ray Data give what `evaluate` gives on the whole table.

One local Ray (2 CPUs) serves the module: starting one takes seconds. Trace tables are written
to several Parquet files with every session's rows dealt across them, so that a result equal
to `evaluate` on the whole table shows that the grouping put each session back together.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from deltalake import write_deltalake

from plangate.evaluators import (
    SCORE_SCHEMA,
    AnswerCheck,
    EvaluatorError,
    JudgeQuestion,
    Rubric,
    RubricSet,
    ToolExpectation,
    TraceSource,
    evaluate,
    score_batches,
    trace_source,
)
from plangate.evaluators._ray import SPANS, _session, ray_score_batches
from plangate.replay import TraceTableError, build_table, write_table
from plangate.replay.schema import SPAN_ONCE, table_from_columns
from tests.bench.bench_evaluators import synthetic_table
from tests.object_store import object_store
from tests.replay.test_attribute_fields import as_version_1
from tests.replay.test_attribute_fields import rows as attribute_rows

pytestmark = [
    # Ray 2.60 builds its default DataContext through its own deprecated settings, each of
    # which warns (`use_push_based_shuffle`, `use_polars`, ...): not ours to act on.
    pytest.mark.filterwarnings("ignore::DeprecationWarning:ray.data.context"),
]

FILES = 3
ORDER = [("session_id", "ascending"), ("turn_index", "ascending"), ("evaluator", "ascending")]
RUBRICS = RubricSet(
    default=Rubric(
        required_tools=(ToolExpectation(name="search", arguments={"limit": 10}),),
        forbidden_tools=("delete_everything",),
        answer=(AnswerCheck(kind="contains", value="done"),),
        plan_expected=True,
        max_iterations=4,
        max_seconds=30.0,
    ),
    turns={("s3", 1): Rubric(order="strict", required_tools=(ToolExpectation(name="search"),))},
)


@pytest.fixture(scope="module")
def local_ray() -> Iterator[Any]:
    """A local Ray for the module: `ray_score_batches` uses it and leaves it running."""
    ray = pytest.importorskip("ray")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RAY_USAGE_STATS_ENABLED", "0")
        patch.delenv("RAY_AUTH_MODE", raising=False)  # ray.init sets it: undone afterwards
        ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
        yield ray
        ray.shutdown()


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> tuple[pa.Table, list[str]]:
    """A trace table (60 sessions of 4 turns) and the Parquet files its rows are dealt into."""
    table, _ = synthetic_table(240, 4, 11)
    folder = tmp_path_factory.mktemp("traces")
    dealt = np.arange(table.num_rows) % FILES  # row i to file i % FILES: every turn is split
    paths = []
    for index in range(FILES):
        path = folder / f"part-{index}.parquet"
        pq.write_table(table.filter(pa.array(dealt == index)), path)
        paths.append(str(path))
    return table, paths


def scored(paths: Sequence[str] | TraceSource, **options: Any) -> list[pa.Table]:
    arguments: dict[str, Any] = {
        "rubrics": None, "names": None, "params": None, "batch_rows": 10_000, "address": None,
    }  # fmt: skip
    return list(ray_score_batches(paths, **{**arguments, **options}))


def test_the_files_split_every_session(traces: tuple[pa.Table, list[str]]) -> None:
    table, paths = traces
    per_file = [
        set(pq.read_table(p, columns=["session_id"])["session_id"].to_pylist()) for p in paths
    ]
    assert all(len(sessions) == 60 for sessions in per_file)
    assert sum(pq.read_metadata(p).num_rows for p in paths) == table.num_rows


@pytest.mark.parametrize("rubrics", [None, RUBRICS], ids=["no rubrics", "rubrics"])
def test_scores_equal_evaluate_on_the_whole_table(
    local_ray: Any, traces: tuple[pa.Table, list[str]], rubrics: RubricSet | None
) -> None:
    table, paths = traces
    expected = evaluate(table, rubrics)
    tables = scored(paths, rubrics=rubrics)
    assert all(t.schema.equals(SCORE_SCHEMA, check_metadata=True) for t in tables)
    actual = pa.concat_tables(tables)
    assert actual.num_rows == expected.num_rows
    assert actual.sort_by(ORDER).to_pylist() == expected.sort_by(ORDER).to_pylist()
    if rubrics is not None:  # the rubric reached the workers: it changes the outcomes
        assert actual.sort_by(ORDER).to_pylist() != evaluate(table).sort_by(ORDER).to_pylist()
    assert local_ray.is_initialized()  # a Ray it did not start is left running


def test_files_of_schema_version_1_beside_todays_score_as_today(
    local_ray: Any, tmp_path: Path
) -> None:
    """Ray would fill a version 1 file's missing attribute-field columns with nulls: not so."""
    today = build_table(attribute_rows(8))
    pq.write_table(as_version_1(today.slice(0, 12)), tmp_path / "part-0.parquet")
    write_table(today.slice(12), tmp_path / "part-1.parquet")
    names = ["tokens", "cost"]
    actual = pa.concat_tables(scored([str(tmp_path)], names=names)).sort_by(ORDER)
    assert actual.to_pylist() == evaluate(today, names=names).sort_by(ORDER).to_pylist()


def locally(source: Path, **options: Any) -> list[dict[str, Any]]:
    """The local engine's scores of a source: the reference, in `ORDER`."""
    return pa.concat_tables(score_batches(source, **options)).sort_by(ORDER).to_pylist()


def test_values_given_beside_version_1_files_are_kept(
    local_ray: Any, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """A file of today keeps the values its columns were given, beside a file of version 1.

    (And Ray's log lines of a run stay off the terminal.)
    """
    today = build_table(attribute_rows(8))
    pq.write_table(as_version_1(today.slice(0, 12)), tmp_path / "part-0.parquet")
    given = today.slice(12).to_pydict()  # sessions s3 (the rest of it) to s7
    llm = [kind == "LLM" for kind in given["span_kind"]]
    given["cost_usd"] = [0.25 if is_llm else None for is_llm in llm]  # not in the attributes
    given["tokens_cached"] = [100 if is_llm else None for is_llm in llm]
    write_table(table_from_columns(given), tmp_path / "part-1.parquet")
    names = ["tokens", "cost"]
    expected = locally(tmp_path, names=names)
    capfd.readouterr()
    actual = pa.concat_tables(scored([str(tmp_path)], names=names)).sort_by(ORDER).to_pylist()
    assert capfd.readouterr().err == ""
    assert actual == expected
    cost = {(r["session_id"], r["evaluator"]): r["score"] for r in actual}
    assert cost["s4", "cost"] == 0.25  # its one call's given cost, recorded by the source


@pytest.fixture
def hive(tmp_path: Path) -> Path:
    """Sessions under `source=…/trial=…/` folders, their files without those two columns."""
    table, _ = synthetic_table(40, 3, 5)
    second = pc.greater_equal(table["session_id"], "s5")
    for index, (source, rows) in enumerate([("alpha", pc.invert(second)), ("beta", second)]):
        folder = tmp_path / "traces" / f"source={source}" / f"trial={index + 1}"
        folder.mkdir(parents=True)
        pq.write_table(table.filter(rows).drop_columns(["source", "trial"]), folder / "p.parquet")
    return tmp_path / "traces"


def test_hive_partition_folders_give_their_columns_as_locally(local_ray: Any, hive: Path) -> None:
    expected = locally(hive)
    assert {row["trial"] for row in expected} == {1, 2}  # from the folders, typed
    for source in ([str(hive)], trace_source(hive)):
        actual = pa.concat_tables(scored(source)).sort_by(ORDER).to_pylist()
        assert actual == expected


def test_hive_partition_folders_through_score_batches(local_ray: Any, hive: Path) -> None:
    actual = pa.concat_tables(score_batches(hive, engine="ray")).sort_by(ORDER).to_pylist()
    assert actual == locally(hive)


def test_a_bucket_is_read_by_the_workers_as_locally(local_ray: Any, hive: Path) -> None:
    """The workers, started before the bucket's variables were set, read it all the same: the
    source's filesystem travels to them, with the credentials the URI gave."""
    with object_store() as store:
        uri = store.upload(hive, "traces").replace("s3://", "s3://test:test@")
        actual = pa.concat_tables(score_batches(uri, engine="ray")).sort_by(ORDER).to_pylist()
    assert actual == locally(hive)


def test_a_delta_table_is_read_as_its_current_version_as_locally(
    local_ray: Any, tmp_path: Path
) -> None:
    """Written twice: the first version's files, still there, would be every span twice."""
    table, _ = synthetic_table(40, 3, 5)
    for mode in ("error", "overwrite"):
        write_deltalake(tmp_path / "delta", table, partition_by=["source"], mode=mode)
    actual = pa.concat_tables(score_batches(tmp_path / "delta", engine="ray"))
    assert actual.sort_by(ORDER).to_pylist() == locally(tmp_path / "delta")
    assert actual.num_rows == evaluate(table).num_rows


@pytest.fixture(scope="module")
def long_table() -> pa.Table:
    """A trace table longer than a read (65,536 rows), `session_id` nullable."""
    table, _ = synthetic_table(1700, 20, 3)
    return table.cast(table.schema.set(0, pa.field("session_id", pa.string())))


def same_error_on_both(source: Path, capfd: pytest.CaptureFixture[str]) -> str:
    """The error both engines give for a source, checked equal; nothing of Ray's printed."""
    with pytest.raises(TraceTableError) as local:
        list(score_batches(source))
    capfd.readouterr()
    with pytest.raises(TraceTableError) as on_ray:
        scored([str(source)])
    assert str(on_ray.value) == str(local.value)
    assert capfd.readouterr().err == ""
    return str(local.value)


@pytest.mark.parametrize(
    ("column", "value"), [("session_id", None), ("span_kind", "tool")], ids=["null", "bad value"]
)
def test_a_bad_row_is_named_by_its_file_and_its_row_there(
    local_ray: Any,
    long_table: pa.Table,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    column: str,
    value: str | None,
) -> None:
    """As the local engine names it, in one line; Ray's log lines stay off the terminal."""
    values = long_table[column].to_pylist()
    values[67_000] = value  # row 66,000 of the second file: in its second read
    bad = long_table.set_column(long_table.schema.get_field_index(column), column, [values])
    pq.write_table(bad.slice(0, 1_000), tmp_path / "part-0.parquet")
    pq.write_table(bad.slice(1_000), tmp_path / "part-1.parquet")
    error = same_error_on_both(tmp_path, capfd)
    assert error.startswith(f"{tmp_path / 'part-1.parquet'}: row 66000, column")
    assert "\n" not in error


def test_progress_counts_the_buckets_spans_as_their_scores_arrive(
    local_ray: Any, tmp_path: Path
) -> None:
    table, _ = synthetic_table(40, 2)
    write_table(table, tmp_path / "t.parquet")
    told: list[int] = []
    rows: list[str] = []
    arrived: list[int] = []  # score rows the caller had when each count was told
    for scores in ray_score_batches(
        [str(tmp_path)], rubrics=None, names=None, params=None, batch_rows=100,
        address=None, progress=lambda spans: told.append(spans) or arrived.append(len(rows)),
    ):  # fmt: skip
        rows.extend(scores["session_id"].to_pylist())
        assert SPANS not in scores.column_names
    assert sum(told) == table.num_rows
    assert arrived[0] == 0  # told as the scores come, not after the last


def test_relative_paths_are_read_from_where_they_were_given(
    local_ray: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The workers started elsewhere (as on another node): a relative path means the caller's.
    table, _ = synthetic_table(6, 1)
    (tmp_path / "relative").mkdir()
    pq.write_table(table, tmp_path / "relative" / "t.parquet")
    expected = locally(tmp_path / "relative")
    monkeypatch.chdir(tmp_path)
    for source in (["relative"], trace_source("relative")):
        assert pa.concat_tables(scored(source)).sort_by(ORDER).to_pylist() == expected


def test_one_span_in_two_files_is_named_by_both_as_locally(
    local_ray: Any, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    # No chunk holds both rows: the bucket finds them, and the files are searched for the span.
    table, _ = synthetic_table(6, 1)
    pq.write_table(table, tmp_path / "a.parquet")
    pq.write_table(table.slice(5, 1), tmp_path / "b.parquet")
    key = f"{table['trace_id'][5]}/{table['span_id'][5]}"
    assert same_error_on_both(tmp_path, capfd) == (
        f"{tmp_path / 'a.parquet'}: row 5 and {tmp_path / 'b.parquet'}: row 0 have the same "
        f"trace_id/span_id {key!r}; {SPAN_ONCE}"
    )


def test_the_command_line_shows_one_line_and_none_of_ray_s(
    traces: tuple[pa.Table, list[str]], tmp_path: Path
) -> None:
    """`plangate eval --engine ray` starts its own Ray: none of its log lines on the terminal."""
    pytest.importorskip("ray")
    _, paths = traces
    bad = tmp_path / "traces" / "part-0.parquet"
    bad.parent.mkdir()
    table = pq.read_table(paths[0])
    kinds = table["span_kind"].to_pylist()
    kinds[5] = "tool"
    pq.write_table(table.set_column(5, "span_kind", pa.array(kinds)), bad)
    command = [sys.executable, "-m", "plangate", "eval", str(bad.parent), "--engine", "ray",
               "-o", str(tmp_path / "scores")]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2
    assert done.stderr == (
        f"plangate: error: {bad}: row 5, column 'span_kind' is 'tool'; allowed: AGENT, CHAIN, "
        "DECISION, EMBEDDING, EVALUATOR, GUARDRAIL, LLM, PROMPT, RERANKER, RETRIEVER, TOOL, "
        "UNKNOWN\n"
    )


def test_each_session_is_scored_whole_in_one_group(
    local_ray: Any, traces: tuple[pa.Table, list[str]]
) -> None:
    table, paths = traces
    names = ["tool_call_loops", "latency"]
    params = {"tool_call_loops": {"max_repeats": 3}}
    tables = scored(paths, names=names, params=params, batch_rows=400)
    assert len(tables) > 1
    holders: dict[str, int] = {}
    for index, part in enumerate(tables):
        for session in set(part["session_id"].to_pylist()):
            assert holders.setdefault(session, index) == index, f"{session} split over tables"
    actual = pa.concat_tables(tables).sort_by(ORDER).to_pylist()
    assert actual == evaluate(table, None, names, params).sort_by(ORDER).to_pylist()


def test_a_cluster_address_is_joined_and_left_running(
    local_ray: Any, traces: tuple[pa.Table, list[str]], tmp_path: Path
) -> None:
    """Another process joins the module's Ray by its address, scores, and disconnects only."""
    table, paths = traces
    out = tmp_path / "scores.parquet"
    code = (
        "import sys, pyarrow as pa, pyarrow.parquet as pq\n"
        "from plangate.evaluators._ray import ray_score_batches\n"
        "tables = ray_score_batches(sys.argv[3:], rubrics=None, names=None, params=None,\n"
        "                           batch_rows=1000, address=sys.argv[1])\n"
        "pq.write_table(pa.concat_tables(list(tables)), sys.argv[2])\n"
    )
    address = local_ray.get_runtime_context().gcs_address
    done = subprocess.run(
        [sys.executable, "-c", code, address, str(out), *paths], timeout=300, text=True,
        capture_output=True, env={**os.environ, "RAY_AUTH_MODE": "token"},  # as the README says
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    actual = pq.read_table(out).sort_by(ORDER).to_pylist()
    assert actual == evaluate(table).sort_by(ORDER).to_pylist()
    assert local_ray.get(local_ray.put(1)) == 1  # the cluster still serves this process


def test_bad_names_and_parameters_fail_before_ray_runs(
    traces: tuple[pa.Table, list[str]],
) -> None:
    pytest.importorskip("ray")
    _, paths = traces
    with pytest.raises(EvaluatorError, match="unknown evaluator 'looping'"):
        ray_score_batches(paths, rubrics=None, names=["looping"], params=None, batch_rows=10, address=None)  # fmt: skip
    with pytest.raises(EvaluatorError, match="'tool_call_loops': bad parameters"):
        scored(paths, params={"tool_call_loops": {"no_such_parameter": 1}})
    with pytest.raises(EvaluatorError, match="batch_rows must be at least 1"):
        scored(paths, batch_rows=0)
    assert scored([]) == []  # no files, no tables


def test_without_ray_the_error_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now fails
    with pytest.raises(EvaluatorError) as raised:
        scored(["traces.parquet"])
    assert str(raised.value) == "--engine ray needs Ray: pip install 'plangate[ray]'"


def test_plangate_imports_without_importing_ray() -> None:
    code = "import sys, plangate.evaluators._ray, plangate.evaluators; print('ray' in sys.modules)"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.strip() == "False"


class FakeRay(SimpleNamespace):
    """What `_session` calls on Ray, recorded."""

    def __init__(self, *, initialized: bool = False, refusal: Exception | None = None) -> None:
        super().__init__(calls=[], initialized=initialized, refusal=refusal)

    def is_initialized(self) -> bool:
        return bool(self.initialized)

    def init(self, **options: Any) -> None:
        self.calls.append(("init", options))
        if self.refusal is not None:
            raise self.refusal

    def shutdown(self) -> None:
        self.calls.append(("shutdown", {}))


@pytest.fixture
def listening() -> Iterator[str]:
    """An address where something accepts connections (but no Ray)."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        yield f"127.0.0.1:{server.getsockname()[1]}"


def test_without_an_address_a_local_ray_is_started_and_shut_down(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("RAY_USAGE_STATS_ENABLED", "1")
    ray = FakeRay()
    with _session(ray, None):  # type: ignore[arg-type]
        assert os.environ["RAY_USAGE_STATS_ENABLED"] == "0"
        assert ray.calls == [
            ("init", {"address": "local", "num_cpus": os.cpu_count(), "include_dashboard": False,
                      "log_to_driver": False}),
        ]  # fmt: skip
    assert ray.calls[-1] == ("shutdown", {})


def test_a_ray_already_running_is_used_and_left_running() -> None:
    ray = FakeRay(initialized=True)
    with _session(ray, "ray://head:10001"):  # type: ignore[arg-type]
        pass
    assert ray.calls == []


def test_an_address_is_joined_and_only_disconnected(listening: str) -> None:
    ray = FakeRay()
    with _session(ray, f"ray://{listening}"):  # type: ignore[arg-type]
        assert ray.calls == [("init", {"address": f"ray://{listening}", "log_to_driver": False})]
    assert ray.calls[-1] == ("shutdown", {})


def test_an_address_where_nothing_listens_fails_at_once() -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        address = f"127.0.0.1:{server.getsockname()[1]}"
    ray = FakeRay()  # never asked: Ray would retry for minutes
    message = rf"--address '{address}': no Ray cluster there \(.*refused.*\); start one with `ray start --head`"
    with pytest.raises(EvaluatorError, match=message), _session(ray, address):  # type: ignore[arg-type]
        pass  # pragma: no cover
    assert ray.calls == []


@pytest.mark.parametrize(
    ("refusal", "message"),
    [
        (ConnectionError("ray client connection timeout\nmore"), r"no Ray cluster there \(ray client connection timeout\); start one"),
        (RuntimeError("Failed to connect to GCS: InvalidAuthToken: missing"), "set RAY_AUTH_MODE=token and RAY_AUTH_TOKEN"),
    ],
    ids=["not ray", "no token"],
)  # fmt: skip
def test_a_cluster_that_refuses_the_driver_says_what_to_do(
    listening: str, refusal: Exception, message: str
) -> None:
    ray = FakeRay(refusal=refusal)
    with pytest.raises(EvaluatorError, match=message), _session(ray, listening):  # type: ignore[arg-type]
        pass  # pragma: no cover
    assert [name for name, _ in ray.calls] == ["init"]


def test_a_usage_error_on_a_worker_comes_back_as_itself(
    local_ray: Any, traces: tuple[pa.Table, list[str]]
) -> None:
    _, paths = traces
    asked = RubricSet(default=Rubric(judge=JudgeQuestion(question="Done?", model="openai:j")))
    with pytest.raises(EvaluatorError) as caught:
        scored(paths, rubrics=asked, names=["judge"])  # no cassette: nothing recorded
    assert type(caught.value) is EvaluatorError  # not Ray's wrapper, with its traceback
    assert str(caught.value).startswith("judge: no recorded reply (no judge cassette given)")
    assert "\n" not in str(caught.value)
