"""Golden session datasets: a folder with a manifest and Parquet tables.

    datasets/NAME/
      manifest.json        name, schema version, description, creation time, SHA-256 per file
      sessions.parquet     one row per session: who, which variant, model and domain recorded it
      turns.parquet        one row per turn: the request, its rubric, the state before it (plan,
                           features, memory), its trajectory (messages and steps), how it ended
      spans.parquet        the recorded trajectory as a trace table
      model_cassette.parquet  every model exchange: session, turn, iteration, request fingerprint
      tool_cassette.parquet   every tool result: session, turn, position, tool name, arguments

Writes are atomic: the dataset is written to a temporary folder beside the target, then renamed
into place; a failed write leaves the old dataset untouched. `validate_dataset` checks schemas,
hashes and references and reports each problem with its file, column and row.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from plangate.harness import (
    PlangateError,
    first_line,
    json_problem,
    read_text,
    replace_folder,
    staging_folder,
    write_text_atomic,
    writing,
)
from plangate.replay._cassette import Exchange, ToolRecord
from plangate.replay._redact import REDACTED, redactor_for
from plangate.replay.schema import (
    SCHEMA,
    SESSION_ID,
    STOP_REASON,
    TOOL_ARGS,
    TOOL_NAME,
    TURN_INDEX,
    upgrade_table,
    validate_table,
)

DATASET_VERSION = 1
MANIFEST = "manifest.json"
AGENT_SOURCE = "agent"
"""A session's `source` when it was recorded from a team's agent, through the agent boundary."""

SESSIONS = pa.schema(
    [
        pa.field(SESSION_ID, pa.string(), nullable=False),
        pa.field("user_id", pa.string(), nullable=False),
        pa.field("variant", pa.string(), nullable=False),
        pa.field("model", pa.string(), nullable=False),
        pa.field("domain", pa.string()),
        pa.field("seed", pa.int64()),
        pa.field("source", pa.string(), nullable=False),
        pa.field("metadata", pa.string()),
    ]
)
TURNS = pa.schema(
    [
        pa.field(SESSION_ID, pa.string(), nullable=False),
        pa.field(TURN_INDEX, pa.int32(), nullable=False),
        pa.field("request", pa.string(), nullable=False),
        pa.field("rubric", pa.string()),
        pa.field("plan_before", pa.string()),
        pa.field("features_before", pa.string()),
        pa.field("memory_before", pa.string()),
        pa.field("messages", pa.string(), nullable=False),
        pa.field("steps", pa.string(), nullable=False),
        pa.field(STOP_REASON, pa.string()),
        pa.field("answer", pa.string()),
    ]
)
MODEL_CASSETTE = pa.schema(
    [
        pa.field(SESSION_ID, pa.string(), nullable=False),
        pa.field(TURN_INDEX, pa.int32(), nullable=False),
        pa.field("iteration", pa.int32(), nullable=False),
        pa.field("fingerprint", pa.string(), nullable=False),
        pa.field("request", pa.string(), nullable=False),
        pa.field("tools", pa.string(), nullable=False),
        pa.field("response", pa.string(), nullable=False),
    ]
)
TOOL_CASSETTE = pa.schema(
    [
        pa.field(SESSION_ID, pa.string(), nullable=False),
        pa.field(TURN_INDEX, pa.int32(), nullable=False),
        pa.field("position", pa.int32(), nullable=False),
        pa.field(TOOL_NAME, pa.string(), nullable=False),
        pa.field(TOOL_ARGS, pa.string(), nullable=False),
        pa.field("status", pa.string(), nullable=False),
        pa.field("result", pa.string(), nullable=False),
        pa.field("error_type", pa.string()),
    ]
)
FILES: dict[str, pa.Schema] = {
    "sessions.parquet": SESSIONS,
    "turns.parquet": TURNS,
    "spans.parquet": SCHEMA,
    "model_cassette.parquet": MODEL_CASSETTE,
    "tool_cassette.parquet": TOOL_CASSETTE,
}


DATASET_FILES = tuple(FILES)
"""What a dataset folder holds besides its manifest: a folder holding more (a judge's
recorded replies, notes) is not replaced by a dataset written with `--force`."""


class DatasetError(PlangateError):
    """A golden dataset is missing, malformed or inconsistent; the message says where."""


@dataclass(frozen=True, slots=True, kw_only=True)
class GoldenDataset:
    """A golden dataset in memory."""

    name: str
    description: str
    sessions: pa.Table
    turns: pa.Table
    spans: pa.Table
    model_cassette: pa.Table
    tool_cassette: pa.Table
    created_at: str = field(default_factory=lambda: datetime.now(UTC).isoformat())
    _index: dict[str, dict[Any, list[dict[str, Any]]]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    """Each table's rows grouped by a column (the session; the tool cassette's also by tool),
    made on first use: a replay looks rows up turn after turn, and a scan of the whole table
    each time would cost O(rows) a turn."""

    def turn(self, session_id: str, turn_index: int) -> dict[str, Any]:
        """One turn's row."""
        for row in self._rows("turns", session_id):
            if row[TURN_INDEX] == turn_index:
                return dict(row)
        raise DatasetError(
            f"dataset {self.name!r} has no turn {turn_index} in session {session_id!r}"
        )

    def history(self, session_id: str, turn_index: int) -> list[dict[str, Any]]:
        """The messages of the session's turns before `turn_index`, in order (dict form)."""
        rows = [r for r in self._rows("turns", session_id) if r[TURN_INDEX] < turn_index]
        rows.sort(key=lambda r: r[TURN_INDEX])
        return [m for r in rows for m in json.loads(r["messages"])]

    def session(self, session_id: str) -> dict[str, Any]:
        """One session's row."""
        for row in self._rows("sessions", session_id):
            return dict(row)
        known = ", ".join(self.sessions[SESSION_ID].to_pylist()[:8])
        raise DatasetError(f"dataset {self.name!r} has no session {session_id!r}; some: {known}")

    def exchanges(self, session_id: str, turn_index: int) -> list[Exchange]:
        """The recorded model exchanges of one turn, in order."""
        rows = [r for r in self._rows("model_cassette", session_id) if r[TURN_INDEX] == turn_index]
        return [
            Exchange(
                session_id=r[SESSION_ID],
                turn_index=r[TURN_INDEX],
                iteration=r["iteration"],
                fingerprint=r["fingerprint"],
                request=json.loads(r["request"]),
                tools=json.loads(r["tools"]),
                response=json.loads(r["response"]),
            )
            for r in sorted(rows, key=lambda r: r["iteration"])
        ]

    def tool_records(self, session_id: str, turn_index: int | None = None) -> list[ToolRecord]:
        """Recorded tool results of one turn (or of every turn of the session)."""
        rows = [
            r
            for r in self._rows("tool_cassette", session_id)
            if turn_index is None or r[TURN_INDEX] == turn_index
        ]
        return [_tool_record(r) for r in rows]

    def tool_records_named(self, name: str) -> list[ToolRecord]:
        """Every recorded result of the tool `name`, in any session, in table order."""
        return [_tool_record(r) for r in self._rows("tool_cassette", name, key=TOOL_NAME)]

    def _rows(self, table: str, value: str, key: str = SESSION_ID) -> list[dict[str, Any]]:
        """The rows of `table` (a field's name) whose `key` is `value`, in table order."""
        grouped = self._index.get(f"{table}.{key}")
        if grouped is None:
            grouped = {}
            for row in getattr(self, table).to_pylist():
                grouped.setdefault(row[key], []).append(row)
            self._index[f"{table}.{key}"] = grouped
        return grouped.get(value, [])


