"""Cassettes: every model exchange and every tool result of a recording, served again on replay.

A model exchange is keyed by session, turn, iteration (the model call's number within the turn,
side requests such as checkpoints included) and a fingerprint of the request: the messages and
the offered tool names. A tool result is keyed by session, turn, tool name and canonical
arguments; repeated identical calls are served in the order they were recorded.

On replay, a strict cassette model refuses a request whose fingerprint differs from the recorded
one and names the first difference; a lenient one serves the recorded answers in order and flags
the drift. A cassette tool answers an unrecorded call with a clear "not recorded" result.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections import defaultdict, deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from plangate.harness import (
    AssistantMessage,
    Message,
    ModelError,
    ModelResponse,
    Tool,
    ToolCall,
    ToolDefinition,
    ToolRetry,
    ToolSourceError,
    Usage,
    message_from_dict,
    message_to_dict,
    render_result,
)
from plangate.replay.schema import canonical_arguments


class CassetteError(ModelError):
    """A replayed request does not match the recording (strict mode), or the cassette is short.

    It is a model error: the replayed turn stops (`model_error`) and keeps what it did so far.
    """


def fingerprint(messages: Sequence[Message], tools: Sequence[ToolDefinition]) -> str:
    """A stable hash of a model request: its messages and the names of the offered tools."""
    return fingerprint_of([message_to_dict(m) for m in messages], [t.name for t in tools])


def fingerprint_of(messages: Sequence[dict[str, Any]], tool_names: Sequence[str]) -> str:
    """`fingerprint` of a request already in dict form (e.g. after redaction)."""
    data = {"messages": list(messages), "tools": list(tool_names)}
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


@dataclass(frozen=True, slots=True, kw_only=True)
class Exchange:
    """One recorded model call."""

    session_id: str
    turn_index: int
    iteration: int
    fingerprint: str
    request: list[dict[str, Any]]
    """The messages sent, as dicts (to name the first difference on a mismatch)."""
    tools: list[str]
    response: dict[str, Any]
    """The answer: the assistant message as a dict, plus usage and model name."""

    def model_response(self) -> ModelResponse:
        """The recorded answer."""
        message = message_from_dict(self.response["message"])
        assert isinstance(message, AssistantMessage)
        prompt, completion = self.response.get("usage", [0, 0])
        return ModelResponse(
            message=message,
            usage=Usage(prompt_tokens=prompt, completion_tokens=completion),
            model_name=self.response.get("model_name", ""),
            finish_reason=self.response.get("finish_reason"),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolRecord:
    """One recorded tool result."""

    session_id: str
    turn_index: int
    position: int
    """Order of the call within the turn."""
    tool_name: str
    tool_args: str
    """Canonical JSON."""
    status: Literal["ok", "error"]
    """`error`: the tool raised; the replayed tool raises an error of the same type and text."""
    result: str
    """The rendered result, or the error's text."""
    error_type: str = ""
    """The exception's class name when the tool raised (`ToolRetry` for a retry)."""


@dataclass(slots=True)
class Recorder:
    """Collects exchanges and tool results while sessions run; one turn at a time."""

    exchanges: list[Exchange] = field(default_factory=list)
    tool_records: list[ToolRecord] = field(default_factory=list)
    session_id: str = ""
    turn_index: int = 0
    _iteration: int = 0
    _position: int = 0

    def begin_turn(self, session_id: str, turn_index: int) -> None:
        """Start numbering the calls of a new turn."""
        self.session_id, self.turn_index = session_id, turn_index
        self._iteration = self._position = 0

    def exchange(
        self, messages: Sequence[Message], tools: Sequence[ToolDefinition], response: ModelResponse
    ) -> None:
        """Record one model call."""
        self._iteration += 1
        self.exchanges.append(
            Exchange(
                session_id=self.session_id,
                turn_index=self.turn_index,
                iteration=self._iteration,
                fingerprint=fingerprint(messages, tools),
                request=[message_to_dict(m) for m in messages],
                tools=[t.name for t in tools],
                response={
                    "message": message_to_dict(response.message),
                    "usage": [response.usage.prompt_tokens, response.usage.completion_tokens],
                    "model_name": response.model_name,
                    "finish_reason": response.finish_reason,
                },
            )
        )

    def tool_result(
        self, name: str, arguments: dict[str, Any], status: str, result: str, error_type: str = ""
    ) -> None:
        """Record one tool result."""
        self.tool_records.append(
            ToolRecord(
                session_id=self.session_id,
                turn_index=self.turn_index,
                position=self._position,
                tool_name=name,
                tool_args=canonical_arguments(arguments),
                status="ok" if status == "ok" else "error",
                result=result,
                error_type=error_type,
            )
        )
        self._position += 1


@dataclass(slots=True)
class RecordingModel:
    """Passes requests to a model and records each exchange."""

    inner: Any
    recorder: Recorder
    name: str = ""

    def __post_init__(self) -> None:
        self.name = self.name or self.inner.name

    async def request(
        self, messages: Sequence[Message], tools: Sequence[ToolDefinition]
    ) -> ModelResponse:
        """Ask the inner model, record, answer."""
        response: ModelResponse = await self.inner.request(messages, tools)
        self.recorder.exchange(messages, tools, response)
        return response


def recording_tools(tools: Sequence[Tool], recorder: Recorder) -> list[Tool]:
    """The same tools, recording each result (and each error a tool raises)."""
    return [_recording(tool, recorder) for tool in tools]


