"""The judge cassette: every question put to an LLM judge and its reply, so a run replays them.

A JSON Lines file, one call per line, keyed by a hash of what was asked (the judge model, the
messages and the sample's number): the same turn judged with the same question gets the same
reply back, byte for byte, without a model. A turn whose answer or calls changed asks a new
question, which the cassette does not hold: a replay says so rather than reuse a verdict on
something else.

    {"call": "9f2c…", "model": "openai:gpt-4.1-mini", "session_id": "s1", "turn_index": 0,
     "sample": 0, "prompt": "Question: …", "reply": "(the judge's text)",
     "tokens_prompt": 412, "tokens_completion": 31}

Three modes: `replay` (the default) serves every reply from the cassette and never calls a
model; `record` asks the judge only what the cassette lacks; `live` asks everything again and
records the new replies over the old. One question is asked once, however many turns ask it.

The judge's endpoint is outside the process: a question goes through the redactor before it is
sent (`redacted`), and a reply before it is used or recorded, so a recording run and its replay
see the same text. The file is replaced whole (written beside it, then renamed).
"""

from __future__ import annotations

import asyncio
import dataclasses
import fcntl
import hashlib
import json
import threading
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar

from plangate.evaluators._registry import EvaluatorError
from plangate.harness import (
    ConfigError,
    ModelError,
    SystemMessage,
    UserMessage,
    write_text_atomic,
)
from plangate.harness.models import OpenAIModel
from plangate.replay import default_redactor

JudgeMode = Literal["replay", "record", "live"]
JUDGE_MODES: tuple[JudgeMode, ...] = ("replay", "record", "live")
T = TypeVar("T")


@dataclass(frozen=True, slots=True, kw_only=True)
class JudgeCall:
    """One question to the judge: one sample of one turn."""

    model: str
    """The judge model's spec (`openai:NAME`)."""
    session_id: str
    turn_index: int
    sample: int
    """Which of the turn's k askings this is (0 … k-1)."""
    system: str
    prompt: str

    @property
    def key(self) -> str:
        """The call's identity: a hash of the model, what it is told and the sample."""
        text = json.dumps([self.model, self.system, self.prompt, self.sample], ensure_ascii=False)
        return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True, slots=True, kw_only=True)
class JudgeReply:
    """The judge's reply to a call (or why there is none)."""

    text: str | None
    """The reply's text; None when the call failed."""
    failure: str | None = None
    """Why the call failed (the endpoint kept failing); None when it did not."""
    tokens_prompt: int | None = None
    tokens_completion: int | None = None


class JudgeCassette:
    """The recorded judge calls of one file, read once and written back whole."""

    def __init__(self, path: str | Path | None) -> None:
        self.path = Path(path) if path is not None else None
        self._entries: dict[str, dict[str, Any]] = {}
        self._changed = False
        if self.path is not None and self.path.exists():
            self._entries = _read(self.path)

    def __len__(self) -> int:
        return len(self._entries)

    def reply(self, call: JudgeCall) -> JudgeReply | None:
        """The recorded reply to `call`, or None."""
        entry = self._entries.get(call.key)
        if entry is None:
            return None
        return JudgeReply(
            text=entry["reply"],
            tokens_prompt=entry.get("tokens_prompt"),
            tokens_completion=entry.get("tokens_completion"),
        )

    def check_writable(self, mode: str) -> None:
        """Before asking: a cassette to record into, in a folder that exists (or is made)."""
        if self.path is None:
            raise EvaluatorError(
                f"judge: --judge {mode} records the judge's replies, but there is no cassette to "
                "record into: give --judge-cassette FILE (or -o SCORES: SCORES.judge.jsonl)"
            )
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise EvaluatorError(f"{self.path}: cannot record the judge here: {error}") from None

    def record(self, call: JudgeCall, reply: JudgeReply) -> JudgeReply:
        """Keep a reply, redacted, and return what was kept: what a replay will get back.

        A failed call is never recorded (the next run asks again).
        """
        if reply.text is None:
            return reply
        reply = dataclasses.replace(reply, text=redacted(reply.text))
        self._entries[call.key] = {
            "call": call.key, "model": call.model, "session_id": call.session_id,
            "turn_index": call.turn_index, "sample": call.sample, "prompt": call.prompt,
            "reply": reply.text, "tokens_prompt": reply.tokens_prompt,
            "tokens_completion": reply.tokens_completion,
        }  # fmt: skip
        self._changed = True
        return reply

    def save(self) -> None:
        """Write the cassette if anything was recorded: beside it, then renamed.

        Under a lock on a sibling file, the file is read again and this run's replies laid
        over it: two runs recording into one cassette (CI shards, xdist workers) keep both.
        """
        if self.path is None or not self._changed:
            return
        lock = self.path.with_name(f".{self.path.name}.lock")
        with open(lock, "a") as held:
            fcntl.flock(held, fcntl.LOCK_EX)
            entries = _read(self.path) if self.path.exists() else {}
            entries.update(self._entries)
            lines = [json.dumps(e, ensure_ascii=False, sort_keys=True) for e in entries.values()]
            write_text_atomic(self.path, "".join(f"{line}\n" for line in lines))
        self._changed = False