def _tool_record(row: dict[str, Any]) -> ToolRecord:
    return ToolRecord(**{**row, "error_type": row.get("error_type") or ""})


def table_of(rows: Sequence[dict[str, Any]], schema: pa.Schema) -> pa.Table:
    """Rows as a table of `schema`."""
    return pa.Table.from_pydict({n: [r.get(n) for r in rows] for n in schema.names}, schema=schema)


def write_dataset(
    dataset: GoldenDataset, folder: str | Path, *, redact: Iterable[str] = ()
) -> Path:
    """Write a dataset atomically; an existing dataset at `folder` is replaced whole.

    Every string is redacted first (the built-in policy and the `redact` patterns), wherever the
    dataset came from. Written beside `folder`, then renamed into place: a kill at any point
    leaves the previous dataset or the new one (or, between the two renames, none). A file, or
    a folder that is not a dataset, is never replaced (`OutputError`).
    """
    redactor = redactor_for(redact)
    target = Path(folder)
    staging = staging_folder(target)
    try:
        with writing(target):  # a full or read-only disk names `folder`, not the staging folder
            hashes = {}
            for name in FILES:
                table = redactor.table(getattr(dataset, name.removesuffix(".parquet")))
                pq.write_table(table, staging / name)
                hashes[name] = _sha256(staging / name)
            manifest = json.dumps(_manifest(dataset, hashes), indent=2) + "\n"
            write_text_atomic(staging / MANIFEST, manifest)
            replace_folder(
                staging, target, what="a golden dataset", marker=MANIFEST, owns=DATASET_FILES
            )
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return target


