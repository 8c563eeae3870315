"""Trace tables in object storage: `s3://bucket/traces/`, `gs://…`, any URI `pyarrow.fs` reads.

A URI is parsed once (`StoreURI`). Its credentials (`s3://KEY:SECRET@bucket/…`) and options
(`?endpoint_override=…`) reach `pyarrow.fs` and nothing else: the URI is shown as
`s3://bucket/…`, and an error's text from pyarrow is scrubbed of them. Its path may be given as
is or percent-encoded (`with%20space`); a `?` begins the options, as in any URI, so it is no
wildcard here (`*` and `[…]` are).

What a URI names is found as `_find_files` finds it on disk: an object (not with a `/` after
it, unless no prefix has that name), else a prefix of objects (a folder), else a glob, matched
segment by segment (`_globs`) against the objects in the folders its segments can match.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from fnmatch import fnmatchcase
from functools import partial
from pathlib import PurePosixPath
from urllib.parse import parse_qsl, quote, unquote

import pyarrow as pa
import pyarrow.fs as pafs

from plangate.evaluators._globs import hidden, read_with, wildcard
from plangate.evaluators._lakes import (
    DELTA,
    ICEBERG,
    MARKERS,
    Found,
    Lake,
    current_files,
    iceberg_metadata,
    lakes_in_listing,
    only_current,
)
from plangate.replay.schema import TraceTableError, first_line

_URI = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://([^?]*)(?:\?(.*))?", re.S)
_BUCKETS = ("s3", "gs", "gcs")
"""Schemes whose authority is a bucket: its name holds no `:` (no `host:port` there)."""
GCS_RETRY_SECONDS = 30
"""How long a `gs://` source retries before it fails, unless its URI says (`retry_limit_seconds`):
Google's own default is 15 minutes, spent silently when no credentials are found."""


@dataclass(frozen=True, slots=True)
class StoreURI:
    """A URI in object storage, parsed: `scheme://[login@]authority/path[?options]`."""

    scheme: str
    login: str
    """What comes before the `@` ('' without): `KEY:SECRET`, never shown; or a name (Azure's
    container, an HDFS user), shown."""
    authority: str
    """The bucket (or the host, for stores that have one)."""
    path: str
    """The path below the bucket, as given (percent-encoded or not; `/` at its end kept)."""
    options: str
    """The query, as given ('' without); never shown."""

    @classmethod
    def parse(cls, given: str) -> StoreURI | None:
        """The URI, or None when `given` is a path on disk.

        Credentials hold no `/` in a well-formed URI (it is written `%2F`), but a secret key
        pasted as is often does: in a bucket's URI (whose authority holds no `:`), a login is
        then what comes before the first `@`.
        """
        found = _URI.fullmatch(given)
        if found is None:
            return None
        scheme, rest, options = found.group(1), found.group(2), found.group(3) or ""
        authority, _, path = rest.partition("/")
        if "@" in authority:
            login, _, authority = authority.rpartition("@")
        elif scheme in _BUCKETS and ":" in authority and "@" in path:
            login, _, rest = rest.partition("@")  # a secret key with a `/` in it
            authority, _, path = rest.partition("/")
        else:
            login = ""
        return cls(scheme=scheme, login=login, authority=authority, path=path, options=options)

    @property
    def secret(self) -> bool:
        """Whether the login is credentials (`KEY:SECRET`), not a name."""
        return ":" in self.login

    @property
    def shown(self) -> str:
        """The URI as it is shown: no credentials, no options."""
        name = f"{self.login}@" if self.login and not self.secret else ""
        return f"{self.scheme}://{name}{self.authority}" + f"/{self.path}".rstrip("/")

    @property
    def segments(self) -> list[str]:
        """The path's segments, percent-decoded."""
        return [unquote(part) for part in self.path.split("/") if part]

    def store(self) -> tuple[pafs.FileSystem, str]:
        """The bucket's filesystem and the bucket's path in it."""
        login = ":".join(quote(unquote(part), safe="") for part in self.login.split(":", 1))
        options = self.options
        if self.scheme in ("gs", "gcs") and "retry_limit_seconds" not in options:
            options = "&".join(filter(None, [options, f"retry_limit_seconds={GCS_RETRY_SECONDS}"]))
        at = f"{login}@" if self.login else ""
        authority = "" if (self.scheme, self.authority) == ("file", "localhost") else self.authority
        filesystem, bucket = pafs.FileSystem.from_uri(
            f"{self.scheme}://{at}{authority}/" + (f"?{options}" if options else "")
        )
        return filesystem, str(bucket)

    def scrubbed(self, text: str) -> str:
        """`text` (pyarrow's, say) without the URI's credentials or the values of its options."""
        values = [value for _, value in parse_qsl(self.options) if len(value) >= 4]
        login = [self.login, *self.login.split(":", 1)] if self.secret else []
        secrets = {self.options, *login, *values}
        for secret in sorted(filter(None, secrets), key=len, reverse=True):
            text = text.replace(secret, "…").replace(quote(secret, safe=""), "…")
        return text


