"""Long-term memory: one Markdown file per user and space, loaded whole on every model call.

The file lives at `<memory_dir>/<user>/<space>.md` (the space is `session.metadata["space"]`,
`default` when absent). Ids are checked before any path is built, and the final path is
resolved and checked to sit inside `memory_dir`, so that no id can reach another file.

After each turn a separate model call reads the memory and the finished turn and writes the
complete new memory (or `NO_CHANGE`). The write is checked first: at most `MAX_CHARS`
characters, Markdown text only (no control characters), and no secrets. A write that fails a
check is rejected whole (a secret is never redacted into a half-kept memory: whatever the
pattern missed next to it would be loaded into every later request) and the old file stays as
it was. Writes are atomic (temporary file, then rename). The update never raises into the run:
every outcome is a `memory_updated` record.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import tempfile
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from plangate.harness._errors import ConfigError, PlangateError
from plangate.harness._messages import Message, SystemMessage, UserMessage
from plangate.harness._turn import Turn, TurnResult
from plangate.harness.features._feature import Feature, SessionView
from plangate.harness.models import ModelError
from plangate.harness.semconv import (
    INPUT_MIME_TYPE,
    INPUT_VALUE,
    MEMORY_SPAN_NAME,
    MIME_TEXT,
    TURN_INDEX,
)

logger = logging.getLogger("plangate.memory")

MAX_CHARS = 8_000
"""Longest memory a user may have, in characters."""
NO_CHANGE = "NO_CHANGE"
"""The update model's answer when the memory should stay as it is."""
DEFAULT_SPACE = "default"
"""The space of a session whose metadata names none."""
MAX_ID_CHARS = 64
"""Longest user or space id."""

_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]*")
_ALLOWED_CONTROL = frozenset("\n\t")

