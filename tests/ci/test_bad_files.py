"""Every command that takes a path, fed every kind of bad file: exit 2, one line naming it.

Every command meets every kind of bad file; hypothesis draws the file's bytes. The real command
line runs in process (`main`), so a traceback would surface as exit 3 and fail the test.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.ci.bad_inputs import (
    DATASET,
    FILE_KINDS,
    GOOD,
    assert_one_line_naming,
    dead_phoenix,
    make_good_files,
    run_main,
)

KINDS = FILE_KINDS
PHOENIX = dead_phoenix()


def _gate_with_scores(scores: str, out: Path) -> str:
    """A gate file whose baseline is a stored score table (the bad file)."""
    gate = out.parent / "gate.toml"
    gate.write_text(
        f'[[datasets]]\npath = "{DATASET}"\n[baseline]\nscores = "{scores}"\n'
        '[candidate]\nvariant = "alyx"\nmodel = "cassette"\n',
        encoding="utf-8",
    )
    return str(gate)


def _experiment(variant: str) -> list[str]:
    return ["phoenix", "experiment", str(DATASET), "--variant", variant, "--model", "cassette",
            *PHOENIX]  # fmt: skip


IMPORT_FORMATS = (
    "atif", "openai-messages", "otlp-json", "phoenix", "swe-agent", "tau-bench", "tau2"
)  # fmt: skip


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
    "export atif": lambda p, out: ["export", "atif", p, "-o", str(out / "out.json")],
    "replay --variant": lambda p, out: ["replay", str(DATASET), "--variant", p + ".toml"],
    "gate": lambda p, out: ["gate", p, "-o", str(out)],
    "gate [baseline] scores": lambda p, out: ["gate", _gate_with_scores(p, out), "-o", str(out)],
    "compare --gate": lambda p, out: ["compare", "alyx", "--gate", p],
    "compare --variant": lambda p, out: ["compare", "alyx", p + ".toml"],
    "demo --gate": lambda p, out: ["demo", "--gate", p, "-o", str(out)],
    "run @request": lambda p, out: ["run", "@" + p],
    "run --variant": lambda p, out: ["run", "hi", "--variant", p + ".toml"],
    "phoenix annotate scores": lambda p, out: ["phoenix", "annotate", p, str(GOOD["table"])],
    "phoenix annotate traces": lambda p, out: ["phoenix", "annotate", str(GOOD["scores"]), p],
    "phoenix experiment --variant": lambda p, out: _experiment(p + ".toml"),
}
"""Each command, with the bad path in one of its path arguments (a variant's without `.toml`).

Session stores, plan files and golden dataset folders: `tests/ci/test_bad_inputs_more.py`.
"""

GOOD_FOR = {
    # A request can say anything, at any size: only what is not text is bad (random bytes
    # framed as Parquet can be valid UTF-8 text).
    "run @request": frozenset(KINDS)
    - {"missing", "a folder", "empty", "not UTF-8", "truncated Parquet"},
}
"""What is good input to a command, among the kinds of file drawn."""


@pytest.fixture(scope="module", autouse=True)
def good_files(tmp_path_factory: pytest.TempPathFactory) -> None:
    make_good_files(tmp_path_factory.mktemp("good"))


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
            named = path.with_suffix(".toml")
        else:
            argv = COMMANDS[command](str(path), Path(folder) / "out")
            named = path
        code, _, err = run_main(argv, capsys)
    assert_one_line_naming(code, err, named, f"{command} with {kind}")
