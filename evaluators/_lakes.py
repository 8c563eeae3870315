"""Folders of a table format (Delta Lake, Apache Iceberg, Apache Hudi), not of a trace table.

Such a table keeps the Parquet files of its earlier versions beside the current one's until
they are vacuumed: a session a later version rewrote is still in an old file there. Read as a
folder of Parquet, old and new spans would be scored together, a verdict on rows the table no
longer holds. So a folder or glob that reaches into such a table is refused, naming the table,
unless it is a Delta Lake table and `deltalake` is installed: then only the files of its current
version are read (on disk, in S3, or in a store whose settings come from the environment). A file
named on its own is read as named.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from urllib.parse import unquote, urlparse

from plangate.replay.schema import TraceTableError, first_line

DELTA = "Delta Lake"
MARKERS = {"_delta_log": DELTA, ".hoodie": "Apache Hudi", "metadata": "Apache Iceberg"}
"""The folder at a table's root that makes it a table of a format, and the format."""
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
            f"{self.root}: a {self.kind} table ({self.marker}/ is there): {why}; expected a "
            "folder of Parquet trace tables"
        )

    @property
    def marker(self) -> str:
        return next(name for name, kind in MARKERS.items() if kind == self.kind)


def current_on_disk(files: Sequence[str], given: str) -> list[str]:
    """The files to read of those a folder or a glob found on disk (see `only_current`)."""
    return only_current(files, _lakes_of(files), current_files, os.path.abspath, given)


def only_current(
    files: Sequence[str],
    lakes: Mapping[str, Lake | None],
    current: Callable[[Lake], set[str]],
    key: Callable[[str], str],
    given: str,
) -> list[str]:
    """The files to read: those in no table, and those a Delta Lake table's current version holds.

    `lakes` gives each file's table (the nearest above it: the files found may lie in several),
    `current` a Delta Lake table's current files (refusing any other table), in the form `key`
    gives a file.

    Raises:
        TraceTableError: A table refused, or none of the files kept.
    """
    found = sorted({lake for lake in lakes.values() if lake}, key=lambda lake: lake.root)
    if not found:
        return list(files)
    versions = {lake: current(lake) for lake in found}
    kept = [f for f in files if not (lake := lakes[f]) or key(f) in versions[lake]]
    if not kept:
        raise found[0].refusal(
            f"none of the {len(files)} files {given} names is in its current version"
        )
    return kept


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
        if kind == MARKERS["metadata"]:
            if marker.is_dir() and any(marker.glob("*.metadata.json")):
                return kind
        elif marker.is_dir():
            return kind
    return None


def lakes_in_listing(root: str, paths: Iterable[str]) -> list[Lake]:
    """The table format's tables a listing below `root` shows (their marker folders' objects)."""
    lakes: dict[str, Lake] = {}
    for path in paths:
        parts = PurePosixPath(path).parts
        for depth, part in enumerate(parts[:-1]):
            kind = MARKERS.get(part)
            iceberg = part == "metadata" and parts[-1].endswith(".metadata.json")
            if kind and (kind != MARKERS["metadata"] or (iceberg and depth == len(parts) - 2)):
                found = "/".join([root.rstrip("/"), *parts[:depth]])
                lakes.setdefault(found, Lake(found, kind))
    return list(lakes.values())


def refused(lake: Lake) -> TraceTableError:
    """Why a table format's table is not read as a folder of Parquet."""
    return lake.refusal(
        "its folders keep the files of earlier versions, rows it has since replaced or deleted "
        "among them; export its current version to Parquet and evaluate that"
    )


def current_files(lake: Lake, options: dict[str, str] | None = None) -> set[str]:
    """The files of a Delta Lake table's current version: paths on disk, `bucket/key` in a store.

    `options` are `deltalake`'s storage options for a table in object storage (its root a URI).

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
            "its folders keep the files of earlier versions, rows it has since replaced or "
            "deleted among them; install plangate[delta] to read its current version's files "
            "only, or export that version to Parquet"
        ) from None
    try:
        table = DeltaTable(lake.root, storage_options=options)
        features = set(table.protocol().reader_features or ())
        configuration = table.metadata().configuration
        uris = table.file_uris()
    except (DeltaError, OSError) as exc:
        raise lake.refusal(f"its log cannot be read ({first_line(exc)})") from exc
    if configuration.get("delta.columnMapping.mode", "none") != "none":
        features.add("columnMapping")
    if unreadable := sorted(features & _UNREADABLE_DELTA.keys()):
        raise lake.refusal(
            f"it allows {_UNREADABLE_DELTA[unreadable[0]]}, which its Parquet files alone do not "
            "give; export its current version to Parquet and evaluate that"
        )
    if options is not None:
        return {unquote(uri.split("://", 1)[-1]) for uri in uris}
    return {os.path.normpath(unquote(urlparse(uri).path)) for uri in uris}
