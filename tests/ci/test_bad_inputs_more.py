"""Session stores, plan files and golden dataset folders, every kind bad: exit 2, one line.

The companion of `tests/ci/test_bad_files.py` (same contract, same kinds of bad file) for the
arguments that are not one file read whole: `--store` (a SQLite session store: also a file
that is not SQLite, SQLite of another schema, a truncated store, a saved state that is not a
JSON object), `resume --plan`, `dataset build --corpus`, and every argument that takes a
golden dataset folder (also a folder without a manifest, a manifest that is not JSON or of the
wrong shape, a manifest naming a missing Parquet file, a Parquet file of the wrong table or
cut short). Each dataset kind is a shipped dataset copied and broken in one place, with its
manifest's hashes made to agree, so that the check under test is the one that finds it. The
Phoenix commands get a URL where nothing listens: they must name the bad input before they
reach for a server.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
import tempfile
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from plangate.ci.cli._main import main
from plangate.harness import SessionStore
from plangate.replay import MANIFEST, DatasetError, read_dataset
from plangate.replay._dataset import JSON_COLUMNS
from tests.ci.bad_inputs import (
    FILE_KINDS,
    GOOD,
    Kind,
    assert_one_line_naming,
    dead_phoenix,
    make_good_files,
    other_parquet,
    run_main,
)
from tests.conftest import REPO

SMALL_DATASET = REPO / "datasets" / "context-management"
"""The shipped dataset the dataset kinds break (the smallest: copied for every example)."""
PARQUET_FILES = sorted(p.name for p in SMALL_DATASET.glob("*.parquet"))
REQUEST = (
    "Sort the LLM spans by latency, identify the bottlenecks, and write a report with suggested "
    "improvements."
)
STORES: dict[str, Path] = {}
"""`paused`: a store with session `paused` awaiting plan approval; `full`: many sessions."""
PHOENIX = dead_phoenix()
EXPERIMENT = ["--model", "cassette", *PHOENIX]


# Session stores ---------------------------------------------------------------------------


def _text(path: Path, noise: bytes) -> Path:
    path.write_bytes(b"sessions, not in SQLite\n" + noise)
    return path


def _sqlite_header(path: Path, noise: bytes) -> Path:
    path.write_bytes(b"SQLite format 3\x00" + noise * (1 + 512 // len(noise)))
    return path


def _other_schema(path: Path, noise: bytes) -> Path:
    with sqlite3.connect(path) as db:
        db.execute(f"create table t{noise.hex()[:16]} (a, b)")
        db.execute(f"insert into t{noise.hex()[:16]} values (?, ?)", (noise, len(noise)))
    db.close()
    return path


def _other_sessions(path: Path, noise: bytes) -> Path:
    with sqlite3.connect(path) as db:
        db.execute("create table sessions (id integer primary key, data blob)")
        db.execute("insert into sessions (data) values (?)", (noise,))
    db.close()
    return path


def _truncated_store(path: Path, noise: bytes) -> Path:
    data = STORES["full"].read_bytes()
    page = 4096  # the default page size: SQLite checks the pages a file ought to have
    pages = len(data) // page
    path.write_bytes(data[: page * (1 + noise[0] % (pages - 1))])
    return path


def _state_not_json(path: Path, noise: bytes) -> Path:
    shutil.copy(STORES["full"], path)
    state = [noise.hex() + "{", json.dumps([noise.hex()]), str(len(noise))][noise[0] % 3]
    with sqlite3.connect(path) as db:
        db.execute("update sessions set state = ? where session_id = 's3'", (state,))
    db.close()
    return path


STORE_KINDS: dict[str, Kind] = {
    **FILE_KINDS,
    "text, not SQLite": _text,
    "a SQLite header on garbage": _sqlite_header,
    "SQLite of another schema": _other_schema,
    "a sessions table of other columns": _other_sessions,
    "a truncated store": _truncated_store,
    "a saved state that is no JSON object": _state_not_json,
}


# Golden dataset folders -------------------------------------------------------------------


def _dataset(path: Path) -> Path:
    shutil.copytree(SMALL_DATASET, path)
    return path


def _rehash(path: Path, name: str) -> None:
    """Make the manifest agree with the file `name`: the next check is the one under test."""
    manifest = json.loads((path / MANIFEST).read_text(encoding="utf-8"))
    manifest["files"][name] = hashlib.sha256((path / name).read_bytes()).hexdigest()
    (path / MANIFEST).write_text(json.dumps(manifest), encoding="utf-8")


def _no_manifest(path: Path, noise: bytes) -> Path:
    (_dataset(path) / MANIFEST).unlink()
    return path


def _manifest(data: Callable[[bytes], bytes]) -> Kind:
    def make(path: Path, noise: bytes) -> Path:
        (_dataset(path) / MANIFEST).write_bytes(data(noise))
        return path

    return make


def wrong_manifests(byte: int) -> list[object]:
    """Manifests of the wrong shape: JSON, but not what a dataset's manifest holds."""
    return [
        [1, 2],
        {"name": "x", "files": {}},
        {"name": "x", "schema_version": 1, "files": byte},
        {"name": "x", "schema_version": 1, "files": [str(byte)]},
        {"name": "x", "schema_version": byte + 2, "files": {}},
        {"name": "x", "schema_version": 1, "files": dict.fromkeys(PARQUET_FILES, byte)},
    ]


