"""The endpoint's tool routes: an agent's own tools, recorded or served from the cassette.

The agent's tools run in the agent's process; the route only decides, per call, whether they
may. A wrapped tool (`plangate.replay.agents.hermetic`) asks first:

- `POST /r/{key}/tools/{name}` with the call's arguments (a JSON object) as the body. The
  answer is `{"status": ...}`:
  - `record`: run the tool, then post its result (below) to be recorded;
  - `live`: run the tool, nothing to post;
  - `ok`: the recorded result is `result` (text); the tool is not run;
  - `error`: the recorded call raised; `result` is the error's text and `error_type` its
    class's name; the tool is not run.
- `POST /r/{key}/tools/{name}/result` with `{"arguments": {...}, "status": "ok"|"error",
  "result": TEXT, "error_type": NAME}` after a `record` answer; answered `{"recorded": true}`.

A route serves tools only when it was opened with a `ToolProvider` (404 otherwise); a provider
that cannot answer (no turn is running on the route) raises `ToolSourceError`, answered 409.
Bad bodies are 400. Every error is OpenAI's error shape, as on the model routes.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol
from urllib.parse import unquote

from plangate.harness import ToolSourceError
from plangate.replay._cassette import RecordedResults, Recorder, ToolRecord
from plangate.replay.endpoint._exchange import Reply, error_reply

TOOLS_PATH = "tools"
"""A route's tool paths start with this, after `/r/{key}/`."""
RESULT = "result"
"""The last part of the path a recorded result is posted to."""

ToolStatus = Literal["record", "live", "ok", "error"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolAnswer:
    """What a route answers a tool call: run it (and record it, or not), or its recording."""

    status: ToolStatus
    """`record` or `live`: the agent runs the tool; `ok` or `error`: the recorded outcome."""
    result: str = ""
    """The recorded result's text, or the recorded error's text."""
    error_type: str = ""
    """The recorded error's class name (`error` only)."""
    recorded: bool = True
    """False when the cassette has no result for the call (`result` says so)."""

    def to_json(self) -> dict[str, str]:
        """The answer's JSON body."""
        out: dict[str, str] = {"status": self.status}
        if self.status in ("ok", "error"):
            out["result"] = self.result
        if self.status == "error":
            out["error_type"] = self.error_type
        return out


class ToolProvider(Protocol):
    """What answers a route's tool calls during a turn."""

    def call(self, name: str, arguments: dict[str, Any]) -> ToolAnswer:
        """Answer one call.

        Raises:
            ToolSourceError: The provider cannot answer now (no turn is running).
        """
        ...

    def result(
        self, name: str, arguments: dict[str, Any], status: str, result: str, error_type: str
    ) -> None:
        """Take the result of a call answered `record`."""
        ...


@dataclass(slots=True)
class RecordingTools:
    """Lets every call run, and records each result the agent posts into `recorder`."""

    recorder: Recorder
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def call(self, name: str, arguments: dict[str, Any]) -> ToolAnswer:
        """Run it, and post the result."""
        return ToolAnswer(status="record")

    def result(
        self, name: str, arguments: dict[str, Any], status: str, result: str, error_type: str
    ) -> None:
        """Record the result (numbered in the order results arrive, as the reference agent's)."""
        with self._lock:  # parallel calls post from several connection threads
            self.recorder.tool_result(name, arguments, status, result, error_type)


@dataclass(slots=True)
class CassetteTools:
    """Answers calls from a turn's recorded results; never lets a tool run.

    Identical calls (same name, same canonical arguments) get their recorded results in the
    recorded order; a call with no result left gets the `NOT_RECORDED` text as its result.
    """

    records: Sequence[ToolRecord]
    _recorded: RecordedResults = field(init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def __post_init__(self) -> None:
        self._recorded = RecordedResults(self.records)

    def call(self, name: str, arguments: dict[str, Any]) -> ToolAnswer:
        """The next recorded result of this call, or "not recorded"."""
        with self._lock:
            record = self._recorded.next(name, arguments)
        if isinstance(record, str):
            return ToolAnswer(status="ok", result=record, recorded=False)
        if record.status == "error":
            return ToolAnswer(status="error", result=record.result, error_type=record.error_type)
        return ToolAnswer(status="ok", result=record.result)

    def result(
        self, name: str, arguments: dict[str, Any], status: str, result: str, error_type: str
    ) -> None:
        """Nothing to record: a cassette never answers `record`."""


@dataclass(slots=True)
class LiveTools:
    """Lets every call run and records nothing: the agent's tools as they are."""

    def call(self, name: str, arguments: dict[str, Any]) -> ToolAnswer:
        """Run it; nothing to post."""
        return ToolAnswer(status="live")

    def result(
        self, name: str, arguments: dict[str, Any], status: str, result: str, error_type: str
    ) -> None:
        """Nothing to record."""


def tools_reply(provider: ToolProvider | None, key: str, rest: str, body: bytes) -> Reply:
    """Answer `POST /r/{key}/{rest}` where `rest` is `tools/NAME` or `tools/NAME/result`."""
    if provider is None:
        return error_reply(
            404, f"route {key!r} serves no tools (it was opened without a tool provider)",
            "invalid_request_error",
        )  # fmt: skip
    parts = rest.split("/")
    if len(parts) not in (2, 3) or not parts[1] or (len(parts) == 3 and parts[2] != RESULT):
        return error_reply(
            404, f"POST /{rest} is not a tool path: use /r/{key}/{TOOLS_PATH}/NAME or "
            f"/r/{key}/{TOOLS_PATH}/NAME/{RESULT}", "invalid_request_error",
        )  # fmt: skip
    name = unquote(parts[1])
    try:
        data = _object(body)
        if len(parts) == 2:
            return _json_reply(provider.call(name, data).to_json())
        provider.result(name, *_posted(data))
    except _BadTool as bad:
        return error_reply(400, f"tool {name!r}: {bad}", "invalid_request_error")
    except ToolSourceError as err:
        return error_reply(409, f"tool {name!r}: {err}", "server_error")
    return _json_reply({"recorded": True})


class _BadTool(Exception):
    """A tool request's body is not what the protocol says."""


def _object(body: bytes) -> dict[str, Any]:
    try:
        data = json.loads(body or b"{}")
    except (ValueError, RecursionError):
        raise _BadTool(f"the body is not JSON: {body[:200]!r}") from None
    if not isinstance(data, dict):
        raise _BadTool("the body must be a JSON object")
    return data


def _posted(data: dict[str, Any]) -> tuple[dict[str, Any], str, str, str]:
    """A posted result's arguments, status, result text and error type."""
    arguments, status = data.get("arguments", {}), data.get("status")
    result, error_type = data.get("result"), data.get("error_type") or ""
    if not isinstance(arguments, dict):
        raise _BadTool("'arguments' must be the call's arguments object")
    if status not in ("ok", "error"):
        raise _BadTool(f"'status' must be 'ok' or 'error', not {status!r}")
    if not isinstance(result, str) or not isinstance(error_type, str):
        raise _BadTool("'result' and 'error_type' must be text")
    return arguments, status, result, error_type


def _json_reply(value: Any) -> Reply:
    return Reply(200, json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())
