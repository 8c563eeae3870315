"""Folders other tools write: files without an extension, and tables of a table format.

Hive, Trino and Athena name their Parquet files without an extension (`000000_0`); a Delta
Lake table (written here by `deltalake`, as Databricks and delta-rs write them) keeps the files
of its earlier versions beside the current ones, and Iceberg and Hudi tables do too. The same
folders are put in a bucket served by a local S3 server, read by pyarrow's own S3 client.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from unittest import mock

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake

from plangate.evaluators import evaluate, score_batches, session_batches, trace_source
from plangate.replay import TraceTableError
from tests.ci.bad_inputs import assert_one_line_naming, run_main
from tests.evaluators.test_stream import sorted_scores, traces
from tests.object_store import ObjectStore, object_store

SECRET = "wJalrXUtnFEMIK7MDENGbPxRfiCYzEXAMPLEKEY"
UUID = "1b2c3d4e-5f60-4718-9a2b-3c4d5e6f7a8b"
OLD = traces(24, 2, seed=5)
NEW = traces(24, 2, seed=6)
"""Two versions of one table: the same sessions and turns, other spans and outcomes."""


@pytest.fixture(scope="module")
def store() -> Iterator[ObjectStore]:
    with object_store() as running:
        yield running


def hive_files(folder: Path) -> pa.Table:
    """A table in Hive's layout as Hive and Athena write it: no file has an extension."""
    table = traces(40, 2)
    for day, (name, half) in zip(
        ("2026-11-30", "2026-12-01"),
        (("000000_0", table.slice(0, 200)), ("20261201_0915_00004_x7k2_4f1e", table.slice(200))),
        strict=True,
    ):
        (folder / f"date={day}").mkdir(parents=True)
        pq.write_table(half, folder / f"date={day}" / name)
    (folder / "notes.txt").write_text("what these are")  # another extension: not read
    (folder / "schema.json").write_text("{}")
    return table


def test_files_without_an_extension_are_read_as_hive_writes_them(tmp_path: Path) -> None:
    table = hive_files(tmp_path / "hive")
    for source in (tmp_path / "hive", f"{tmp_path}/hive/date=*/", f"{tmp_path}/hive/*/0*"):
        found = trace_source(source)
        expected = table if "0*" not in str(source) else table.slice(0, 200)
        assert found.rows == expected.num_rows, source
        assert pa.concat_tables(session_batches(found)).equals(expected)
    (tmp_path / "hive" / "date=2026-11-30" / "LICENSE").write_text("MIT")  # no Parquet: not read
    assert trace_source(tmp_path / "hive").rows == table.num_rows
    cut = (tmp_path / "hive" / "date=2026-11-30" / "000000_0").read_bytes()[:-100]
    (tmp_path / "hive" / "date=2026-11-30" / "000001_0").write_bytes(cut)  # Parquet, damaged
    with pytest.raises(TraceTableError, match=r"000001_0: not a readable Parquet file"):
        trace_source(tmp_path / "hive")


def test_a_partition_named_on_its_own_gives_its_files_its_key(tmp_path: Path) -> None:
    table = traces(8, 1)
    folder = tmp_path / "traces" / "date=2026-11-30" / "variant=alyx"
    folder.mkdir(parents=True)
    pq.write_table(table.drop_columns(["variant"]), folder / "part-0.parquet")
    for source in (folder, f"{folder}/*.parquet", f"{folder.parent}/*/"):
        (batch,) = session_batches(source)
        assert batch["variant"].to_pylist() == ["alyx"] * table.num_rows, source


def test_files_without_an_extension_in_a_bucket(store: ObjectStore, tmp_path: Path) -> None:
    table = hive_files(tmp_path / "hive")
    uri = store.upload(tmp_path / "hive", "athena")
    for source in (uri, f"{uri}/date=*/"):
        assert trace_source(source).rows == table.num_rows
    assert sorted_scores(pa.concat_tables(score_batches(uri))).equals(
        sorted_scores(evaluate(table))
    )


def delta_table(folder: Path) -> None:
    """A Delta Lake table partitioned by `variant`, written twice: only NEW is its table now."""
    write_deltalake(folder, OLD, partition_by=["variant"])
    write_deltalake(folder, NEW, partition_by=["variant"], mode="overwrite")


