"""Every command that takes a path, fed every kind of bad file: exit 2, one line naming it.

Every command meets every kind of bad file; hypothesis draws the file's bytes. The real command
line runs in process (`main`), so a traceback would surface as exit 3 and fail the test.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from plangate.ci.cli._main import main
from plangate.evaluators import evaluate
from plangate.replay import build_table
from tests.helpers import turn_rows

GOOD: dict[str, Path] = {}
"""Good inputs for the other arguments of a command (a trace table, a score table)."""

HUGE_BYTES = 24 * 1024 * 1024


def _good_files(folder: Path) -> None:
    table = build_table(turn_rows("s", calls=[("search", {"q": "x"})]))
    GOOD["table"] = folder / "table.parquet"
    pq.write_table(table, GOOD["table"])
    GOOD["scores"] = folder / "scores.parquet"
    pq.write_table(evaluate(table), GOOD["scores"])
    GOOD["huge"] = folder / "huge.toml"  # .toml: it serves as a variant file too
    GOOD["huge"].write_bytes(b"[" * 1024 + b"1," * (HUGE_BYTES // 2))
    GOOD["requests"] = folder / "requests.json"
    GOOD["requests"].write_text(json.dumps([{"session_id": "s", "turns": ["hi"]}]), "utf-8")


Kind = Callable[[Path, bytes], Path]
"""Makes one kind of bad file at the path (from some random bytes); returns what to pass."""


def _write(data: bytes) -> Kind:
    def make(path: Path, noise: bytes) -> Path:
        path.write_bytes(data)
        return path

    return make


def _missing(path: Path, noise: bytes) -> Path:
    return path


def _folder(path: Path, noise: bytes) -> Path:
    path.mkdir()
    return path


def _not_utf8(path: Path, noise: bytes) -> Path:
    path.write_bytes(b"\xff\xfe\xfa" + noise + b"\xc3\x28")
    return path


def _truncated_parquet(path: Path, noise: bytes) -> Path:
    data = GOOD["table"].read_bytes()
    path.write_bytes(data[: max(8, len(data) * (1 + len(noise) % 7) // 9)])
    return path


def _random_parquet(path: Path, noise: bytes) -> Path:
    path.write_bytes(b"PAR1" + noise + b"PAR1")
    return path


def _huge(path: Path, noise: bytes) -> Path:
    return GOOD["huge"]  # written once: commands only read their inputs


def _other_parquet(path: Path, noise: bytes) -> Path:
    pq.write_table(pa.table({"x": [1, 2, 3]}), path)  # Parquet, but not the table expected
    return path


KINDS: dict[str, Kind] = {
    "missing": _missing,
    "a folder": _folder,
    "empty": _write(b""),
    "not UTF-8": _not_utf8,
    "truncated Parquet": _truncated_parquet,
    "random Parquet": _random_parquet,
    "other Parquet": _other_parquet,
    "JSON of the wrong shape": _write(json.dumps({"unexpected": [1, {"x": None}]}).encode()),
    "JSON of the wrong type": _write(b"42"),
    "a JSON list of the wrong things": _write(b'[1, "two", null]'),
    "huge": _huge,
}

IMPORT_FORMATS = ("openai-messages", "otlp-json", "phoenix", "swe-agent", "tau-bench", "tau2")


def _importing(fmt: str) -> Callable[[str, Path], list[str]]:
    return lambda p, out: ["import", fmt, p, "-o", str(out)]


COMMANDS: dict[str, Callable[[str, Path], list[str]]] = {
    "eval": lambda p, out: ["eval", p],
    "eval --rubric": lambda p, out: ["eval", str(GOOD["table"]), "--rubric", p],
    **{f"import {fmt}": _importing(fmt) for fmt in IMPORT_FORMATS},
    "record --requests": lambda p, out: [
        "record",
        "--requests",
        p,
        "--variant",
        "naive",
        "--model",
        "sim:diligent",
        "-o",
        str(out),
    ],  # fmt: skip
    "record --variant": lambda p, out: [
        "record",
        "--requests",
        str(GOOD["requests"]),
        "--variant",
        p + ".toml",
        "--model",
        "sim:diligent",
        "-o",
        str(out),
    ],  # fmt: skip
    "dataset from-traces": lambda p, out: ["dataset", "from-traces", p, "-o", str(out)],
    "replay": lambda p, out: ["replay", p],
    "gate": lambda p, out: ["gate", p, "-o", str(out)],
    "compare --gate": lambda p, out: ["compare", "alyx", "--gate", p],
    "run @request": lambda p, out: ["run", "@" + p],
    "run --variant": lambda p, out: ["run", "hi", "--variant", p + ".toml"],
    "runs --store": lambda p, out: ["runs", "--store", p],
    "phoenix annotate scores": lambda p, out: ["phoenix", "annotate", p, str(GOOD["table"])],
    "phoenix annotate traces": lambda p, out: ["phoenix", "annotate", str(GOOD["scores"]), p],
}
"""Each command, with the bad path in one of its path arguments."""

GOOD_FOR = {
    # A request can say anything, at any size: only what is not text is bad (random bytes
    # framed as Parquet can be valid UTF-8 text).
    "run @request": frozenset(KINDS)
    - {"missing", "a folder", "empty", "not UTF-8", "truncated Parquet"},
    # An empty file is an empty SQLite database: a store with no sessions yet.
    "runs --store": frozenset({"empty"}),
}
"""What is good input to a command, among the kinds of file drawn."""


@pytest.fixture(scope="module", autouse=True)
def good_files(tmp_path_factory: pytest.TempPathFactory) -> None:
    _good_files(tmp_path_factory.mktemp("good"))


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("command", sorted(COMMANDS))
@settings(
    max_examples=3,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(noise=st.binary(min_size=1, max_size=64))
def test_a_bad_file_is_exit_2_and_one_line_naming_it(
    command: str, kind: str, noise: bytes, capsys: pytest.CaptureFixture[str]
) -> None:
    if kind in GOOD_FOR.get(command, ()):
        return  # good input for this command
    with tempfile.TemporaryDirectory() as folder:
        path = KINDS[kind](Path(folder) / "input", noise)
        if command.endswith("--variant"):  # the variant is the bad file
            path = path.rename(path.with_suffix(".toml")) if path.exists() else path
            argv = COMMANDS[command](str(path.with_suffix("")), Path(folder) / "out")
            named = str(path.with_suffix(".toml"))
        else:
            argv = COMMANDS[command](str(path), Path(folder) / "out")
            named = str(path)
        capsys.readouterr()
        code = main(argv)
        err = capsys.readouterr().err
    assert code == 2, f"{command} with {kind}: exit {code}: {err}"
    lines = err.strip().splitlines()
    assert len(lines) == 1, f"{command} with {kind}: {err}"
    assert named in lines[0] or Path(named).name in lines[0], f"{command} with {kind}: {err}"
    assert "Traceback" not in err
