"""Saved sessions: plan and run state in SQLite, written in one transaction after every change.

One row per session holds its whole state as JSON (history, plan, the turn in progress, the
features' state) and its status: `idle`, `running` (a turn in progress: after a crash it can be
resumed) or `awaiting_approval` (paused until a person decides on a plan). A save either
replaces the row whole or leaves the previous one: the state is serialized before the
transaction starts, and the transaction is rolled back on any error.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, get_args

from plangate.harness._errors import PlangateError

Status = Literal["idle", "running", "awaiting_approval"]
"""Where a saved session stands."""

_SCHEMA = """
create table if not exists sessions (
    session_id text primary key,
    status text not null check (status in ('idle', 'running', 'awaiting_approval')),
    variant text not null,
    user_id text not null,
    updated_at text not null,
    state text not null
)
"""


_COLUMNS = ("session_id", "status", "variant", "user_id", "updated_at", "state")
"""The columns of `sessions`, in order."""


class StoreError(PlangateError):
    """The store cannot be opened, read or written; the message names the file."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SavedSession:
    """One row of the store."""

    session_id: str
    status: Status
    variant: str
    user_id: str
    updated_at: str
    state: dict[str, Any]


class SessionStore:
    """A SQLite file of saved sessions."""

    STATUSES: tuple[Status, ...] = get_args(Status)
    """Every status a saved session can have."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        except (sqlite3.Error, OSError) as exc:
            raise StoreError(f"cannot open the session store {self.path}: {exc}") from exc
        try:
            self._check_kind()  # before anything is written to someone else's database
            self._db.execute("pragma journal_mode=wal")
            self._db.execute(_SCHEMA)
        except sqlite3.Error as exc:
            self._db.close()
            raise StoreError(f"cannot open the session store {self.path}: {exc}") from exc
        except StoreError:
            self._db.close()
            raise

    def _check_kind(self) -> None:
        """Refuse a SQLite file that holds something else than sessions (or other columns)."""
        tables = sorted(
            row[0] for row in self._db.execute("select name from sqlite_master where type='table'")
        )
        if not tables:
            return  # a new (or empty) file: the store's table is made next
        columns = [row[1] for row in self._db.execute("pragma table_info(sessions)")]
        if columns != list(_COLUMNS):
            found = f"table sessions has columns {columns}" if columns else f"tables {tables}"
            raise StoreError(
                f"{self.path}: not a plangate session store (a SQLite database with {found}); "
                "give the path of a session store, or of a new file"
            )

    def save(
        self,
        session_id: str,
        status: Status,
        state: Mapping[str, Any],
        *,
        variant: str,
        user_id: str,
    ) -> None:
        """Replace a session's row in one transaction (or leave it as it was)."""
        text = json.dumps(state, ensure_ascii=False, sort_keys=True)
        now = datetime.now(UTC).isoformat()
        with self._lock:
            try:
                self._db.execute("begin immediate")
                self._db.execute(
                    "insert into sessions values (?, ?, ?, ?, ?, ?) on conflict(session_id) "
                    "do update set status=excluded.status, variant=excluded.variant, "
                    "user_id=excluded.user_id, updated_at=excluded.updated_at, "
                    "state=excluded.state",
                    (session_id, status, variant, user_id, now, text),
                )
                self._db.execute("commit")
            except sqlite3.Error as exc:
                if self._db.in_transaction:  # "begin" itself can fail (a full disk, a lock)
                    self._db.execute("rollback")
                raise StoreError(
                    f"{self.path}: could not save session {session_id!r}: {exc}"
                ) from exc

    def load(self, session_id: str) -> SavedSession | None:
        """A saved session, or None."""
        rows = self._select("where session_id = ?", (session_id,))
        return rows[0] if rows else None

    def sessions(self, status: Status | None = None) -> list[SavedSession]:
        """Saved sessions, newest first; only those with `status` when given."""
        if status is None:
            return self._select("order by updated_at desc", ())
        return self._select("where status = ? order by updated_at desc", (status,))

    def delete(self, session_id: str) -> None:
        """Forget a session."""
        with self._lock:
            self._db.execute("delete from sessions where session_id = ?", (session_id,))

    def close(self) -> None:
        """Close the file."""
        with self._lock:
            self._db.close()

    def _select(self, clause: str, parameters: tuple[Any, ...]) -> list[SavedSession]:
        # `clause` is one of this module's constant strings; values go in as parameters.
        query = (
            f"select session_id, status, variant, user_id, updated_at, state from sessions {clause}"
        )
        with self._lock:
            try:
                rows = self._db.execute(query, parameters).fetchall()
            except sqlite3.Error as exc:
                raise StoreError(f"{self.path}: cannot read sessions: {exc}") from exc
        return [self._saved(row) for row in rows]

    def _saved(self, row: tuple[Any, ...]) -> SavedSession:
        try:
            state = json.loads(row[5])
        except (json.JSONDecodeError, RecursionError, TypeError):
            state = None
        if not isinstance(state, dict):
            raise StoreError(
                f"{self.path}: session {row[0]!r}: its saved state is not a JSON object; "
                "something other than plangate changed the store"
            )
        return SavedSession(
            session_id=row[0],
            status=row[1],
            variant=row[2],
            user_id=row[3],
            updated_at=row[4],
            state=state,
        )
