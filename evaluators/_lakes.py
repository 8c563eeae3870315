"""Folders of a table format (Delta Lake, Apache Iceberg, Apache Hudi), not of a trace table.

Such a table keeps the Parquet files of its earlier versions beside the current one's until
they are vacuumed: a session a later version rewrote is still in an old file there. Read as a
folder of Parquet, old and new spans would be scored together, a verdict on rows the table no
longer holds. So a folder or glob that reaches into such a table is refused, naming the table,
unless it is a Delta Lake table and `deltalake` is installed: then only the files of its current
version are read (on disk, in S3, or in a store whose settings come from the environment), and
a folder that holds the whole table must hold every one of them. A file named on its own is
read as named.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path, PurePosixPath
from urllib.parse import unquote, urlparse

import pyarrow as pa

from plangate.replay.schema import TraceTableError, first_line

DELTA = "Delta Lake"
ICEBERG = "Apache Iceberg"
MARKERS = {"_delta_log": DELTA, ".hoodie": "Apache Hudi", "metadata": ICEBERG}
"""The folder at a table's root that makes it a table of a format, and the format."""
_ICEBERG_METADATA = re.compile(
    r"(v\d+|\d{5}-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})"
    r"(\.gz)?\.metadata\.json"
)
"""The names Iceberg gives its metadata files (a `metadata/` folder of other files is none)."""
_UNREADABLE_DELTA = {
    "deletionVectors": "deletion vectors (rows deleted without rewriting their files)",
    "columnMapping": "column mapping (its files' columns have other names than the table's)",
}
"""Delta features whose tables plain Parquet files cannot give: the rows or the columns differ."""


@dataclass(frozen=True, slots=True)
class Lake:
    """A table format's table: its root folder and its format."""

    root: str
    kind: str

    def refusal(self, why: str) -> TraceTableError:
        return TraceTableError(
            f"{self.root}: {'an' if self.kind[0] in 'AEIOU' else 'a'} {self.kind} table "
            f"({self.marker}/ is there): {why}; expected a "
            "folder of Parquet trace tables"
        )

    @property
    def marker(self) -> str:
        return next(name for name, kind in MARKERS.items() if kind == self.kind)


@dataclass(frozen=True, slots=True)
class Found:
    """The files a folder or a glob found, and how to tell which a table's version holds."""

    files: Sequence[str]
    lakes: Mapping[str, Lake | None]
    """Each file's table: the nearest above it (the files found may lie in several)."""
    current: Callable[[Lake], set[str]]
    """A Delta Lake table's current files, in `key`'s form (any other table refused)."""
    key: Callable[[str], str]
    """A file in the form `current` gives the files."""
    named: Callable[[str], bool]
    """Whether a file in `key`'s form is one the folder or glob named reads, if it is there."""


def only_current(found: Found, given: str) -> list[str]:
    """The files to read: those in no table, and those a Delta Lake table's current version holds.

    Raises:
        TraceTableError: A table refused; a file of a table's current version that what was
            named would read, not there; none of the files kept.
    """
    lakes = sorted({lake for lake in found.lakes.values() if lake}, key=lambda lake: lake.root)
    if not lakes:
        return list(found.files)
    versions = {lake: found.current(lake) for lake in lakes}
    keys = {f: found.key(f) for f in found.files}
    seen = set(keys.values())
    for lake in lakes:
        if missing := sorted(f for f in versions[lake] - seen if found.named(f)):
            raise lake.refusal(
                f"its current version holds {missing[0]} ({len(missing)} such files), which "
                "is not there: removed by hand, or not copied yet; restore it or export the "
                "current version to Parquet"
            )
    kept = [f for f in found.files if not (at := found.lakes[f]) or keys[f] in versions[at]]
    if not kept:
        empty = not any(versions.values())
        raise lakes[0].refusal(
            "its current version holds no file: the table is empty"
            if empty
            else f"none of the {len(found.files)} files {given} names is in its current version"
        )
    return kept


def current_on_disk(files: Sequence[str], given: str, named: Callable[[str], bool]) -> list[str]:
    """The files to read of those a folder or a glob found on disk (see `only_current`).

    Paths are compared with their links resolved, as `deltalake` resolves the table's root;
    `named` tells whether what `given` names reads a file (a path).
    """
    folder = os.path.realpath(given) if os.path.isdir(given) else None
    found = Found(
        files=files, lakes=_lakes_of(files), current=_current_on_disk, key=os.path.realpath,
        named=partial(_named, folder, named),
    )  # fmt: skip
    return only_current(found, given)