SECRETS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("an API key (sk-…)", re.compile(r"\bsk-[A-Za-z0-9_-]{16,}")),
    ("a bearer token", re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/=-]{16,}")),
    ("an AWS access key (AKIA…)", re.compile(r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b")),
    ("a GitHub token", re.compile(r"\bgh[pousr]_[A-Za-z0-9]{30,}")),
    ("a password in a URL", re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^/\s:@]+:[^/\s@]+@")),
    ("a private key", re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----")),
)
"""What counts as a secret in a memory write: a description, and its pattern."""

UPDATE_PROMPT = f"""\
You maintain the long-term memory of an assistant about one user: a Markdown note that is \
shown to the assistant at the start of every later request.

You get the current memory and the turn that just finished. Keep what will still help in later \
conversations (the user's preferences, facts about them and their work, decisions, open \
threads); drop what is obsolete or contradicted. Never store secrets (API keys, tokens, \
passwords, private keys) or one-off details.

Answer with the complete new memory in Markdown, at most {MAX_CHARS} characters, and nothing \
else. If nothing should change, answer exactly {NO_CHANGE}."""


UpdateStatus = Literal["written", "unchanged", "rejected", "failed"]
"""How a memory update step ended: `rejected` by a safety check, `failed` on a model or disk
error; in both cases the old file is kept."""


class MemoryPathError(PlangateError):
    """A user or space id cannot name a memory file (unsafe characters, too long, or escaping)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryUpdate:
    """The outcome of one memory update step."""

    turn_index: int
    """The turn it followed."""
    status: UpdateStatus
    """How it ended."""
    detail: str
    """What happened, as in the `memory_updated` event."""


def memory_path(memory_dir: Path, user_id: str, space: str) -> Path:
    """The memory file of `user_id` in `space`, checked to lie inside `memory_dir`.

    Raises:
        MemoryPathError: An id is not a safe file name, or the path leaves `memory_dir`.
    """
    check_id("user id", user_id)
    check_id("space", space)
    root = memory_dir.resolve()
    path = (root / user_id / f"{space}.md").resolve()
    if not path.is_relative_to(root):  # e.g. a symbolic link inside the folder points out
        raise MemoryPathError(
            f"memory file of user {user_id!r}, space {space!r} resolves to {path}, outside "
            f"the memory folder {root}; remove the link that leads there"
        )
    return path


def check_id(what: str, value: object) -> None:
    """Check that a user or space id is safe as one path component.

    Raises:
        MemoryPathError: It is not a string of 1 to `MAX_ID_CHARS` letters, digits, `.`, `_`,
            `-` or `@`, starting with a letter or digit, without `..`.
    """
    ok = (
        isinstance(value, str)
        and len(value) <= MAX_ID_CHARS
        and _ID.fullmatch(value) is not None
        and ".." not in value
    )
    if not ok:
        shown = repr(value)
        shown = shown if len(shown) <= 80 else shown[:80] + "…"
        raise MemoryPathError(
            f"{what} {shown} cannot name a memory file: use 1 to {MAX_ID_CHARS} letters, digits, "
            "'.', '_', '-' or '@', starting with a letter or digit, without '..'"
        )


def find_secret(text: str) -> str | None:
    """What kind of secret `text` holds (e.g. `a bearer token`), or None."""
    for kind, pattern in SECRETS:
        if pattern.search(text):
            return kind
    return None


def check_write(text: str) -> str | None:
    """Why `text` may not become a memory file, or None when it may."""
    if not text.strip():
        return f"the new memory is empty (answer {NO_CHANGE} to keep the memory)"
    if len(text) > MAX_CHARS:
        return f"the new memory has {len(text):,} characters, over the {MAX_CHARS:,} limit"
    for position, char in enumerate(text):
        if char not in _ALLOWED_CONTROL and unicodedata.category(char) in ("Cc", "Cs"):
            return f"control character U+{ord(char):04X} at position {position}; Markdown only"
    secret = find_secret(text)
    if secret is not None:
        return f"it contains {secret}; secrets are never stored"
    return None


def write_atomically(path: Path, text: str) -> None:
    """Replace `path` with `text` so that a reader sees the old or the new file, never a mix."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8", newline="\n") as file:
            file.write(text)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def _clean(answer: str) -> str:
    """The model's answer without a code fence around it, with Unix line ends."""
    text = answer.replace("\r\n", "\n").strip()
    fenced = re.fullmatch(r"```[A-Za-z]*\n(.*)\n```", text, flags=re.DOTALL)
    return fenced.group(1).strip() if fenced else text


class Memory(Feature):
    """The user's memory file: a context message on every call, updated after every turn."""

    name = "memory"

    def __init__(self, session: SessionView, memory_dir: Path | None) -> None:
        super().__init__(session)
        if memory_dir is None:
            raise ConfigError(
                f"variant {session.variant.name!r} turns on 'context.memory', but the "
                "agent has no memory_dir; set Agent.memory_dir to the folder of memory files"
            )
        self.space: str = session.metadata.get("space", DEFAULT_SPACE)
        self.path = memory_path(memory_dir, session.user_id, self.space)
        self.updates: list[MemoryUpdate] = []
        """Every update step of this session, in order (also `memory_updated` span events)."""

    def read(self) -> str:
        """The memory as stored ('' when there is none yet), cut to `MAX_CHARS`.

        Raises:
            OSError: The file exists but cannot be read.
        """
        try:
            text = self.path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return ""
        if len(text) > MAX_CHARS:
            logger.warning("memory file %s is over %d characters; cut", self.path, MAX_CHARS)
            text = text[:MAX_CHARS] + f"\n…[cut at {MAX_CHARS:,} characters]"
        return text

    def context(self, turn: Turn) -> list[SystemMessage]:
        """The memory as a system message (none while the memory is empty or unreadable)."""
        try:
            text = self.read().strip()
        except OSError:  # the turn goes on without memory rather than fail
            logger.exception(
                "cannot read memory file %s; the model call goes without it", self.path
            )
            return []
        if not text:
            return []
        return [SystemMessage(content=f"{self._title()}\n{text}")]

    async def after_turn(self, result: TurnResult) -> None:
        """Ask the model for the new memory, check it, and write it (or keep the old one)."""
        session = self.session
        attributes = {
            TURN_INDEX: result.turn_index,
            INPUT_VALUE: f"update {self.path.name} of {session.user_id!r} after the turn",
            INPUT_MIME_TYPE: MIME_TEXT,
        }
        with session.tracing.chain(MEMORY_SPAN_NAME, attributes) as span:
            status, detail = await self._update(result)
            update = MemoryUpdate(turn_index=result.turn_index, status=status, detail=detail)
            self.updates.append(update)
            session.emit("memory_updated", detail)  # on the turn's AGENT span and in its result
            if status in ("rejected", "failed"):
                span.error(detail)

    async def _update(self, result: TurnResult) -> tuple[UpdateStatus, str]:
        try:
            old = self.read()
        except OSError as exc:  # writing now could overwrite a memory we have not seen
            return "failed", f"failed: cannot read {self.path} ({exc}); the old memory is kept"
        try:
            answer = await self._ask(old, result)
        except ModelError as exc:
            return "failed", f"failed: the memory model call failed ({exc}); the old memory is kept"
        new = _clean(answer)
        if new == NO_CHANGE or new == old.strip():
            return "unchanged", "unchanged"
        problem = check_write(new)
        if problem is not None:
            return "rejected", f"rejected: {problem}; the old memory is kept"
        try:
            write_atomically(self.path, new + "\n")
        except OSError as exc:
            return "failed", f"failed: cannot write {self.path} ({exc}); the old memory is kept"
        return "written", f"written: {len(new):,} characters to {self.space}.md"

    async def _ask(self, old: str, result: TurnResult) -> str:
        current = old.strip() or "(empty: nothing remembered yet)"
        messages: list[Message] = [
            SystemMessage(content=UPDATE_PROMPT),
            UserMessage(
                content=(
                    f"{self._title()}\n<memory>\n{current}\n</memory>\n\n"
                    f"The finished turn:\n<request>\n{result.request}\n</request>\n"
                    f"<answer>\n{result.answer}\n</answer>"
                )
            ),
        ]
        response = await self.session.side_request(messages)
        return response.message.content

    def _title(self) -> str:
        where = "" if self.space == DEFAULT_SPACE else f" (space {self.space})"
        return f"# Memory of {self.session.user_id}{where}"