def _wrong_manifest(noise: bytes) -> bytes:
    shapes = wrong_manifests(noise[0])
    return json.dumps(shapes[noise[-1] % len(shapes)]).encode()


def _missing_file(path: Path, noise: bytes) -> Path:
    (_dataset(path) / PARQUET_FILES[noise[0] % len(PARQUET_FILES)]).unlink()
    return path


def _wrong_table(path: Path, noise: bytes) -> Path:
    name = PARQUET_FILES[noise[0] % len(PARQUET_FILES)]
    other = PARQUET_FILES[(noise[0] + 1) % len(PARQUET_FILES)]
    _dataset(path)
    if noise[-1] % 2:
        other_parquet(path / name, noise)
    else:  # a table of the dataset, in the wrong file
        pq.write_table(pq.read_table(SMALL_DATASET / other), path / name)
    _rehash(path, name)
    return path


def _cut_file(path: Path, noise: bytes) -> Path:
    name = PARQUET_FILES[noise[0] % len(PARQUET_FILES)]
    data = (_dataset(path) / name).read_bytes()
    (path / name).write_bytes(data[: len(data) * (noise[-1] % 16) // 16])
    _rehash(path, name)
    return path


def _cell_not_json(path: Path, noise: bytes) -> Path:
    """One cell of a column that replaying parses as JSON, garbled (its hash made to agree)."""
    cells = [(name, column) for name, columns in JSON_COLUMNS.items() for column in columns]
    name, column = cells[noise[0] % len(cells)]
    table = pq.read_table(_dataset(path) / name)
    filled = [i for i, v in enumerate(table[column].to_pylist()) if v is not None]
    row = filled[noise[-1] % len(filled)]
    values = table[column].to_pylist()
    values[row] = values[row][: noise[-1] % max(1, len(values[row]))] + "{" + noise.hex()
    index = table.schema.get_field_index(column)
    garbled = pa.array(values, table.schema.field(column).type)
    pq.write_table(table.set_column(index, table.schema.field(column), garbled), path / name)
    _rehash(path, name)
    return path


BROKEN_DATASET_KINDS: dict[str, Kind] = {
    "a dataset without a manifest": _no_manifest,
    "a manifest that is not JSON": _manifest(lambda noise: b'{"name": ' + noise),
    "a manifest that is not UTF-8": _manifest(lambda noise: b'{"name": "\xff' + noise),
    "a manifest of the wrong shape": _manifest(_wrong_manifest),
    "a manifest naming a missing Parquet file": _missing_file,
    "a Parquet file of the wrong table": _wrong_table,
    "a truncated Parquet file in a dataset": _cut_file,
    "a JSON cell that is not JSON": _cell_not_json,
}
DATASET_KINDS: dict[str, Kind] = {**FILE_KINDS, **BROKEN_DATASET_KINDS}
VALIDATE_FINDS = frozenset(BROKEN_DATASET_KINDS) - {"a dataset without a manifest"}
"""The kinds `dataset validate` reports as a dataset's problems (exit 1), not unusable input."""


def _gate_on(dataset: str, out: Path) -> str:
    gate = out.parent / "gate.toml"
    gate.write_text(
        f'[[datasets]]\npath = "{dataset}"\n[baseline]\nvariant = "alyx"\nmodel = "cassette"\n'
        '[candidate]\nvariant = "alyx"\nmodel = "cassette"\n',
        encoding="utf-8",
    )
    return str(gate)


Argv = Callable[[str, Path], list[str]]
COMMANDS: dict[str, tuple[Argv, dict[str, Kind]]] = {
    "run --store": (lambda p, out: ["run", "hi", "--variant", "naive", "--store", p], STORE_KINDS),
    "runs --store": (lambda p, out: ["runs", "--store", p], STORE_KINDS),
    "plan --store": (lambda p, out: ["plan", "paused", "--store", p], STORE_KINDS),
    "resume --store": (lambda p, out: ["resume", "paused", "--approve", "--store", p], STORE_KINDS),
    "resume --plan": (
        lambda p, out: ["resume", "paused", "--store", str(STORES["paused"]), "--plan", p],
        FILE_KINDS,
    ),
    "dataset build --corpus": (  # the files in a corpus: the importers' (test_bad_files.py)
        lambda p, out: ["dataset", "build", "third-party", "-o", str(out), "--corpus", p],
        FILE_KINDS,
    ),
    "replay": (lambda p, out: ["replay", p], DATASET_KINDS),
    "dataset validate": (lambda p, out: ["dataset", "validate", p], DATASET_KINDS),
    "eval --rubric DATASET": (  # its bad files: test_bad_files.py
        lambda p, out: ["eval", str(GOOD["table"]), "--rubric", p],
        BROKEN_DATASET_KINDS,
    ),
    "gate [[datasets]] path": (
        lambda p, out: ["gate", _gate_on(p, out), "-o", str(out)],
        DATASET_KINDS,
    ),
    "compare --dataset": (lambda p, out: ["compare", "alyx", "--dataset", p], DATASET_KINDS),
    "phoenix dataset": (lambda p, out: ["phoenix", "dataset", p, *PHOENIX], DATASET_KINDS),
    "phoenix experiment": (
        lambda p, out: ["phoenix", "experiment", p, "--variant", "alyx", *EXPERIMENT],
        DATASET_KINDS,
    ),
}
"""Each command with the bad input in one of its arguments, and the kinds of bad input drawn."""

GOOD_FOR = {
    # No file, or an empty one, is a new store: `run` saves its session there; it never reads
    # the other sessions (`runs`, `plan` and `resume` name a damaged one).
    "run --store": frozenset({"missing", "empty", "a saved state that is no JSON object"}),
    # An empty file is an empty SQLite database: a store with no sessions yet.
    "runs --store": frozenset({"empty"}),
}
"""What is good input to a command, among the kinds drawn."""

CASES = [(command, kind) for command, (_, kinds) in sorted(COMMANDS.items()) for kind in kinds]


@pytest.fixture(scope="module", autouse=True)
def good_inputs(tmp_path_factory: pytest.TempPathFactory) -> None:
    folder = tmp_path_factory.mktemp("good")
    make_good_files(folder)
    STORES["paused"] = folder / "paused.db"
    argv = ["run", REQUEST, "--variant", "flux-review", "--store", str(STORES["paused"])]
    assert main([*argv, "--session", "paused"]) == 0
    STORES["full"] = folder / "full.db"
    store = SessionStore(STORES["full"])
    for n in range(12):  # several pages, so that a truncated copy can lose some
        state = {"metadata": {}, "history": ["a step of the session"] * 200}
        store.save(f"s{n}", "idle", state, variant="alyx", user_id="u")
    store.close()


@pytest.mark.parametrize(("command", "kind"), CASES)
@settings(
    max_examples=2,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(noise=st.binary(min_size=1, max_size=64))
def test_a_bad_input_is_exit_2_and_one_line_naming_it(
    command: str, kind: str, noise: bytes, capsys: pytest.CaptureFixture[str]
) -> None:
    if kind in GOOD_FOR.get(command, ()):
        return  # good input for this command
    argv, kinds = COMMANDS[command]
    with tempfile.TemporaryDirectory() as folder:
        path = kinds[kind](Path(folder) / "input", noise)
        code, out, err = run_main(argv(str(path), Path(folder) / "out"), capsys)
    label = f"{command} with {kind}"
    if command == "dataset validate" and kind in VALIDATE_FINDS:
        # Finding what is wrong with a dataset is the command's job: exit 1, every problem on
        # a line of its own that names the file.
        assert code == 1 and not err, f"{label}: exit {code}: {err}"
        head, *problems = out.strip().splitlines()
        assert head.startswith(f"{path}: ") and problems, f"{label}: {out}"
        assert all(line.strip().startswith(str(path)) for line in problems), f"{label}: {out}"
        return
    assert_one_line_naming(code, err, path, label)


@pytest.mark.parametrize("shape", range(len(wrong_manifests(0))))
def test_every_wrong_manifest_is_one_dataset_error_naming_it(shape: int, tmp_path: Path) -> None:
    """Each shape for sure (hypothesis above draws a few): one line naming the manifest."""
    folder = _dataset(tmp_path / "golden")
    (folder / MANIFEST).write_text(json.dumps(wrong_manifests(7)[shape]), encoding="utf-8")
    with pytest.raises(DatasetError) as raised:
        read_dataset(folder)
    assert str(folder / MANIFEST) in str(raised.value) and "\n" not in str(raised.value)