def _named(folder: str | None, named: Callable[[str], bool], path: str) -> bool:
    return path.startswith(f"{folder}/") if folder else named(path)


def _current_on_disk(lake: Lake) -> set[str]:
    return current_files(lake, location=lake.root, base=os.path.realpath(lake.root))


def _lakes_of(files: Sequence[str]) -> dict[str, Lake | None]:
    """Each file's table: the nearest folder above it with a table format's marker, if any."""
    nearest: dict[Path, Lake | None] = {}

    def lake_at(folder: Path) -> Lake | None:
        if folder not in nearest:
            kind = _kind_on_disk(folder)
            above = None if folder.parent == folder else lake_at(folder.parent)
            nearest[folder] = Lake(str(folder), kind) if kind else above
        return nearest[folder]

    return {f: lake_at(Path(os.path.abspath(f)).parent) for f in files}


def _kind_on_disk(folder: Path) -> str | None:
    for name, kind in MARKERS.items():
        marker = folder / name
        if not marker.is_dir():
            continue
        if kind != ICEBERG or any(iceberg_metadata(p.name) for p in marker.iterdir()):
            return kind
    return None


def iceberg_metadata(name: str) -> bool:
    """Whether a file in a `metadata/` folder is an Iceberg table's metadata file."""
    return _ICEBERG_METADATA.fullmatch(name) is not None


def lakes_in_listing(root: str, paths: Iterable[str]) -> list[Lake]:
    """The table format's tables a listing below `root` shows (their marker folders' objects)."""
    lakes: dict[str, Lake] = {}
    for path in paths:
        parts = PurePosixPath(path).parts
        for depth, part in enumerate(parts[:-1]):
            kind = MARKERS.get(part)
            iceberg = depth == len(parts) - 2 and iceberg_metadata(parts[-1])
            if kind and (kind != ICEBERG or iceberg):
                found = "/".join([root.rstrip("/"), *parts[:depth]])
                lakes.setdefault(found, Lake(found, kind))
    return list(lakes.values())


_KEEPS_OLD = (
    "its folders keep the files of earlier versions, rows it has since replaced or deleted "
    "among them"
)
"""Why a table format's folder is not read as plain Parquet."""


def refused(lake: Lake) -> TraceTableError:
    """Why a table format's table is not read as a folder of Parquet."""
    return lake.refusal(f"{_KEEPS_OLD}; export its current version to Parquet and evaluate that")


def current_files(
    lake: Lake, *, location: str, base: str, options: dict[str, str] | None = None
) -> set[str]:
    """The files of a Delta Lake table's current version, each `base` and its path below it.

    `location` is where `deltalake` finds the table (a path, or a URI with `options`, its
    storage options); `base` the table's root as the files found are named below it.

    Raises:
        TraceTableError: Not a Delta Lake table, `deltalake` not installed, a log that cannot
            be read, or a feature plain Parquet cannot honour.
    """
    if lake.kind != DELTA:
        raise refused(lake)
    try:
        from deltalake import DeltaTable
        from deltalake.exceptions import DeltaError
    except ImportError:
        raise lake.refusal(
            f"{_KEEPS_OLD}; install plangate[delta] to read its current version's files only, "
            "or export that version to Parquet"
        ) from None
    try:
        table = DeltaTable(location, storage_options=options)
        features = set(table.protocol().reader_features or ())
        configuration = table.metadata().configuration
        paths = pa.table(table.get_add_actions(flatten=True)).column("path").to_pylist()
    except (DeltaError, OSError) as exc:
        raise lake.refusal(f"its log cannot be read ({first_line(exc)})") from exc
    if configuration.get("delta.columnMapping.mode", "none") != "none":
        features.add("columnMapping")
    if unreadable := sorted(features & _UNREADABLE_DELTA.keys()):
        raise lake.refusal(
            f"it allows {_UNREADABLE_DELTA[unreadable[0]]}, which its Parquet files alone do not "
            "give; export its current version to Parquet and evaluate that"
        )
    return {_below(base, path) for path in paths}


def _below(base: str, path: str) -> str:
    """A Delta log's path (percent-encoded: relative to the root, or a whole URI) as a file's."""
    if "://" not in path:
        return f"{base.rstrip('/')}/{unquote(path)}"
    parsed = urlparse(path)
    name = unquote(parsed.path)
    return name if parsed.scheme == "file" else f"{parsed.netloc}{name}"
