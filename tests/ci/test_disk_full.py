"""A full disk, for real: `record`, `gate` and `import` write onto a tiny tmpfs that runs out.

The system answers ENOSPC ("No space left on device") partway through the output, at a point
hypothesis draws (how much room is left). Each command must exit 2 with one line naming the
output and the system's reason, leave nothing half written behind (no temporary sibling, no
staging folder, no half a dataset), and keep the previous complete output, when there was one,
byte for byte. Mounting a tmpfs takes root (as here and in CI); elsewhere the test says so and
skips.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.ci.bad_inputs import DATASET, run_main

SIZE = 2 * 1024 * 1024
"""The tmpfs: room for one output and a filler that takes the rest."""
PAGE = 4096
"""tmpfs hands out space a page at a time."""
FILLER = "filler"


@pytest.fixture
def disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fresh tmpfs of `SIZE` bytes, unmounted afterwards."""
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)  # a gate appends its summary there
    mount = tmp_path / "disk"
    mount.mkdir()
    if shutil.which("mount") is None:
        pytest.skip("no `mount` command here: a full disk cannot be made")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={SIZE},mode=0755", "plangate-full", str(mount)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs (root only) to fill up: {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=True)


def fill(disk: Path, room: int) -> None:
    """Take every free byte of `disk` but `room`."""
    stats = os.statvfs(disk)
    free = stats.f_bavail * stats.f_frsize
    with open(disk / FILLER, "wb") as filler:
        os.posix_fallocate(filler.fileno(), 0, max(free - room, 1))


def pages(path: Path) -> int:
    """The pages a file, or a folder's files, take on a tmpfs."""
    files = [p for p in path.rglob("*") if p.is_file()] if path.is_dir() else [path]
    return sum(-(-p.stat().st_size // PAGE) for p in files)


def fingerprint(path: Path) -> str:
    digest = hashlib.sha256()
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    for file in files:
        digest.update(str(file.relative_to(path) if path.is_dir() else "").encode())
        digest.update(file.read_bytes())
    return digest.hexdigest()


def _record(inputs: Path, corpus: Path, out: Path) -> list[str]:
    requests = inputs / "requests.json"
    requests.write_text(
        json.dumps([{"session_id": "s", "turns": ["List the slowest spans, then sum up"]}]),
        encoding="utf-8",
    )
    return ["record", "--requests", str(requests), "--variant", "alyx", "--model", "sim:diligent",
            "-o", str(out)]  # fmt: skip


def _gate(inputs: Path, corpus: Path, out: Path) -> list[str]:
    gate = inputs / "gate.toml"
    gate.write_text(
        f'[gate]\nrepeats = 1\nnoise_floor = false\n[[datasets]]\npath = "{DATASET}"\n'
        'sessions = ["obs-009"]\n[baseline]\nvariant = "alyx"\nmodel = "cassette"\n'
        '[candidate]\nvariant = "alyx"\nmodel = "cassette"\n',
        encoding="utf-8",
    )
    return ["gate", str(gate), "-o", str(out)]


def _import(inputs: Path, corpus: Path, out: Path) -> list[str]:
    tau = corpus / "tau-bench" / "gpt-4o-airline.json"
    return ["import", "tau-bench", str(tau), "-o", str(out)]


COMMANDS: dict[str, tuple[str, Callable[[Path, Path, Path], list[str]]]] = {
    "record": ("golden", _record),
    "gate": ("reports", _gate),
    "import": ("table.parquet", _import),
}
"""Each command: the name of its output on the disk, and its arguments."""


@pytest.mark.parametrize("previous", [True, False], ids=["over a previous output", "new"])
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_full_disk_is_exit_2_naming_the_output_and_nothing_is_lost(
    command: str,
    previous: bool,
    disk: Path,
    tmp_path: Path,
    corpus: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    name, argv = COMMANDS[command]
    target = disk / name
    args = argv(tmp_path, corpus, target)
    code, _, err = run_main(args, capsys)  # a complete output: how much room it needs
    assert code in (0, 1), err
    needed = pages(target)
    before = fingerprint(target)
    if not previous:
        (shutil.rmtree if target.is_dir() else os.unlink)(target)

    @settings(
        max_examples=4,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(room=st.integers(0, needed - 2))
    def full_at(room: int) -> None:
        fill(disk, room * PAGE)
        try:
            code, _, err = run_main([*args, "--force"], capsys)
        finally:
            (disk / FILLER).unlink()
        label = f"{command} with {room} of {needed} pages free"
        assert code == 2, f"{label}: exit {code}: {err}"
        assert err == f"plangate: error: cannot write {target}: No space left on device\n", label
        left = sorted(p.name for p in disk.iterdir())
        assert left == ([name] if previous else []), f"{label}: left behind: {left}"
        if previous:
            assert fingerprint(target) == before, f"{label}: the previous output changed"

    full_at()
