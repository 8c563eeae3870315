"""Nothing lost: `record`, `replay` and `gate` killed (SIGKILL) at every write leave the previous
complete output, the new complete one, or nothing; never a mix, never half a file.

Each run is a real `plangate` process that kills itself just before its n-th file write or its
n-th rename, for every n until a run gets through: every point where a write can be cut short.
The first output and the rewrite differ in every file, so a mix of the two is seen.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from plangate.replay import read_table, validate_dataset
from tests.conftest import REPO

KILLER = """
import os, signal, sys
import pyarrow.parquet as pq

point, n = sys.argv[1], int(sys.argv[2])
count = [0]

def killing(real):
    def wrapped(*args, **kwargs):
        count[0] += 1
        if count[0] == n:
            os.kill(os.getpid(), signal.SIGKILL)
        return real(*args, **kwargs)
    return wrapped

if point == "rename":
    os.replace = killing(os.replace)
else:
    pq.write_table = killing(pq.write_table)
from plangate.ci.cli._main import main
sys.exit(main(sys.argv[3:]))
"""

DATASET = REPO / "datasets" / "observability-core"


def fingerprint(path: Path) -> str:
    """The content of a file or of a folder's files (names and bytes)."""
    digest = hashlib.sha256()
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    for file in files:
        digest.update(str(file.relative_to(path) if path.is_dir() else "").encode())
        digest.update(file.read_bytes())
    return digest.hexdigest()


def complete_dataset(path: Path) -> bool:
    return validate_dataset(path) == []


def complete_table(path: Path) -> bool:
    return read_table(path).num_rows > 0


def complete_reports(path: Path) -> bool:
    names = {"verdict.json", "summary.md", "junit.xml", "report.html"}
    if not names <= {p.name for p in path.iterdir()}:
        return False
    verdict = json.loads((path / "verdict.json").read_text(encoding="utf-8"))
    scored = {p.name for p in (path / "scores").iterdir()}
    return "exit_code" in verdict and scored == {"baseline.parquet", "candidate.parquet"}


def files_of(path: Path) -> dict[str, bytes]:
    if not path.is_dir():
        return {"": path.read_bytes()}
    return {str(p.relative_to(path)): p.read_bytes() for p in path.rglob("*") if p.is_file()}


def kill_everywhere(
    tmp_path: Path,
    argv: Callable[[Path, bool], list[str]],
    output: str,
    complete: Callable[[Path], bool],
) -> int:
    """Make the output once, then kill a `--force` rewrite at every write; returns the kills.

    `argv(target, first)` gives the first run's arguments (first=True) or the rewrite's.
    """
    target = tmp_path / output
    first = subprocess.run(
        [sys.executable, "-m", "plangate", *argv(target, True)], capture_output=True, text=True
    )
    assert first.returncode in (0, 1), first.stderr
    pristine = tmp_path / "pristine"
    (shutil.copytree if target.is_dir() else shutil.copy2)(target, pristine)
    before = fingerprint(target)
    kills = 0
    for point in ("write", "rename"):
        for n in range(1, 60):
            if target.is_dir():
                shutil.rmtree(target)
            elif target.exists():
                target.unlink()
            (shutil.copytree if pristine.is_dir() else shutil.copy2)(pristine, target)
            run = subprocess.run(
                [sys.executable, "-c", KILLER, point, str(n), *argv(target, False), "--force"],
                capture_output=True,
                text=True,
            )
            if run.returncode != -signal.SIGKILL:
                assert run.returncode in (0, 1), run.stderr
                assert complete(target)
                break
            kills += 1
            if target.exists() and fingerprint(target) != before:
                old, new = files_of(pristine), files_of(target)
                kept = [name for name, data in new.items() if old.get(name) == data]
                assert not kept and complete(target), f"killed at {point} {n}: mixed: {kept}"
    return kills


def test_record_killed_anywhere_leaves_a_whole_dataset_or_none(tmp_path: Path) -> None:
    for session in ("first", "second"):
        (tmp_path / f"{session}.json").write_text(
            json.dumps([{"session_id": session, "turns": ["List the slowest spans, then sum up"]}]),
            encoding="utf-8",
        )

    def argv(target: Path, first: bool) -> list[str]:
        requests = tmp_path / ("first.json" if first else "second.json")
        return [
            "record", "--requests", str(requests), "--variant", "alyx",
            "--model", "sim:diligent", "-o", str(target),
        ]  # fmt: skip

    assert kill_everywhere(tmp_path, argv, "golden", complete_dataset) >= 8


def test_replay_killed_anywhere_leaves_a_whole_table_or_none(tmp_path: Path) -> None:
    def argv(target: Path, first: bool) -> list[str]:
        session = "obs-009" if first else "obs-008"
        return ["replay", str(DATASET), "--session", session, "-o", str(target)]

    assert kill_everywhere(tmp_path, argv, "spans.parquet", complete_table) >= 2