def _manifest(dataset: GoldenDataset, hashes: dict[str, str]) -> dict[str, Any]:
    return {
        "name": dataset.name,
        "schema_version": DATASET_VERSION,
        "description": dataset.description,
        "created_at": dataset.created_at,
        "files": hashes,
        "counts": {
            "sessions": dataset.sessions.num_rows,
            "turns": dataset.turns.num_rows,
            "spans": dataset.spans.num_rows,
        },
    }


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def dataset_folder(folder: str | Path) -> Path:
    """`folder`, checked to be a golden dataset folder: it exists and holds a manifest.

    Raises:
        DatasetError: naming the path: it is missing, a file, or a folder without a manifest.
    """
    path = Path(folder)
    if not path.exists():
        raise DatasetError(f"{path}: no such folder; expected a golden dataset folder")
    if not path.is_dir():
        raise DatasetError(
            f"{path}: is a file; expected a golden dataset folder ({MANIFEST} and Parquet tables)"
        )
    if not (path / MANIFEST).is_file():
        raise DatasetError(
            f"{path}: no {MANIFEST} in this folder; is it a golden dataset? (`plangate record` "
            "and `plangate dataset from-traces` write one)"
        )
    return path


def read_dataset(folder: str | Path) -> GoldenDataset:
    """Read a dataset; any problem `validate_dataset` finds is a `DatasetError`."""
    path = dataset_folder(folder)
    problems, manifest, tables = _validated(path)
    if problems:
        more = (
            f" (and {len(problems) - 1} more problems: `plangate dataset validate {folder}` "
            "lists them)"
            if len(problems) > 1
            else ""
        )
        raise DatasetError(f"{folder}: not a valid golden dataset: {problems[0]}{more}")
    return GoldenDataset(
        name=manifest["name"],
        description=manifest.get("description", ""),
        created_at=manifest.get("created_at", ""),
        **{name.removesuffix(".parquet"): table for name, table in tables.items()},
    )


def validate_dataset(folder: str | Path) -> list[str]:
    """Every problem of a dataset folder, each on one line naming the file, column and row."""
    return _validated(Path(folder))[0]


def _validated(path: Path) -> tuple[list[str], dict[str, Any], dict[str, pa.Table]]:
    """A dataset folder's problems, and its manifest and tables as read to find them.

    The tables (spans of an older plangate upgraded) are the dataset when there is no problem:
    each file is read once.
    """
    if not (path / MANIFEST).is_file():
        return [f"{path / MANIFEST}: missing; is {path} a golden dataset folder?"], {}, {}
    try:
        manifest = json.loads(read_text(path / MANIFEST, "dataset manifest", DatasetError))
    except DatasetError as exc:  # unreadable, not UTF-8
        return [str(exc)], {}, {}
    except (json.JSONDecodeError, RecursionError) as exc:
        return [f"{path / MANIFEST}: not valid JSON ({json_problem(exc)})"], {}, {}
    problems = _check_manifest(path, manifest)
    if problems:
        return problems, manifest, {}
    tables: dict[str, pa.Table] = {}
    for name, schema in FILES.items():
        problems.extend(_check_file(path / name, schema, manifest, tables))
    if not problems:
        problems.extend(_check_references(path, tables))
    return problems, manifest, tables


def _check_manifest(path: Path, manifest: Any) -> list[str]:
    where = path / MANIFEST
    if not isinstance(manifest, dict):
        return [f"{where}: expected a JSON object"]
    problems = [
        f"{where}: field {k!r} is missing"
        for k in ("name", "schema_version", "files")
        if k not in manifest
    ]
    if problems:
        return problems
    if manifest["schema_version"] != DATASET_VERSION:
        problems.append(
            f"{where}: schema_version {manifest['schema_version']!r} is not {DATASET_VERSION}"
        )
    files = manifest["files"]
    if not isinstance(files, dict) or not all(isinstance(v, str) for v in files.values()):
        return [*problems, f"{where}: field 'files' is not an object of file names to SHA-256s"]
    missing = [name for name in FILES if name not in files]
    problems.extend(f"{where}: files has no entry for {name}" for name in missing)
    return problems


def _check_file(
    file: Path, schema: pa.Schema, manifest: dict[str, Any], tables: dict[str, pa.Table]
) -> list[str]:
    if not file.is_file():
        return [f"{file}: missing"]
    try:
        if _sha256(file) != manifest["files"][file.name]:
            return [
                f"{file}: SHA-256 does not match the manifest (the file changed after it was "
                "written)"
            ]
        table = pq.read_table(file)
    except (pa.ArrowException, OSError, ValueError) as exc:
        return [f"{file}: not a readable Parquet file ({first_line(exc)})"]
    if file.name == "spans.parquet":
        table = upgrade_table(table)  # spans written by an older plangate
    problems = _column_problems(file, table, schema)
    if file.name == "spans.parquet" and not problems:
        try:
            validate_table(table, str(file))
        except PlangateError as exc:
            problems.append(str(exc))
    tables[file.name] = table
    return problems


