"""Reading the files a user names, and writing outputs so that nothing already written is lost.

- `read_text`: a UTF-8 text file, or one error that names the file and what is wrong with it
  (missing, a folder, unreadable, not UTF-8), never a bare `OSError` or `UnicodeDecodeError`;
- `write_text_atomic`: through a temporary sibling renamed into place, so a reader (or a crash)
  sees the old file or the new one, never half of one;
- `check_output`: nothing already written is replaced unless asked (`--force`);
- `replace_folder`: a folder written whole beside its target (a dataset, a report set) takes
  the target's place; killed at any point, the target is the previous complete set or nothing;
- `writing`: the disk's refusal (read-only, full) as one `OutputError` line naming the output
  the user asked for; whatever was half written is removed, what was there before is kept.
"""

from __future__ import annotations

import contextlib
import fnmatch
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from plangate.harness._errors import ConfigError, PlangateError


class OutputError(PlangateError):
    """An output would replace something: it exists (and no `--force`), or it is not ours."""


def read_text(path: str | Path, what: str, error: type[PlangateError] = ConfigError) -> str:
    """The text of the UTF-8 file `path`, which holds `what` ("gate file", say).

    Raises:
        PlangateError: `error`, naming the path: it is missing, a folder, unreadable or not UTF-8.
    """
    source = Path(path)
    try:
        return source.read_text(encoding="utf-8")
    except IsADirectoryError as exc:
        raise error(f"{source}: is a folder; expected a {what}") from exc
    except OSError as exc:
        raise error(f"cannot read {what} {source}: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise error(
            f"{source}: the {what} is not UTF-8 text (byte {exc.start}: {exc.reason}); save it "
            "as UTF-8"
        ) from exc


def write_text_atomic(path: str | Path, text: str, *, mode: int = 0o644) -> Path:
    """Write `text` to `path` through a temporary sibling renamed into place; returns `path`.

    Raises:
        OutputError: the disk refused (read-only, full, gone), naming `path`; the temporary
            sibling is gone and a previous file at `path` is untouched.
    """
    target = Path(path)
    with writing(target):
        handle, temporary = tempfile.mkstemp(
            dir=target.parent, prefix=f".{target.name}.", suffix=".tmp"
        )
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as stream:
                stream.write(text)
            os.chmod(temporary, mode)  # mkstemp makes it private; an output is for everyone
            os.replace(temporary, target)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
    return target


def json_problem(exc: Exception) -> str:
    """What is wrong with JSON that would not parse: where, or that it nests too deeply."""
    if isinstance(exc, json.JSONDecodeError):
        return f"{exc.msg} at line {exc.lineno}, column {exc.colno}"
    return "nested too deeply to read"


def check_output(
    path: str | Path,
    *,
    force: bool,
    what: str,
    marker: str | None = None,
    owns: tuple[str, ...] = (),
) -> Path:
    """Check that `path` may receive `what` (a file, or a folder holding `marker`).

    Call it before the work: a refusal then costs nothing. With `marker`, the output is a
    folder that `replace_folder` fills whole; `owns` are the names (glob patterns) of what
    else it writes there: a folder holding anything more is not replaced.

    Raises:
        OutputError: `path` exists and `force` is false; or it exists but is not such an output
            (a file where a folder goes, a folder where a file goes, a folder of other files,
            a device such as `/dev/null`), which even `force` does not replace.
    """
    if not str(path).strip():
        raise OutputError(f"an empty path where {what} goes; give a path")
    target = Path(path)
    if not target.exists():
        above = next((p for p in target.parents if p.exists()), None)
        if above is not None and not above.is_dir():
            raise OutputError(f"{above}: is a file, so {target} cannot be made below it")
        return target
    if not target.is_file() and not target.is_dir():
        raise OutputError(
            f"{target}: is not a file nor a folder (a device, a pipe or a socket), which an "
            f"output written whole and renamed into place would replace; give a path for {what}"
        )
    if marker is None and target.is_dir():
        raise OutputError(f"{target}: is a folder; {what} is a file: give a file path")
    if marker is not None:
        _check_replaceable(target, what, marker, owns)
        if not any(target.iterdir()):
            return target  # an empty folder holds nothing to lose
    if not force:
        raise OutputError(
            f"{target}: already exists; pass --force to replace it with {what} "
            "(or choose another path)"
        )
    return target


def _check_replaceable(target: Path, what: str, marker: str, owns: tuple[str, ...]) -> None:
    if not target.is_dir():
        raise OutputError(f"{target}: is a file; {what} is a folder: give a folder path")
    if any(target.iterdir()) and not (target / marker).exists():
        raise OutputError(
            f"{target}: holds other files (no {marker}); {what} replaces its folder whole, so "
            "give a new or empty folder"
        )
    if owns:
        for entry in sorted(target.iterdir()):
            if not any(fnmatch.fnmatchcase(entry.name, name) for name in (marker, *owns)):
                raise OutputError(
                    f"{target}: holds {entry.name!r}, which {what} does not write; it replaces "
                    "its folder whole, so move that away first or give another folder"
                )


def staging_folder(target: Path) -> Path:
    """A fresh hidden folder beside `target`, to write an output in before `replace_folder`."""
    with writing(target):
        target.parent.mkdir(parents=True, exist_ok=True)
        return Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent))


class WriteError(OutputError):
    """The disk refused to take an output (read-only, full, gone); the message names it."""

    def __init__(self, target: Path, reason: str) -> None:
        super().__init__(f"cannot write {target}: {reason}")
        self.target = target
        """The output the user named (not a temporary sibling, nor a file staged inside it)."""
        self.reason = reason
        """The system's reason, one line ("No space left on device")."""


@contextlib.contextmanager
def writing(target: Path) -> Iterator[None]:
    """Name `target` when the disk refuses (read-only, full, gone), in one line.

    Not a temporary sibling, and not a file staged inside `target`'s folder: nested, the
    outermost `writing` names the output the user asked for.
    """
    try:
        yield
    except WriteError as exc:
        if exc.target == target:
            raise
        raise WriteError(target, exc.reason) from exc
    except OSError as exc:
        raise WriteError(target, _reason(exc)) from exc


def _reason(exc: OSError) -> str:
    # Arrow's errors carry the errno under a longer text ("Error writing bytes to file.
    # Detail: [errno 28] ..."): the system's own words are the one line a user needs.
    if exc.errno:
        return os.strerror(exc.errno)
    text = str(exc.strerror or exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def replace_folder(
    staging: Path, target: Path, *, what: str, marker: str, owns: tuple[str, ...] = ()
) -> Path:
    """Put the complete folder `staging` in `target`'s place (two renames); returns `target`.

    Between the renames `target` is absent, never half written: a kill there leaves nothing at
    `target` and the previous set in a hidden `.NAME.old` beside it. A rename the system
    refuses puts the previous set back and raises `OutputError` naming `target`.
    """
    with writing(target):
        os.chmod(staging, 0o755)  # mkdtemp makes it private; an output is for everyone
        if not target.exists():
            os.replace(staging, target)
            return target
        _check_replaceable(target, what, marker, owns)
        retired = target.with_name(f".{target.name}.old")
        shutil.rmtree(retired, ignore_errors=True)
        os.replace(target, retired)
        try:
            os.replace(staging, target)
        except BaseException:
            os.replace(retired, target)
            raise
        shutil.rmtree(retired, ignore_errors=True)
    return target
