"""Reading the files a user names, and writing outputs so that nothing already written is lost.

- `read_text`: a UTF-8 text file, or one error that names the file and what is wrong with it
  (missing, a folder, unreadable, not UTF-8), never a bare `OSError` or `UnicodeDecodeError`;
- `write_text_atomic`: through a temporary sibling renamed into place, so a reader (or a crash)
  sees the old file or the new one, never half of one.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from plangate.harness._errors import ConfigError, PlangateError


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
    """Write `text` to `path` through a temporary sibling renamed into place; returns `path`."""
    target = Path(path)
    handle, temporary = tempfile.mkstemp(
        dir=target.parent, prefix=f".{target.name}.", suffix=".tmp"
    )
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(text)
        os.chmod(temporary, mode)  # mkstemp makes it private; an output is for everyone
        os.replace(temporary, target)
    except BaseException:
        os.unlink(temporary)
        raise
    return target


def json_problem(exc: Exception) -> str:
    """What is wrong with JSON that would not parse: where, or that it nests too deeply."""
    if isinstance(exc, json.JSONDecodeError):
        return f"{exc.msg} at line {exc.lineno}, column {exc.colno}"
    return "nested too deeply to read"