def test_gate_killed_anywhere_leaves_a_whole_report_set_or_none(tmp_path: Path) -> None:
    for name, sessions in (("first", '["obs-009"]'), ("second", '["obs-008", "obs-009"]')):
        (tmp_path / f"{name}.toml").write_text(
            f"""
[gate]
repeats = 1
noise_floor = false
[[datasets]]
path = "{DATASET}"
sessions = {sessions}
[baseline]
variant = "alyx"
model = "cassette"
[candidate]
variant = "alyx"
model = "cassette"
""",
            encoding="utf-8",
        )

    def argv(target: Path, first: bool) -> list[str]:
        return [
            "gate",
            str(tmp_path / ("first.toml" if first else "second.toml")),
            "-o",
            str(target),
        ]

    assert kill_everywhere(tmp_path, argv, "reports", complete_reports) >= 8


def replayed_table(path: Path) -> None:
    """A trace table at `path`: one golden session replayed."""
    subprocess.run(
        [sys.executable, "-m", "plangate", "replay", str(DATASET), "--session", "obs-008",
         "-o", str(path)],
        check=True, capture_output=True,
    )  # fmt: skip


@pytest.mark.parametrize("command", ["record", "dataset from-traces", "gate", "import", "eval"])
def test_nothing_is_replaced_without_force(command: str, tmp_path: Path) -> None:
    existing = tmp_path / "existing"
    existing.write_text("keep me", encoding="utf-8")
    table = tmp_path / "t.parquet"
    replayed_table(table)
    folder = tmp_path / "golden"
    made = subprocess.run(
        [sys.executable, "-m", "plangate", "dataset", "from-traces", str(table), "-o", str(folder)],
        capture_output=True, text=True,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    argv = {
        "record": ["record", "--requests", "x.json", "--variant", "alyx", "--model",
                   "sim:diligent", "-o", str(folder)],
        "dataset from-traces": ["dataset", "from-traces", str(table), "-o", str(folder)],
        "gate": ["gate", "ci/gate.toml", "-o", str(folder)],
        "import": ["import", "tau-bench", "x.json", "-o", str(existing)],
        "eval": ["eval", str(table), "-o", str(existing)],
    }[command]  # fmt: skip
    before = fingerprint(folder), existing.read_text(encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "plangate", *argv], capture_output=True, text=True, cwd=REPO
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert ("already exists; pass --force" in done.stderr) or ("holds other files" in done.stderr)
    assert (fingerprint(folder), existing.read_text(encoding="utf-8")) == before


@pytest.mark.parametrize("command", ["gate", "eval", "dataset from-traces"])
def test_force_never_replaces_a_folder_holding_more_than_its_output(
    command: str, tmp_path: Path
) -> None:
    """A report set, score folder or dataset once written, and a file of the user's put in it."""
    table, gate = tmp_path / "traces" / "t.parquet", tmp_path / "gate.toml"
    table.parent.mkdir()
    replayed_table(table)
    gate.write_text(QUICK_GATE.format(dataset=DATASET))
    out = tmp_path / "out"
    argv = {
        "gate": ["gate", str(gate), "-o", str(out)],
        "eval": ["eval", str(table.parent), "-o", str(out)],
        "dataset from-traces": ["dataset", "from-traces", str(table), "-o", str(out)],
    }[command]
    run = [sys.executable, "-m", "plangate", *argv, "--force"]
    assert subprocess.run(run, capture_output=True).returncode in (0, 1)
    (out / "notes.md").write_text("the user's own", encoding="utf-8")
    before = fingerprint(out)
    done = subprocess.run(run, capture_output=True, text=True)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"plangate: error: {out}: holds 'notes.md', which ")
    assert fingerprint(out) == before
    (out / "notes.md").unlink()  # its own files alone: replaced
    assert subprocess.run(run, capture_output=True).returncode in (0, 1)


