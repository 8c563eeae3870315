"""Trace tables in object storage (`s3://…`): found, read and scored as the same files on disk.

The bucket is served by a local S3 server (`tests/object_store.py`) and read by pyarrow's own
S3 client, as a team's bucket would be.
"""

from __future__ import annotations

import json
import pickle
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote, unquote

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from plangate.evaluators import (
    TraceSource,
    _object_store,
    _source,
    score_batches,
    session_batches,
    trace_source,
    would_read,
)
from plangate.evaluators._lakes import MARKERS
from plangate.evaluators._object_store import GCS_RETRY_SECONDS, StoreURI, find_objects
from plangate.replay import SCHEMA, TraceTableError
from tests.ci.bad_inputs import run_main
from tests.evaluators.test_stream import sorted_scores, traces
from tests.object_store import ObjectStore, object_store, plangate_with

SECRET = "wJalrXUtnFEMIK7MDENGbPxRfiCYzEXAMPLEKEY"
"""A secret access key as a URI may carry it: it must never be shown."""


@pytest.fixture(scope="module")
def store() -> Iterator[ObjectStore]:
    with object_store() as running:
        yield running


@pytest.fixture(scope="module")
def lake(store: ObjectStore, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, pa.Table]:
    """Two days of Hive partitions on disk and the same tree in the bucket under `hive/`.

    `variant` comes from the folders; `_SUCCESS` and `_temporary/` are hidden, as Spark
    writes them; the whole table is one more object, `one.parquet`, beside the prefix.
    """
    table = traces(40, 2)
    variant = SCHEMA.get_field_index("variant")
    root = tmp_path_factory.mktemp("lake") / "hive"
    halves = [table.slice(0, 200), table.slice(200)]
    for day, half in zip(("2026-11-30", "2026-12-01"), halves, strict=True):
        folder = root / f"date={day}" / "variant=alyx"
        folder.mkdir(parents=True)
        pq.write_table(half.remove_column(variant), folder / "part-0.parquet")
    (root / "_SUCCESS").write_text("")
    (root / "_temporary").mkdir()
    pq.write_table(pa.table({"a": [1]}), root / "_temporary" / "part-0.parquet")
    store.upload(root, "hive")
    pq.write_table(table, "lake/one.parquet", filesystem=store.filesystem)
    return root, table.set_column(variant, "variant", pa.array(["alyx"] * table.num_rows))


@pytest.mark.parametrize(
    ("uri", "on_disk"),
    [
        ("s3://lake/hive", ""),
        ("s3://lake/hive/", ""),
        ("s3://lake/hive/date=*/", "date=*/"),
        ("s3://lake/hive/date=2026-1[12]-*/*/*.parquet", "date=2026-1[12]-*/*/*.parquet"),
        ("s3://lake/hive/**/part-0.parquet", "**/part-0.parquet"),
    ],
)
def test_a_prefix_or_a_glob_reads_what_the_same_tree_on_disk_gives(
    lake: tuple[Path, pa.Table], uri: str, on_disk: str
) -> None:
    root, expected = lake
    local = f"{root}/{on_disk}" if on_disk else root
    found, there = trace_source(uri), trace_source(local)
    assert (len(found.files), found.rows, found.single_file) == (2, expected.num_rows, False)
    assert [f.removeprefix("s3://lake/hive/") for f in found.files] == [
        str(Path(f).relative_to(root)) for f in there.files
    ]
    assert found.constants == there.constants  # `variant` from the folders, typed
    (batch,) = session_batches(uri)
    assert batch.equals(expected)
    assert sorted_scores(pa.concat_tables(score_batches(uri))).equals(
        sorted_scores(pa.concat_tables(score_batches(local)))
    )


