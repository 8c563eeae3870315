"""Glob matching on a path's segments, as `glob.glob(recursive=True)` matches files on disk.

Object storage has no `glob`: its objects are listed, then matched here, segment by segment, so
that a glob names the same files in a bucket as on disk (a hypothesis test compares the two).
"""

from __future__ import annotations

from collections.abc import Sequence
from fnmatch import fnmatchcase
from pathlib import PurePath

GLOB_CHARACTERS = "*?["
HIDDEN_NAMES = (
    "a name that begins with '.' or '_' is never read, as Spark's _SUCCESS and temporary files"
)
"""Why a file a glob matched is not read."""


def parquet_named(name: str) -> bool:
    """Whether a file found in a folder is read as Parquet.

    A `.parquet` name, or a name without an extension, as Hive (`000000_0`), Trino and Athena
    name the files they write; not the empty `x_$folder$` objects Hadoop's S3 clients (EMRFS)
    leave beside a folder.
    """
    return name.endswith(".parquet") or ("." not in name and not folder_marker(name))


def folder_marker(name: str) -> bool:
    """Whether an object is Hadoop's empty stand-in for a folder (`date=2026-11-30_$folder$`).

    Such an object is never read, even where a glob names it.
    """
    return name.endswith("_$folder$")


def wildcard(segment: str) -> bool:
    """Whether a path segment holds a glob wildcard."""
    return any(c in segment for c in GLOB_CHARACTERS)


def hidden(relative: PurePath) -> bool:
    """Whether a path below a folder is hidden there: a segment starts with `.` or `_`."""
    return any(part.startswith((".", "_")) for part in relative.parts if part not in (".", ".."))


def matches(parts: Sequence[str], pattern: Sequence[str]) -> bool:
    """Whether a path's segments match a glob's, `**` standing for any number of them."""
    if not pattern:
        return not parts
    if pattern[0] == "**":
        return any(matches(parts[i:], pattern[1:]) for i in range(len(parts) + 1))
    return bool(parts) and fnmatchcase(parts[0], pattern[0]) and matches(parts[1:], pattern[1:])


def file_matches(parts: Sequence[str], pattern: Sequence[str]) -> bool:
    """Whether a file's path matches a glob, as `glob` matches it.

    Its name by the last segment (the segments before it match folders only), or within a last
    `**`.
    """
    if pattern[-1] == "**":
        return any(matches(parts[:depth], pattern[:-1]) for depth in range(len(parts)))
    return matches(parts, pattern)


def read_with(parts: Sequence[str], pattern: Sequence[str] | None, folders_only: bool) -> bool:
    """Whether a file below a folder (its path's `parts` there) is read with a glob.

    With the glob's part below the folder (`pattern`): a file that matches it (unless the glob
    ends in `/`: `folders_only`), or a Parquet-named file (`parquet_named`) in a folder that
    does. Without: any Parquet-named file.
    """
    if folder_marker(parts[-1]):
        return False
    if pattern is not None and not folders_only and file_matches(parts, pattern):
        return True
    return parquet_named(parts[-1]) and (
        pattern is None or any(matches(parts[:depth], pattern) for depth in range(len(parts)))
    )