def test_a_file_is_never_replaced_by_a_dataset_folder(tmp_path: Path) -> None:
    """The bug that started this: `record -o EXISTING.parquet` deleted the file."""
    table = tmp_path / "t.parquet"
    replayed_table(table)
    before = fingerprint(table)
    done = subprocess.run(
        [sys.executable, "-m", "plangate", "dataset", "from-traces", str(table),
         "-o", str(table), "--force"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 2 and "is a file; a golden dataset is a folder" in done.stderr
    assert fingerprint(table) == before


@pytest.mark.parametrize("command", ["eval", "import", "export", "dataset from-traces"])
def test_an_output_that_is_a_device_or_a_pipe_is_never_replaced(
    command: str, tmp_path: Path
) -> None:
    """`-o /dev/null --force` once replaced the device with a file: a pipe stands in for it."""
    table = tmp_path / "t.parquet"
    replayed_table(table)
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    argv = {
        "eval": ["eval", str(table)],
        "import": ["import", "tau-bench", "x.json"],
        "export": ["export", "atif", str(table)],
        "dataset from-traces": ["dataset", "from-traces", str(table)],
    }[command]
    done = subprocess.run(
        [sys.executable, "-m", "plangate", *argv, "-o", str(pipe), "--force"],
        capture_output=True, text=True, cwd=REPO,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "a device, a pipe or a socket" in done.stderr
    assert stat.S_ISFIFO(pipe.lstat().st_mode)


TERMINATOR = """
import os, signal, sys
import pyarrow.parquet as pq

real, count = pq.write_table, [0]

def write_then_terminated(*args, **kwargs):
    count[0] += 1
    if count[0] == 2:  # the second part of the scores: the spill and the staging exist
        os.kill(os.getpid(), signal.SIGTERM)
    return real(*args, **kwargs)

pq.write_table = write_then_terminated
from plangate.ci.cli._main import main
sys.exit(main(sys.argv[1:]))
"""


def test_sigterm_cleans_up_as_ctrl_c_does(tmp_path: Path) -> None:
    """`kill`, `timeout` or a cancelled CI job: no spill, no staging left; the old scores kept."""
    rows = pq.read_table(REPO / "datasets" / "third-party" / "spans.parquet")
    source = tmp_path / "traces"
    source.mkdir()
    for part in (0, 1):  # every session in both files: they are gathered through a spill
        pq.write_table(rows.take(list(range(part, rows.num_rows, 2))), source / f"{part}.parquet")
    scores, temporary = tmp_path / "scores", tmp_path / "tmp"
    temporary.mkdir()
    argv = ["eval", str(source), "-o", str(scores), "--batch-rows", "5"]
    assert (
        subprocess.run([sys.executable, "-m", "plangate", *argv], capture_output=True).returncode
        == 0
    )
    before = fingerprint(scores)
    done = subprocess.run(
        [sys.executable, "-c", TERMINATOR, *argv, "--force"],
        capture_output=True, text=True, env={**os.environ, "TMPDIR": str(temporary)},
    )  # fmt: skip
    assert (done.returncode, done.stderr) == (143, "plangate: terminated\n")
    assert fingerprint(scores) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["scores", "tmp", "traces"]
    assert list(temporary.iterdir()) == []


QUICK_GATE = """
[gate]
repeats = 1
noise_floor = false
[[datasets]]
path = "{dataset}"
sessions = ["obs-008"]
[baseline]
variant = "naive"
model = "sim:forgetful"
tools = "live"
[candidate]
variant = "naive"
model = "sim:forgetful"
tools = "live"
"""


@pytest.mark.parametrize("command", ["eval --json", "eval", "gate"])
def test_a_reader_that_goes_away_ends_the_command_quietly(tmp_path: Path, command: str) -> None:
    """`plangate eval … | head`: the pipe closes before the summary is printed (by `print`, or
    by rich, whose own handler would exit 1: a gate's regression)."""
    if command == "gate":
        gate = tmp_path / "gate.toml"
        gate.write_text(QUICK_GATE.format(dataset=REPO / "datasets" / "observability-core"))
        argv = ["gate", str(gate), "-o", str(tmp_path / "reports")]
    else:
        table = tmp_path / "t.parquet"
        replayed_table(table)
        argv = [*command.split()[:1], str(table), *command.split()[1:]]
    with (tmp_path / "stderr").open("w+b") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "plangate", *argv], stdout=subprocess.PIPE, stderr=stderr
        )
        assert process.stdout is not None
        process.stdout.close()  # nobody reads
        assert process.wait(timeout=120) == 141
        stderr.seek(0)
        assert stderr.read() == b""


def test_an_output_path_that_cannot_be_one_is_named(tmp_path: Path) -> None:
    table = REPO / "datasets" / "third-party" / "spans.parquet"
    (tmp_path / "a-file").write_text("keep me", encoding="utf-8")
    cases = {
        "": "an empty path where a score table goes; give a path",
        str(tmp_path / "a-file" / "scores.parquet"): f"{tmp_path / 'a-file'}: is a file, so ",
    }
    for output, said in cases.items():
        done = subprocess.run(
            [sys.executable, "-m", "plangate", "eval", str(table), "-o", output],
            capture_output=True, text=True, cwd=tmp_path,
        )  # fmt: skip
        assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
        assert done.stderr.startswith(f"plangate: error: {said}")
    assert (tmp_path / "a-file").read_text(encoding="utf-8") == "keep me"