def _column_problems(file: Path, table: pa.Table, schema: pa.Schema) -> list[str]:
    """What is wrong with a table's columns against `schema`: missing, of another type, null."""
    problems = []
    for expected in schema:
        if expected.name not in table.column_names:
            problems.append(f"{file}: column {expected.name!r} is missing")
            continue
        column = table.column(expected.name)
        if column.type != expected.type:
            problems.append(
                f"{file}: column {expected.name!r} is {column.type}, expected {expected.type}"
            )
        elif not expected.nullable and column.null_count:
            row = column.to_pylist().index(None)
            problems.append(
                f"{file}: column {expected.name!r}, row {row}: null in a required column"
            )
    return problems


def _check_references(path: Path, tables: dict[str, pa.Table]) -> list[str]:
    sessions = set(tables["sessions.parquet"][SESSION_ID].to_pylist())
    turns = set(
        zip(
            tables["turns.parquet"][SESSION_ID].to_pylist(),
            tables["turns.parquet"][TURN_INDEX].to_pylist(),
            strict=True,
        )
    )
    problems = []
    turn_sessions = tables["turns.parquet"][SESSION_ID].to_pylist()
    for row, session in enumerate(turn_sessions):
        if session not in sessions:
            problems.append(
                f"{path / 'turns.parquet'}: column 'session_id', row {row}: session {session!r} "
                "is not in sessions.parquet"
            )
    for name in ("model_cassette.parquet", "tool_cassette.parquet", "spans.parquet"):
        table = tables[name]
        pairs = zip(table[SESSION_ID].to_pylist(), table[TURN_INDEX].to_pylist(), strict=True)
        for row, pair in enumerate(pairs):
            if pair not in turns:
                problems.append(
                    f"{path / name}: columns 'session_id', 'turn_index', row {row}: {pair} "
                    "is not a turn in turns.parquet"
                )
                break
    for row, text in enumerate(tables["turns.parquet"]["rubric"].to_pylist()):
        problems.extend(
            _check_rubric(text, f"{path / 'turns.parquet'}: column 'rubric', row {row}")
        )
    for name, columns in JSON_COLUMNS.items():
        problems.extend(_check_json(path / name, tables[name], columns))
    return problems


JSON_COLUMNS = {
    "sessions.parquet": ("metadata",),
    "turns.parquet": ("plan_before", "features_before", "messages", "steps"),
    "model_cassette.parquet": ("request", "tools", "response"),
}
"""The columns that hold JSON text, which replaying parses (the rubric is checked apart).

Not the tool cassette's `tool_args`: like the trace table's, they are canonical arguments,
JSON or the model's text as it gave it (cut short, say), and a replayed call is looked up by
the same text."""


def _check_json(file: Path, table: pa.Table, columns: tuple[str, ...]) -> list[str]:
    """The first value of each column that is not JSON (each distinct text parsed once)."""
    problems = []
    for column in columns:
        seen: set[str] = set()
        for row, text in enumerate(table[column].to_pylist()):
            if text is None or text in seen:
                continue
            seen.add(text)
            try:
                json.loads(text)
            except (json.JSONDecodeError, RecursionError) as exc:
                problems.append(
                    f"{file}: column {column!r}, row {row}: not valid JSON ({json_problem(exc)})"
                )
                break
    return problems


def _check_rubric(text: str | None, where: str) -> list[str]:
    # The rubric's schema belongs to the evaluators; here only its form (`plangate dataset
    # validate` also parses it with the evaluators).
    if text is None:
        return []
    try:
        value = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        return [f"{where}: not valid JSON ({json_problem(exc)})"]
    if not isinstance(value, dict):
        return [f"{where}: expected a JSON object"]
    return []


def redacted_count(dataset: GoldenDataset) -> int:
    """How many `[REDACTED]` markers the dataset's turns, sessions and cassettes hold."""
    tables = (dataset.sessions, dataset.turns, dataset.model_cassette, dataset.tool_cassette)
    return sum(_markers(table) for table in tables)


def _markers(table: pa.Table) -> int:
    total = 0
    for column in table.columns:
        if pa.types.is_string(column.type):
            total += sum(v.count(REDACTED) for v in column.to_pylist() if v)
    return total