def object_uri(given: str) -> str | None:
    """A source in object storage as it is shown (no credentials, no options); None: on disk."""
    uri = StoreURI.parse(given)
    return uri.shown if uri else None


def local_path(given: str) -> str | None:
    """The path on disk a `file://` URI names (None: another URI, or no URI)."""
    uri = StoreURI.parse(given)
    if uri is None or uri.scheme != "file":
        return None
    return "/" + "/".join(uri.segments) + ("/" if uri.path.endswith("/") else "")


def find_objects(uri: StoreURI) -> tuple[pafs.FileSystem, list[str], str | None, bool]:
    """What a URI names, as `_find_files` finds files on disk.

    Returns its filesystem, the Parquet files' URIs sorted, the folder the Hive partitions
    start from (None: one file named), and whether it named one file.

    Raises:
        TraceTableError: The URI cannot be read (it does not parse, its store cannot be
            reached, its credentials are refused), or names no object; the message shows the
            URI without its credentials.
    """
    if uri.scheme in _BUCKETS and ":" in uri.authority:
        raise TraceTableError(
            f"{uri.shown}: a {uri.scheme}:// URI names a bucket, and a bucket's name holds no "
            "':'; give a store's address as ?endpoint_override=HOST:PORT&scheme=http (or, for "
            "S3, AWS_ENDPOINT_URL) and the bucket after the //"
        )
    segments = uri.segments
    try:
        filesystem, bucket = uri.store()
        whole = _below(bucket, segments)
        info = filesystem.get_file_info(whole)
        one = [f"{uri.scheme}://{whole}"]
        if info.type == pafs.FileType.File and not uri.path.endswith("/"):
            return filesystem, one, None, True
        wild = next((i for i, part in enumerate(segments) if wildcard(part)), None)
        root, pattern = whole, None
        if info.type == pafs.FileType.NotFound and wild is not None:  # a glob: below its fixed part
            root, pattern = _below(bucket, segments[:wild]), segments[wild:]
        below, walked = _objects_below(filesystem, root, pattern, uri.scheme)
        lakes = [
            *walked,
            *lakes_in_listing(f"{uri.scheme}://{root}", below),
            *_lake_above(filesystem, root, bucket, uri.scheme),
        ]
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise TraceTableError(
            f"{uri.shown}: cannot read this object storage URI ({uri.scrubbed(first_line(exc))})"
        ) from exc
    below = [path for path in below if not hidden(PurePosixPath(path))]
    if info.type == pafs.FileType.File and not below:  # `x.parquet/`, and no prefix of that name
        return filesystem, one, None, True
    folders_only = uri.path.endswith("/")
    files = [
        f"{uri.scheme}://{root}/{relative}"
        for relative in below
        if read_with(PurePosixPath(relative).parts, pattern, folders_only)
    ]
    if lakes and files:
        nearest = {
            f: max((k for k in lakes if f.startswith(f"{k.root}/")), key=_depth, default=None)
            for f in files
        }
        found = Found(
            files=files, lakes=nearest, current=partial(_current, uri), key=_in_store,
            named=partial(_named, root, pattern, folders_only),
        )  # fmt: skip
        files = only_current(found, uri.shown)
    if not files:
        raise TraceTableError(
            f"{uri.shown}: "
            + ("matches no object" if pattern else "no such object, and no prefix of objects")
            + " with Parquet files (a .parquet name, or one without an extension); expected "
            "Parquet trace tables (a file, a prefix, or a glob)"
        )
    return filesystem, sorted(files), root, False


def _current(uri: StoreURI, lake: Lake) -> set[str]:
    """A Delta Lake table's current files (`bucket/key`); any other table refused."""
    options, unknown = _delta_options(uri)
    if lake.kind == DELTA and unknown:
        raise lake.refusal(
            f"deltalake cannot be given the URI's {unknown!r}; export its current version to "
            "Parquet and evaluate that"
        )
    base = _in_store(lake.root)
    try:  # deltalake decodes the root's path: a `%` in a name is written `%25`
        return current_files(
            lake, location=f"{uri.scheme}://{quote(base)}", base=base, options=options
        )
    except TraceTableError as exc:
        raise TraceTableError(uri.scrubbed(str(exc))) from exc


def _named(root: str, pattern: list[str] | None, folders_only: bool, key: str) -> bool:
    """Whether an object (`bucket/key`) is one a prefix or glob below `root` reads."""
    if not key.startswith(f"{root.rstrip('/')}/"):
        return False
    parts = PurePosixPath(key[len(root.rstrip("/")) + 1 :]).parts
    return not hidden(PurePosixPath(*parts)) and read_with(parts, pattern, folders_only)


def _in_store(uri: str) -> str:
    """An object's URI as `current_files` gives it: `bucket/key`."""
    return uri.partition("://")[2]


def _depth(lake: Lake) -> int:
    return len(lake.root)


_PYARROW_ONLY = ("allow_bucket_creation", "allow_bucket_deletion")
"""S3 URI options that change only what pyarrow may write: nothing to tell deltalake."""