def test_a_name_is_read_as_named_before_it_is_a_glob(store: ObjectStore, tmp_path: Path) -> None:
    """As on disk: `a[1]/` that exists is that folder, spaces may be written as they are or
    `%20`, and a name that is both an object and a prefix is the prefix with a `/` after it."""
    table = traces(40, 2)
    for folder, rows in (("a[1]", 10), ("a1", 20), ("with space", 30)):
        (tmp_path / folder).mkdir()
        pq.write_table(table.slice(0, rows), tmp_path / folder / "p.parquet")
    store.upload(tmp_path, "names")
    pq.write_table(table.slice(0, 40), "lake/names/both", filesystem=store.filesystem)
    pq.write_table(table.slice(0, 50), "lake/names/both/p.parquet", filesystem=store.filesystem)
    rows = {
        "s3://lake/names/a[1]/": 10,
        "s3://lake/names/a[0-9]/": 20,
        "s3://lake/names/with space/": 30,
        "s3://lake/names/with%20space": 30,
        "s3://lake/names/with%20sp*/": 30,
        "s3://lake/names/both": 40,
        "s3://lake/names/both/": 50,
        "s3://lake/names/both/*": 50,
    }
    assert {uri: trace_source(uri).rows for uri in rows} == rows
    assert trace_source(f"file://{quote(str(tmp_path))}/with%20space").rows == 30