def test_a_delta_table_is_read_as_its_current_version(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    delta_table(tmp_path / "delta")
    on_disk = sorted(tmp_path.glob("delta/variant=*/*.parquet"))
    assert len(on_disk) > len(DeltaTable(tmp_path / "delta").file_uris())  # old files are there
    partition = next(tmp_path.glob("delta/variant=*"))
    for source in (tmp_path / "delta", f"{tmp_path}/delta/variant=*/", partition):
        read = pa.concat_tables(session_batches(source))
        assert read.num_rows == NEW.num_rows, source
        assert sorted(read["trace_id"].to_pylist()) == sorted(NEW["trace_id"].to_pylist())
    assert sorted_scores(pa.concat_tables(score_batches(tmp_path / "delta"))).equals(
        sorted_scores(evaluate(NEW))
    )
    code, out, _ = run_main(["eval", str(tmp_path / "delta")], capsys)
    assert (code, f"{NEW.num_rows:,} spans" in out) == (0, True)


def test_a_folder_of_several_tables_reads_each_ones_current_files(tmp_path: Path) -> None:
    for name in ("a", "b"):
        delta_table(tmp_path / "lake" / name)
    (tmp_path / "lake" / "plain").mkdir()
    pq.write_table(NEW, tmp_path / "lake" / "plain" / "part-0.parquet")
    current = [
        *(uri for name in ("a", "b") for uri in DeltaTable(tmp_path / "lake" / name).file_uris()),
        str(tmp_path / "lake" / "plain" / "part-0.parquet"),
    ]
    assert sorted(trace_source(tmp_path / "lake").files) == sorted(current)


def test_a_delta_table_without_deltalake_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    delta_table(tmp_path / "delta")
    with mock.patch.dict(sys.modules, {"deltalake": None}):  # not installed
        code, _, err = run_main(["eval", str(tmp_path / "delta")], capsys)
    assert_one_line_naming(code, err, tmp_path / "delta", "no deltalake")
    assert "a Delta Lake table (_delta_log/ is there)" in err
    assert "install plangate[delta]" in err


@pytest.mark.parametrize(
    ("configuration", "named"),
    [
        ({"delta.columnMapping.mode": "name"}, "column mapping"),
        ({"delta.enableDeletionVectors": "true"}, "deletion vectors"),
    ],
)
def test_a_delta_table_its_files_cannot_give_is_refused(
    tmp_path: Path, configuration: dict[str, str], named: str
) -> None:
    write_deltalake(tmp_path / "delta", NEW, configuration=configuration)
    with pytest.raises(TraceTableError, match=f"Delta Lake table .* it allows {named}"):
        trace_source(tmp_path / "delta")


def other_formats(root: Path) -> dict[str, Path]:
    """An Iceberg and a Hudi table's folders, as their writers leave them, with trace files."""
    iceberg, hudi = root / "iceberg", root / "hudi"
    (iceberg / "metadata").mkdir(parents=True)
    (iceberg / "metadata" / f"00001-{UUID}.metadata.json").write_text("{}")
    (iceberg / "data").mkdir()
    pq.write_table(NEW, iceberg / "data" / "00000-0-1a2b.parquet")
    (hudi / ".hoodie").mkdir(parents=True)
    (hudi / ".hoodie" / "hoodie.properties").write_text("hoodie.table.name=traces\n")
    (hudi / "date=2026-12-01").mkdir()
    pq.write_table(NEW, hudi / "date=2026-12-01" / "1a2b_0-1-0_20261201.parquet")
    return {"Apache Iceberg": iceberg, "Apache Hudi": hudi}


def test_iceberg_and_hudi_tables_are_refused(tmp_path: Path) -> None:
    for kind, folder in other_formats(tmp_path).items():
        partition = next(p for p in folder.iterdir() if p.is_dir() and p.name[0] not in "._m")
        for source in (folder, f"{folder}/*/", partition):
            with pytest.raises(TraceTableError, match=f"^{folder}: an? {kind} table") as caught:
                trace_source(source)
            assert "export its current version to Parquet" in str(caught.value)
        named = next(folder.rglob("*.parquet"))
        assert trace_source(named).rows == NEW.num_rows  # a file named on its own is read


def test_a_delta_table_in_a_bucket_is_read_as_its_current_version(
    store: ObjectStore, tmp_path: Path
) -> None:
    delta_table(tmp_path / "delta")
    uri = store.upload(tmp_path / "delta", "delta")
    endpoint = store.endpoint.removeprefix("http://")
    given = f"s3://test:{SECRET}@lake/delta/?endpoint_override={endpoint}&scheme=http"
    current = DeltaTable(tmp_path / "delta").file_uris()
    for source in (uri, f"{uri}/variant=*/", given):
        with mock.patch.dict(os.environ):
            if source == given:  # the endpoint from the URI only, for both readers
                del os.environ["AWS_ENDPOINT_URL"]
            found = trace_source(source)
            assert len(found.files) == len(current), source
            assert pa.concat_tables(session_batches(found)).num_rows == NEW.num_rows
    (tmp_path / "mixed" / "plain").mkdir(parents=True)  # a table beside a folder of files
    delta_table(tmp_path / "mixed" / "delta")
    pq.write_table(NEW, tmp_path / "mixed" / "plain" / "part-0.parquet")
    mixed = trace_source(store.upload(tmp_path / "mixed", "mixed"))
    assert sorted(mixed.files) == sorted(
        [
            *(
                f"s3://lake/mixed/delta/{uri.split('/delta/')[1]}"
                for uri in DeltaTable(tmp_path / "mixed" / "delta").file_uris()
            ),
            "s3://lake/mixed/plain/part-0.parquet",
        ]
    )
    not_installed = mock.patch.dict(sys.modules, {"deltalake": None})
    with not_installed, pytest.raises(TraceTableError, match="install plangate.delta.") as caught:
        trace_source(given)
    assert str(caught.value).startswith(f"{uri}: a Delta Lake table")
    assert SECRET not in str(caught.value)


def test_other_table_formats_in_a_bucket_are_refused(store: ObjectStore, tmp_path: Path) -> None:
    for kind, folder in other_formats(tmp_path).items():
        prefix = store.upload(folder, f"formats/{folder.name}")
        partition = next(p for p in folder.iterdir() if p.is_dir() and p.name[0] not in "._m")
        for source in (prefix, f"{prefix}/*/", f"{prefix}/{partition.name}/"):
            with pytest.raises(TraceTableError, match=f"^{prefix}: an? {kind} table"):
                trace_source(source)


def with_variants(table: pa.Table, values: list[str]) -> pa.Table:
    """Each session's spans under one of `values` as their variant."""
    sessions = table["session_id"].to_pylist()
    number = {s: n for n, s in enumerate(sorted(set(sessions)))}
    variants = [values[number[s] % len(values)] for s in sessions]
    return table.set_column(table.schema.get_field_index("variant"), "variant", pa.array(variants))


def test_partition_values_delta_escapes_are_read(tmp_path: Path) -> None:
    """`variant=a%20b/` on disk, `variant=a%2520b/` in the log: the folder's value is `a b`."""
    values = ["a b", "x%41y", "2026-11-30 10:00", "k=v", "é", "plain"]
    old, new = with_variants(OLD, values), with_variants(NEW, values)
    write_deltalake(tmp_path / "delta", old, partition_by=["variant"])
    write_deltalake(tmp_path / "delta", new, partition_by=["variant"], mode="overwrite")
    read = pa.concat_tables(session_batches(tmp_path / "delta"))
    assert sorted(read["variant"].to_pylist()) == sorted(new["variant"].to_pylist())


def test_links_and_a_table_the_folder_holds_whole(tmp_path: Path) -> None:
    delta_table(tmp_path / "real" / "delta")
    (tmp_path / "lake" / "plain").mkdir(parents=True)
    pq.write_table(NEW, tmp_path / "lake" / "plain" / "part-0.parquet")
    (tmp_path / "lake" / "linked").symlink_to(tmp_path / "real" / "delta")
    assert trace_source(tmp_path / "lake").rows == 2 * NEW.num_rows
    assert trace_source(tmp_path / "lake" / "linked").rows == NEW.num_rows
    gone = Path(DeltaTable(tmp_path / "real" / "delta").file_uris()[0])
    gone.unlink()  # a file of the current version removed by hand
    for source in (tmp_path / "real" / "delta", gone.parent, f"{tmp_path}/real/delta/*/"):
        with pytest.raises(TraceTableError, match=f"current version holds {gone}.*is not there"):
            trace_source(source)


def test_an_empty_table_and_an_empty_partition_value(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    delta_table(tmp_path / "delta")
    DeltaTable(tmp_path / "delta").delete()
    with pytest.raises(TraceTableError, match="current version holds no file: the table is empty"):
        trace_source(tmp_path / "delta")
    values = with_variants(NEW, ["", "x"])
    write_deltalake(tmp_path / "blank", values, partition_by=["variant"])
    read = pa.concat_tables(session_batches(tmp_path / "blank"))
    assert sorted(read["variant"].to_pylist(), key=str) == sorted(
        [None if v == "" else v for v in values["variant"].to_pylist()], key=str
    )  # `variant=/`: null, as the log says
    monkeypatch.chdir(next((tmp_path / "blank").glob("variant=x")))
    for source in (".", "./", "*.parquet"):  # a partition named as `.` keeps its key
        assert set(pa.concat_tables(session_batches(source))["variant"].to_pylist()) == {"x"}


def test_a_metadata_folder_of_other_files_is_no_iceberg_table(tmp_path: Path) -> None:
    (tmp_path / "metadata").mkdir()
    (tmp_path / "metadata" / "run-42.metadata.json").write_text("{}")
    (tmp_path / "runs" / "traces").mkdir(parents=True)
    pq.write_table(NEW, tmp_path / "runs" / "traces" / "part-0.parquet")
    assert trace_source(tmp_path / "runs" / "traces").rows == NEW.num_rows


def test_globs_into_tables_in_a_bucket(store: ObjectStore, tmp_path: Path) -> None:
    """Tables below a glob's fixed part: found in the folders its walk lists."""
    for name in ("a", "b"):
        delta_table(tmp_path / "two" / name)
    other_formats(tmp_path / "formats")
    uri = store.upload(tmp_path / "two", "two")
    for source in (uri, f"{uri}/*/", f"{uri}/*/variant=*/*.parquet"):
        assert trace_source(source).rows == 2 * NEW.num_rows, source
    formats = store.upload(tmp_path / "formats", "formats")
    with pytest.raises(TraceTableError, match="an Apache Iceberg table"):
        trace_source(f"{formats}/*/data/*.parquet")


def test_hadoop_folder_objects_and_uri_options(store: ObjectStore, tmp_path: Path) -> None:
    """EMRFS's `x_$folder$` objects are not read; pyarrow's options reach deltalake too."""
    folder = tmp_path / "warehouse" / "date=2026-11-30"
    folder.mkdir(parents=True)
    pq.write_table(NEW, folder / "000000_0")
    (tmp_path / "warehouse" / "date=2026-11-30_$folder$").write_bytes(b"")
    uri = store.upload(tmp_path / "warehouse", "warehouse")
    for source in (uri, f"{uri}/date=*"):
        assert trace_source(source).rows == NEW.num_rows, source
    delta_table(tmp_path / "delta")
    uri = store.upload(tmp_path / "delta", "options")
    for options in ("scheme=http", "allow_bucket_creation=false&region=eu-west-1"):
        assert trace_source(f"{uri}/?{options}").rows == NEW.num_rows, options
    with mock.patch.dict(os.environ):  # the S3 service's own endpoint variable
        os.environ["AWS_ENDPOINT_URL_S3"] = os.environ.pop("AWS_ENDPOINT_URL")
        assert trace_source(uri).rows == NEW.num_rows
    gone = next(f for f in store.filesystem.get_file_info(
        pafs.FileSelector("lake/options", recursive=True)
    ) if f.path.endswith(".parquet") and f.path.split("/")[-1] in str(
        DeltaTable(tmp_path / "delta").file_uris()
    ))  # fmt: skip
    store.filesystem.delete_file(gone.path)
    for source in (uri, f"{uri}/variant=*/"):
        with pytest.raises(TraceTableError, match="current version holds lake/options/"):
            trace_source(source)