def _delta_options(uri: StoreURI) -> tuple[dict[str, str], str | None]:
    """`deltalake`'s storage options for the store a URI names, and an option it cannot be told.

    S3's credentials, region, endpoint and scheme come from the URI, else from the environment,
    as they do for pyarrow; another store's from the environment only.
    """
    settings = dict(parse_qsl(uri.options))
    options: dict[str, str] = {}
    if uri.scheme != "s3":
        settings.pop("retry_limit_seconds", None)  # how long pyarrow's GCS client retries
        return options, next(iter(settings), "credentials" if uri.secret else None)
    if uri.secret:
        key, _, secret = uri.login.partition(":")
        options.update(AWS_ACCESS_KEY_ID=unquote(key), AWS_SECRET_ACCESS_KEY=unquote(secret))
    if region := settings.pop("region", None):
        options["AWS_REGION"] = region
    scheme = settings.pop("scheme", None)
    endpoint = settings.pop("endpoint_override", None) or next(
        filter(None, map(os.environ.get, ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"))), None
    )  # the service's own variable first, as the AWS SDKs read them
    if endpoint:
        address = endpoint.split("://", 1)[-1]
        given = endpoint.split("://", 1)[0] if "://" in endpoint else "https"
        options["AWS_ENDPOINT_URL"] = f"{scheme or given}://{address}"
        options["AWS_ALLOW_HTTP"] = str(options["AWS_ENDPOINT_URL"].startswith("http:")).lower()
    if settings.pop("tls_verify_certificates", "true").lower() in ("false", "0"):
        options["allow_invalid_certificates"] = "true"
    for name in _PYARROW_ONLY:
        settings.pop(name, None)
    return options, next(iter(settings), None)


def _below(folder: str, segments: list[str]) -> str:
    """The path in the filesystem of some segments below a folder (a bucket, `/`, or '')."""
    segments = [part for part in segments if part]
    if not segments:
        return folder
    return (folder if folder.endswith("/") or not folder else f"{folder}/") + "/".join(segments)


def _objects_below(
    filesystem: pafs.FileSystem, root: str, pattern: list[str] | None, scheme: str
) -> tuple[list[str], list[Lake]]:
    """The paths below `root` (relative to it) of the objects, hidden ones too, and tables.

    The tables are those of a table format in the folders a glob's walk listed. With a glob's
    `pattern` below `root`, only the folders its segments before the last (and before a `**`)
    match are listed: a glob over one month of a lake lists that month's partitions, not every
    year's.
    """
    if not pattern:
        return _all_below(filesystem, root), []
    reached, lakes = [""], []
    for segment in pattern[:-1]:
        if segment == "**":
            break
        listed = {
            folder: _listed(filesystem, _below(root, folder.split("/")), recursive=False)
            for folder in reached
        }
        lakes += [
            lake
            for folder, infos in listed.items()
            if (lake := _marked(filesystem, f"{scheme}://{_below(root, folder.split('/'))}", infos))
        ]
        reached = [
            f"{folder}{info.base_name}/"
            for folder, infos in listed.items()
            for info in infos
            if info.type == pafs.FileType.Directory
            and not hidden(PurePosixPath(info.base_name))
            and fnmatchcase(info.base_name, segment)
        ]
    paths = [
        f"{folder}{path}"
        for folder in reached
        for path in _all_below(filesystem, _below(root, folder.split("/")))
    ]
    return paths, lakes


def _marked(filesystem: pafs.FileSystem, folder: str, infos: list[pafs.FileInfo]) -> Lake | None:
    """The table at `folder` (a URI), from what listing it gave: a marker folder among them."""
    for info in infos:
        kind = MARKERS.get(info.base_name)
        if kind and info.type == pafs.FileType.Directory:
            inside = _listed(filesystem, info.path, recursive=False) if kind == ICEBERG else []
            if kind != ICEBERG or any(iceberg_metadata(i.base_name) for i in inside):
                return Lake(folder, kind)
    return None


def _all_below(filesystem: pafs.FileSystem, root: str) -> list[str]:
    """The paths below `root` (relative to it) of every object, hidden ones too."""
    found = _listed(filesystem, root, recursive=True)
    files = (f.path for f in found if f.type == pafs.FileType.File)
    return [str(PurePosixPath(path).relative_to(root)) for path in files]


def _lake_above(filesystem: pafs.FileSystem, root: str, bucket: str, scheme: str) -> list[Lake]:
    """The table format's table `root` is in, or at: its marker folder there or above."""
    folder = PurePosixPath(root)
    while str(folder).startswith(bucket.rstrip("/")) and str(folder) not in ("", ".", "/"):
        for name, kind in MARKERS.items():
            listed = _listed(filesystem, str(folder / name), recursive=False)
            if listed and (kind != ICEBERG or any(iceberg_metadata(i.base_name) for i in listed)):
                return [Lake(f"{scheme}://{folder}", kind)]
        folder = folder.parent
    return []


def _listed(filesystem: pafs.FileSystem, folder: str, recursive: bool) -> list[pafs.FileInfo]:
    """What is below a folder (nothing when there is no such folder, or a file on disk)."""
    selector = pafs.FileSelector(folder, recursive=recursive, allow_not_found=True)
    try:
        return list(filesystem.get_file_info(selector))
    except NotADirectoryError:
        return []