def redacted(text: str) -> str:
    """`text` with every secret replaced, as everything that leaves the process."""
    return default_redactor().text(text)


def replies(
    calls: Sequence[JudgeCall], cassette: JudgeCassette, mode: JudgeMode, jobs: int
) -> list[JudgeReply]:
    """Each call's reply: from the cassette, or (`record`, `live`) from the judge model.

    Raises:
        EvaluatorError: In `replay` mode, a call the cassette does not hold (naming the turn
            and what to do), or a judge model that cannot be built (no API key).
    """
    found = {} if mode == "live" else {c.key: r for c in calls if (r := cassette.reply(c))}
    missing = list({c.key: c for c in calls if c.key not in found}.values())  # once per question
    if missing and mode == "replay":
        call = missing[0]
        where = f"in {cassette.path}" if cassette.path is not None else "(no judge cassette given)"
        raise EvaluatorError(
            f"judge: no recorded reply {where} for session {call.session_id!r} turn "
            f"{call.turn_index} (sample {call.sample}; {len(missing)} missing in all): record "
            "them with --judge record (asks the judge model), or give the cassette they are in"
        )
    if missing:
        cassette.check_writable(mode)
        asked = _in_thread(lambda: _ask(missing, jobs))
        for call, reply in zip(missing, asked, strict=True):
            found[call.key] = cassette.record(call, reply)
        cassette.save()
    return [found[call.key] for call in calls]


async def _ask(calls: Sequence[JudgeCall], jobs: int) -> list[JudgeReply]:
    """Ask the judge model every call, `jobs` at a time."""
    models: dict[str, OpenAIModel] = {}
    limit = asyncio.Semaphore(jobs)

    async def one(call: JudgeCall) -> JudgeReply:
        model = models.get(call.model)
        if model is None:
            model = models[call.model] = _model(call.model)
        async with limit:
            try:
                answer = await model.request(
                    [SystemMessage(content=call.system), UserMessage(content=call.prompt)], []
                )
            except ModelError as failed:
                return JudgeReply(text=None, failure=str(failed))
        return JudgeReply(
            text=answer.message.content,
            tokens_prompt=answer.usage.prompt_tokens,
            tokens_completion=answer.usage.completion_tokens,
        )

    try:
        return list(await asyncio.gather(*(one(call) for call in calls)))
    finally:
        for model in models.values():
            await model.aclose()


def _model(spec: str) -> OpenAIModel:
    kind, _, name = spec.partition(":")
    if kind != "openai" or not name:
        raise EvaluatorError(f"judge: {spec!r} is not a judge model; use openai:NAME")
    try:
        return OpenAIModel.from_env(name)
    except ConfigError as bad:
        raise EvaluatorError(f"judge: {bad}") from None


def _in_thread(work: Callable[[], Awaitable[T]]) -> T:
    """Run a coroutine to its end from synchronous code, inside a running event loop or not.

    The evaluators are synchronous, and the gate calls them from its own event loop: the calls
    run on a loop of their own in a thread.
    """
    result: list[T] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            result.append(asyncio.run(work()))  # type: ignore[arg-type]
        except BaseException as error:  # handed to the caller's thread as it is
            errors.append(error)

    worker = threading.Thread(target=run, name="plangate-judge", daemon=True)
    worker.start()
    worker.join()
    if errors:
        raise errors[0]
    return result[0]


def _read(path: Path) -> dict[str, dict[str, Any]]:
    """A cassette file's entries by key; a bad line is an error naming the file and the line."""
    entries: dict[str, dict[str, Any]] = {}
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise EvaluatorError(f"{path}: cannot read the judge cassette: {error}") from None
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except json.JSONDecodeError as error:
            raise EvaluatorError(f"{path}:{number}: not a judge call (not JSON: {error})") from None
        if not isinstance(entry, dict) or not all(
            isinstance(entry.get(k), str) for k in ("call", "prompt", "reply")
        ):
            raise EvaluatorError(
                f"{path}:{number}: not a judge call (needs 'call', 'prompt' and 'reply')"
            )
        entries[entry["call"]] = entry
    return entries