def test_a_glob_lists_only_the_partitions_it_can_match(
    lake: tuple[Path, pa.Table], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A month of a lake lists that month: folders its other segments rule out are not read."""
    listed: list[tuple[str, bool]] = []
    listing = _object_store._listed

    def spy(filesystem: pafs.FileSystem, folder: str, recursive: bool) -> list[pafs.FileInfo]:
        listed.append((folder, recursive))
        return listing(filesystem, folder, recursive)

    monkeypatch.setattr(_object_store, "_listed", spy)
    found = trace_source("s3://lake/hive/date=2026-12-*/*/*.parquet")
    assert found.files == ("s3://lake/hive/date=2026-12-01/variant=alyx/part-0.parquet",)
    markers = [(f"{folder}/{name}", False) for folder in ("lake/hive", "lake") for name in MARKERS]
    assert listed == [
        ("lake/hive", False),  # which dates there are
        ("lake/hive/date=2026-12-01", False),  # which variants December's holds
        ("lake/hive/date=2026-12-01/variant=alyx", True),  # only then, files
        *markers,  # then whether the glob's folder, or one above it, is a Delta or Iceberg table
    ]


def test_one_object_is_one_file(lake: tuple[Path, pa.Table]) -> None:
    table = traces(40, 2)
    found = trace_source("s3://lake/one.parquet")
    assert (found.files, found.rows) == (("s3://lake/one.parquet",), table.num_rows)
    assert found.single_file
    assert found.constants == ({},)  # a file named alone has no partition folders
    (batch,) = session_batches(found)
    assert batch.equals(table)


SLASHED = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYzEXAMPLEKEY"
"""A secret access key with a `/` in it, pasted as is (a URI wants it as `%2F`)."""
DIGITS = "12/abcdefSECRETzzzzzzzzzzzzzzzzzzzzzzzzzz"
"""One whose text before its `/` is all digits, as a port would be."""


@pytest.mark.parametrize("secret", [SECRET, SLASHED, quote(SLASHED, safe=""), DIGITS])
def test_credentials_in_a_uri_are_used_and_never_shown(
    lake: tuple[Path, pa.Table], secret: str
) -> None:
    found = trace_source(f"s3://AKIAEXAMPLE:{secret}@lake/hive/?region=us-east-1")
    assert found.given == "s3://lake/hive"
    assert all(f.startswith("s3://lake/hive/date=") for f in found.files)
    # What travels (to Ray's workers too) signs with the URI's keys, not the environment's.
    options = pickle.loads(pickle.dumps(found)).filesystem.__reduce__()[1][0]
    assert (options["access_key"], options["secret_key"]) == ("AKIAEXAMPLE", unquote(secret))
    for bad in (
        f"s3://AKIAEXAMPLE:{secret}@lake/nothing/",
        f"s3://AKIAEXAMPLE:{secret}@lake/hive/?bogus=1&region={secret}",
        f"s3://AKIAEXAMPLE:{secret}@la[ke/hive/",
        f"s3://AKIAEXAMPLE:{secret}@lake/hive/?e",
    ):
        with pytest.raises(TraceTableError) as caught:
            trace_source(bad)
        message = str(caught.value)
        assert unquote(secret)[:12] not in message and secret[:12] not in message, message
        assert "AKIAEXAMPLE" not in message
        assert message.startswith(("s3://lake/", "s3://la[ke/")), message
        assert "…" not in message.partition("(")[0]  # the URI shown whole, not scrubbed


def test_what_is_refused_names_the_uri_and_says_what_was_expected(
    store: ObjectStore, lake: tuple[Path, pa.Table]
) -> None:
    with store.filesystem.open_output_stream("lake/text/notes.parquet") as out:
        out.write(b"not parquet")
    cases = {
        "s3://lake/missing": "no such object, and no prefix of objects with Parquet files",
        "s3://lake/hive/date=1999-*/": "matches no object with Parquet files",
        "s3://lake/hive/_temporary/": "part-0.parquet: not a trace table",  # named: read
        "s3://lake/text": "s3://lake/text/notes.parquet: not a readable Parquet file",
        "s3://la[ke/x": "cannot read this object storage URI",
    }
    for uri, message in cases.items():
        with pytest.raises(TraceTableError, match=message.replace("[", r"\[")) as caught:
            trace_source(uri)
        assert str(caught.value).startswith(uri.rstrip("/"))


def test_uris_of_other_shapes() -> None:
    """A port where a bucket goes, names before `@` that are no credentials, `file://localhost`."""
    with pytest.raises(TraceTableError) as caught:
        trace_source("s3://minio.local:9000/lake/hive/")
    assert str(caught.value).startswith(
        "s3://minio.local:9000/lake/hive: a s3:// URI names a bucket, and a bucket's name holds "
        "no ':'; give a store's address as ?endpoint_override=HOST:PORT&scheme=http"
    )
    azure = StoreURI.parse("abfs://traces@account.dfs.core.windows.net/agent/?x=1")
    assert azure is not None and azure.shown == "abfs://traces@account.dfs.core.windows.net/agent"
    assert azure.scrubbed("container traces, option 1") == "container traces, option 1"
    assert _object_store._below("", ["container", "agent"]) == "container/agent"  # Azure's root
    assert _object_store._below("/", ["tmp", "x"]) == "/tmp/x"
    assert _object_store._below("lake", ["a", "", "b"]) == "lake/a/b"


def test_file_localhost_is_this_machine(lake: tuple[Path, pa.Table]) -> None:
    root, table = lake
    found = trace_source(f"file://localhost{quote(str(root))}/")
    assert (len(found.files), found.rows) == (2, table.num_rows)


def test_footers_stop_at_the_first_bad_one(
    store: ObjectStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bad footer first among 200 files: the reads not yet begun are not made."""
    (tmp_path / "000.parquet").write_bytes(b"not parquet")
    for index in range(1, 200):
        pq.write_table(pa.table({"a": [index]}), tmp_path / f"{index:03d}.parquet")
    uri = store.upload(tmp_path, "many")
    reads = []
    footer = _source._footer

    def counted(source: TraceSource, path: str) -> tuple[pa.Schema, int]:
        reads.append(path)
        return footer(source, path)

    monkeypatch.setattr(_source, "_footer", counted)
    with pytest.raises(TraceTableError, match=r"many/000\.parquet: not a readable Parquet file"):
        trace_source(uri)
    assert 1 <= len(reads) < 100, len(reads)


def test_hive_values_keep_their_text_until_their_column_reads_them(tmp_path: Path) -> None:
    """`variant=007` is "007" (a guess at a number made it "7"); `trial=2` is a number."""
    table = traces(8, 1)
    folder = tmp_path / "variant=007" / "trial=2" / "note=a%2Fb"
    folder.mkdir(parents=True)
    pq.write_table(table.drop_columns(["variant", "trial"]), folder / "p.parquet")
    (found,) = trace_source(tmp_path).constants
    assert found == {"variant": pa.scalar("007"), "trial": pa.scalar(2, pa.int32())}
    (batch,) = session_batches(tmp_path)
    assert set(batch["variant"].to_pylist()) == {"007"}


def test_a_store_that_cannot_be_reached_is_one_line_naming_the_uri() -> None:
    with socket.socket() as closed:  # a port where nothing listens
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    options = f"endpoint_override=127.0.0.1:{port}&scheme=http&region=us-east-1"
    with pytest.raises(TraceTableError) as caught:
        trace_source(f"s3://test:{SECRET}@lake/hive/?{options}")
    message = str(caught.value)
    assert message.startswith("s3://lake/hive: cannot read this object storage URI (")
    assert "Could not connect" in message
    assert SECRET not in message


@pytest.mark.parametrize("where", ["disk", "bucket"])
def test_a_damaged_file_is_named_with_the_row_reading_stopped_at(
    store: ObjectStore, tmp_path: Path, where: str
) -> None:
    """A file whose footer reads but whose pages do not: one line, not an internal error."""
    table = traces(400, 3)
    pq.write_table(table, tmp_path / "part-0.parquet", row_group_size=1000)
    data = bytearray((tmp_path / "part-0.parquet").read_bytes())
    data[len(data) // 2 : len(data) // 2 + 4000] = b"A" * 4000  # pages past the first read
    (tmp_path / "part-0.parquet").write_bytes(bytes(data))
    source = str(tmp_path) if where == "disk" else store.upload(tmp_path, "damaged")
    with pytest.raises(TraceTableError, match=r"part-0\.parquet: cannot be read from row \d+ on"):
        list(score_batches(source, batch_rows=1000))


def test_the_command_reads_a_bucket_and_shows_no_credentials(
    store: ObjectStore, lake: tuple[Path, pa.Table], tmp_path: Path
) -> None:
    root, _ = lake
    uri = f"s3://test:{SECRET}@lake/hive/"
    remote = plangate_with(store.endpoint, "eval", uri, "-o", str(tmp_path / "scores"))
    assert remote.returncode == 0, remote.stderr
    assert "scores of s3://lake/hive" in remote.stdout
    assert SECRET not in remote.stdout + remote.stderr
    written = pa.concat_tables(pq.read_table(p) for p in sorted((tmp_path / "scores").iterdir()))
    assert sorted_scores(written).equals(sorted_scores(pa.concat_tables(score_batches(root))))
    summaries = [
        json.loads(plangate_with(store.endpoint, "eval", source, "--json").stdout)
        for source in (uri, str(root))
    ]
    assert summaries[0] == summaries[1]
    missing = plangate_with(store.endpoint, "eval", f"s3://test:{SECRET}@lake/missing/")
    assert missing.returncode == 2
    assert missing.stderr.strip().splitlines() == [
        "plangate: error: s3://lake/missing: no such object, and no prefix of objects with "
        "Parquet files (a .parquet name, or one without an extension); expected Parquet trace "
        "tables (a file, a prefix, or a glob)"
    ]


def test_scores_are_never_read_back_from_object_storage(tmp_path: Path) -> None:
    """Scores are written on disk only: a bucket cannot read them; a `file://` folder can."""
    assert not would_read("s3://lake/hive/", str(tmp_path / "scores"))
    (tmp_path / "sp ace").mkdir()
    for uri in (f"file://{tmp_path}/sp ace", f"file://localhost{quote(str(tmp_path))}/sp%20ace/"):
        assert would_read(uri, str(tmp_path / "sp ace" / "scores"))
        assert not would_read(uri, str(tmp_path / "scores"))


def test_scores_for_a_bucket_are_refused_before_any_work(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    code, _, err = run_main(
        ["eval", str(tmp_path / "missing"), "-o", f"s3://AKIAEXAMPLE:{SECRET}@lake/scores"], capsys
    )
    assert (code, err.strip().splitlines()) == (2, [
        "plangate: error: s3://lake/scores: -o takes a path on disk, not a URI: scores are "
        "written on disk (copy them to a bucket afterwards if they belong there)"
    ])  # fmt: skip
    assert list(tmp_path.iterdir()) == []  # no `s3:/` folder made here
    # Nor does `agreement` read its SCORES from a URI; neither prints the credentials.
    code, _, err = run_main(
        ["agreement", f"s3://AKIAEXAMPLE:{SECRET}@lake/scores/", str(tmp_path)], capsys
    )
    assert code == 2
    assert err.startswith("plangate: error: s3://lake/scores: SCORES is read from disk")
    assert SECRET not in err and "AKIAEXAMPLE" not in err


def test_a_gs_uri_gives_up_within_its_retry_limit() -> None:
    """Google's client retries for 15 minutes by default, silently, when it finds no
    credentials: a source says within `GCS_RETRY_SECONDS` (or the URI's own limit)."""
    options = lambda uri: pickle.loads(pickle.dumps(uri.store()[0])).__reduce__()[1][0]  # noqa: E731
    assert options(StoreURI.parse("gs://bucket/traces/"))["retry_time_limit"].total_seconds() == (
        GCS_RETRY_SECONDS
    )
    limited = StoreURI.parse("gs://bucket/traces/?retry_limit_seconds=3")
    assert options(limited)["retry_time_limit"].total_seconds() == 3


# -- the finder of object storage is the finder of files on disk ----------------------------------

SEGMENTS = ["a", "b", "date=1", "date=2", "_t", ".h", "a[1]", "b c", "d%e"]
FILES = ["x.parquet", "y.parquet", "z.txt", "_s.parquet"]
PATTERN = ["*", "a", "b", "date=*", "**", "*.parquet", "[ab]", "x.parquet", "[!x]*", "*"]
"""Glob segments (not `?`: in a URI it begins the options, as URIs have it)."""


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(st.lists(st.sampled_from(SEGMENTS), max_size=3), st.sampled_from(FILES)),
        min_size=1,
        max_size=8,
    ),
    st.lists(st.sampled_from(PATTERN + SEGMENTS[:4] + SEGMENTS[6:]), min_size=0, max_size=4),
    st.booleans(),
)
def test_a_uri_finds_the_files_a_path_finds(
    tree: list[tuple[list[str], str]], pattern: list[str], slash: bool
) -> None:
    """Through `file://`, the object storage finder lists and matches what the disk's finds."""
    with tempfile.TemporaryDirectory() as folder:
        root = planted(Path(folder), tree)
        given = "/".join([str(root), *pattern]) + ("/" if slash and pattern else "")
        on_disk = _found(lambda: _source._find_files(given))
        uri = StoreURI.parse(f"file://{quote(given, safe='/*[]!=')}")  # `b c` as `b%20c`
        through_uri = _found(lambda: find_objects(uri)[1:])  # type: ignore[arg-type]
        assert through_uri == on_disk, given


def planted(folder: Path, tree: list[tuple[list[str], str]]) -> Path:
    """Empty files at the tree's paths under `folder/root`; that root."""
    root = folder / "root"
    for segments, name in tree:
        (root.joinpath(*segments)).mkdir(parents=True, exist_ok=True)
        (root.joinpath(*segments) / name).write_bytes(b"")
    return root


def _found(find: object) -> tuple[list[str], str | None, bool] | str:
    """What a finder gives (the files, the Hive base, whether one file), or "nothing"."""
    try:
        files, base, single = find()  # type: ignore[operator]
    except TraceTableError:
        return "nothing"
    paths = [f.removeprefix("file://") for f in files]
    return paths, str(Path(base)) if base else None, single


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(st.lists(st.sampled_from(SEGMENTS[:6]), max_size=2), st.sampled_from(FILES)),
        min_size=1,
        max_size=6,
    ),
    st.lists(st.sampled_from(PATTERN + SEGMENTS[:4]), min_size=1, max_size=3),
    st.booleans(),
    st.tuples(
        st.lists(st.sampled_from(SEGMENTS[:6]), max_size=2),
        st.sampled_from(["scores", "_scores", "out.parquet", "x.parquet"]),
    ),  # fmt: skip
)
def test_scores_are_refused_exactly_where_the_next_run_would_read_them(
    tree: list[tuple[list[str], str]],
    pattern: list[str],
    slash: bool,
    output: tuple[list[str], str],
) -> None:
    """`would_read` says yes exactly when the scores, once written, are among the source's files."""
    with tempfile.TemporaryDirectory() as folder:
        root = planted(Path(folder), tree)
        given = "/".join([str(root), *pattern]) + ("/" if slash else "")
        out = root.joinpath(*output[0], output[1])
        if out.exists() or _found(lambda: _source._find_files(given)) == "nothing":
            return  # refused (exists, without --force) or replaced; no source: no run
        refused = would_read(given, str(out))
        out.parent.mkdir(parents=True, exist_ok=True)
        # Scores of a source named as one file are one file; of any other, a folder of parts.
        written = out if Path(given).is_file() else out / "part-00000.parquet"
        written.parent.mkdir(parents=True, exist_ok=True)
        written.write_bytes(b"")
        found = _found(lambda: _source._find_files(given))
        read = found != "nothing" and str(written) in found[0]
        assert refused == read, (given, str(out))