def _recording(tool: Tool, recorder: Recorder) -> Tool:
    """`tool`, recording each result; sync stays sync, so a timeout can still stop a hang."""

    def failed(arguments: dict[str, Any], exc: Exception) -> None:
        recorder.tool_result(tool.name, arguments, "error", str(exc), type(exc).__name__)

    def succeeded(arguments: dict[str, Any], value: Any) -> Any:
        recorder.tool_result(tool.name, arguments, "ok", render_result(value))
        return value

    def run(**arguments: Any) -> Any:
        try:
            value = tool.function(**arguments)
        except Exception as exc:
            failed(arguments, exc)
            raise
        return succeeded(arguments, value)

    async def run_async(**arguments: Any) -> Any:
        try:
            value = await tool.function(**arguments)
        except Exception as exc:
            failed(arguments, exc)
            raise
        return succeeded(arguments, value)

    return dataclasses.replace(tool, function=run_async if tool.is_async else run)


@dataclass(slots=True)
class CassetteModel:
    """Serves a turn's recorded model answers: strictly (same requests) or leniently (in order)."""

    exchanges: Sequence[Exchange]
    """The recorded exchanges of the replayed turn, in order."""
    mode: Literal["strict", "lenient"] = "strict"
    name: str = "cassette"
    drift: list[str] = field(default_factory=list)
    """Lenient mode: where the requests differed from the recording."""
    failure: str | None = None
    """Why the cassette could not answer (a strict mismatch, or no answers left)."""
    _served: int = 0

    async def request(
        self, messages: Sequence[Message], tools: Sequence[ToolDefinition]
    ) -> ModelResponse:
        """The next recorded answer, after checking the request.

        Once it has failed it keeps failing with the first failure: a client that retries a
        mismatched request must not be served the answers meant for later calls.
        """
        if self.failure is not None:
            raise CassetteError(self.failure)
        if self._served >= len(self.exchanges):
            self.failure = (
                f"the cassette has {len(self.exchanges)} model answers for this turn, but the "
                f"replay asked for answer {self._served + 1}"
            )
            raise CassetteError(self.failure)
        recorded = self.exchanges[self._served]
        self._served += 1
        if fingerprint(messages, tools) != recorded.fingerprint:
            difference = first_difference(recorded, messages, tools)
            if self.mode == "strict":
                self.failure = (
                    f"model call {recorded.iteration} no longer matches the recording: {difference}"
                )
                raise CassetteError(self.failure)
            self.drift.append(f"model call {recorded.iteration}: {difference}")
        return recorded.model_response()


def first_difference(
    recorded: Exchange, messages: Sequence[Message], tools: Sequence[ToolDefinition]
) -> str:
    """The first place where a request differs from a recorded one, in words."""
    names = [t.name for t in tools]
    if names != recorded.tools:
        return f"offered tools {names} instead of {recorded.tools}"
    now = [message_to_dict(m) for m in messages]
    for index, (old, new) in enumerate(zip(recorded.request, now, strict=False)):
        if old != new:
            key = next((k for k in sorted(set(old) | set(new)) if old.get(k) != new.get(k)), "?")
            return (
                f"message {index} ({new.get('role')}) differs in {key!r}: recorded "
                f"{_short(old.get(key))}, now {_short(new.get(key))}"
            )
    return f"{len(now)} messages instead of {len(recorded.request)}"


def _short(value: Any, limit: int = 80) -> str:
    text = json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


NOT_RECORDED = "Not recorded: the cassette has no result for {name}({arguments}) in this turn."


class RecordedResults:
    """A turn's recorded tool results, served again.

    Identical calls (same name, same canonical arguments) get their results in the recorded
    order, each once; a call with none left gets the `NOT_RECORDED` text.
    """

    def __init__(self, records: Sequence[ToolRecord]) -> None:
        self._queues: dict[tuple[str, str], deque[ToolRecord]] = defaultdict(deque)
        for record in sorted(records, key=lambda r: r.position):
            self._queues[(record.tool_name, record.tool_args)].append(record)

    def next(self, name: str, arguments: Any) -> ToolRecord | str:
        """The call's next recorded result, or the "not recorded" text when none is left."""
        key = (name, canonical_arguments(arguments))
        queue = self._queues[key]
        return queue.popleft() if queue else NOT_RECORDED.format(name=name, arguments=key[1])


def cassette_tools(definitions: Sequence[Tool], records: Sequence[ToolRecord]) -> list[Tool]:
    """Tools with the recorded definitions that answer from the turn's recorded results."""
    recorded = RecordedResults(records)

    def serving(tool: Tool) -> Tool:
        def serve(**arguments: Any) -> str:
            record = recorded.next(tool.name, arguments)
            if isinstance(record, str):
                return record
            if record.status == "error":
                raise _replayed_error(record)
            return record.result

        return dataclasses.replace(tool, function=serve, is_async=False)

    return [serving(tool) for tool in definitions]


def _replayed_error(record: ToolRecord) -> Exception:
    """An exception that the loop renders exactly as it rendered the recorded one."""
    if record.error_type in ("", "ToolRetry"):
        return ToolRetry(record.result)
    if record.error_type == ToolSourceError.__name__:  # recorded with --allow-errors
        return ToolSourceError(record.result)
    kind: type[Exception] = type(record.error_type, (Exception,), {})
    return kind(record.result)


def calls_of(records: Sequence[ToolRecord]) -> list[ToolCall]:
    """The recorded calls as tool calls (to rebuild a live workspace's state)."""
    return [
        ToolCall(id=f"replay-{r.position}", name=r.tool_name, arguments=r.tool_args)
        for r in sorted(records, key=lambda r: (r.turn_index, r.position))
    ]
