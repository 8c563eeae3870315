"""Kinds of bad input for the property tests of every command that takes a path.

`tests/ci/test_bad_files.py` feeds files (trace tables, score tables, gate, variant, request
and plan files); `tests/ci/test_bad_inputs_more.py` feeds session stores (SQLite) and golden
dataset folders. Each kind makes its bad input at a path from some random bytes (hypothesis
draws them), and `assert_one_line_naming` is the contract they all check: exit 2, one line,
the path named, no traceback.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from plangate.ci.cli._main import main
from plangate.evaluators import evaluate
from plangate.replay import build_table
from tests.conftest import REPO
from tests.helpers import turn_rows

DATASET = REPO / "datasets" / "observability-core"
"""A shipped golden dataset, good input for the commands' other arguments."""

GOOD: dict[str, Path] = {}
"""Good inputs for the other arguments of a command (a trace table, a score table, …)."""

HUGE_BYTES = 24 * 1024 * 1024


def make_good_files(folder: Path) -> None:
    """Write the good inputs of `GOOD` in `folder` (once per test module)."""
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
"""Makes one kind of bad input at the path (from some random bytes); returns what to pass."""


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


def other_parquet(path: Path, noise: bytes) -> Path:
    """Parquet, but not the table expected."""
    pq.write_table(pa.table({"x": [1, 2, 3]}), path)
    return path


FILE_KINDS: dict[str, Kind] = {
    "missing": _missing,
    "a folder": _folder,
    "empty": _write(b""),
    "not UTF-8": _not_utf8,
    "truncated Parquet": _truncated_parquet,
    "random Parquet": _random_parquet,
    "other Parquet": other_parquet,
    "JSON of the wrong shape": _write(json.dumps({"unexpected": [1, {"x": None}]}).encode()),
    "JSON of the wrong type": _write(b"42"),
    "a JSON list of the wrong things": _write(b'[1, "two", null]'),
    "huge": _huge,
}
"""Every kind of bad file."""


def dead_phoenix() -> list[str]:
    """`--phoenix-url` at a loopback port where nothing listens: reaching for it fails loudly.

    A command must check its inputs before it talks to Phoenix, so a bad input is named, never
    an unreachable server.
    """
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{probe.getsockname()[1]}"
    return ["--phoenix-url", url, "--timeout", "1"]


def run_main(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """The command line run in process: its exit code, standard output and standard error."""
    capsys.readouterr()
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line_naming(code: int, err: str, named: Path, label: str) -> None:
    """The contract for unusable input: exit 2, one line on stderr naming `named`."""
    assert code == 2, f"{label}: exit {code}: {err}"
    lines = err.strip().splitlines()
    assert len(lines) == 1, f"{label}: {err}"
    assert str(named) in lines[0] or named.name in lines[0], f"{label}: {err}"
    assert "Traceback" not in err
