"""One tool's calls through plangate's tool routes: asked, run and recorded, or served.

`Calls` is what every `hermetic` tool shares, a function or a framework's tool object: it asks
the turn's tools URL, then runs the tool and records its `Outcome`, or takes the recorded one
(`_tools` in `plangate.replay.endpoint` has the protocol). The URL is, in order: the one given,
the current in-process turn's (`TURN_TOOLS_URL`, set by `PythonRunner`), `$PLANGATE_TOOLS_URL`.
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import inspect
import json
import os
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Awaitable, Callable
from typing import Any

from plangate.replay.agents._boundary import TOOLS_URL_ENV

URL = str | Callable[[], str | None] | None
"""Where the tools are served: a URL, a function returning the current one, or None."""

TURN_TOOLS_URL: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "plangate_tools_url", default=None
)
"""The running in-process turn's tools URL (set by `PythonRunner` around the turn)."""
_SECONDS = 60.0
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # 127.0.0.1: no proxy
_RUN = ("record", "live")
"""The answers that let the tool run."""


class HermeticError(RuntimeError):
    """plangate's tool routes could not be reached or refused a call: the tool was not run."""


class ReplayedToolError(Exception):
    """A tool error served from the cassette; the raised class has the recorded class's name."""


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Outcome:
    """How one call ended: the tool ran (its value or its error), or the cassette answered."""

    value: Any = None
    """The tool's value; from the cassette: the recorded text."""
    error: Exception | None = None
    """The error the tool raised; from the cassette: the recorded one (a `ReplayedToolError`)."""
    served: bool = False
    """Whether the cassette answered (the tool did not run)."""

    def result(self, fn: Callable[..., Any]) -> Any:
        """The call's value for `fn`'s caller: the error raised, served JSON decoded again.

        Served text stays text when `fn` is annotated `-> str`, or is not JSON.
        """
        if self.error is not None:
            raise self.error
        if not self.served or _returns_text(fn):
            return self.value
        try:
            return json.loads(self.value)
        except ValueError:
            return self.value


@dataclasses.dataclass(frozen=True, slots=True)
class Calls:
    """One tool's calls through plangate's tool routes, under the name they are recorded by."""

    name: str
    """The name the calls are recorded under."""
    url: URL
    """Where the tools are served (None: the turn's, or the environment's)."""

    def run(
        self,
        arguments: Callable[[], dict[str, Any]],
        call: Callable[[], Any],
        text: Callable[[Any], str],
    ) -> Outcome:
        """Ask the routes, then `call` the tool (recording its outcome) or take the recording.

        Args:
            arguments: The call's arguments as JSON (called only when plangate is there).
            call: Runs the tool.
            text: The tool's value as the text to record.
        """
        where = self._where()
        if where is None:
            return _ran(call)
        asked = arguments()
        answer = _post(f"{where}/{_quoted(self.name)}", asked, self.name)
        if answer["status"] not in _RUN:
            return _served(answer)
        outcome = _ran(call)
        if answer["status"] == "record":
            self._record(where, asked, outcome, text)
        return outcome

    async def run_async(
        self,
        arguments: Callable[[], dict[str, Any]],
        call: Callable[[], Awaitable[Any]],
        text: Callable[[Any], str],
    ) -> Outcome:
        """`run`, for an async tool: the posts run in a thread, off the event loop."""
        where = self._where()
        if where is None:
            return await _ran_async(call)
        asked = arguments()
        route = f"{where}/{_quoted(self.name)}"
        answer = await asyncio.to_thread(_post, route, asked, self.name)
        if answer["status"] not in _RUN:
            return _served(answer)
        outcome = await _ran_async(call)
        if answer["status"] == "record":
            await asyncio.to_thread(self._record, where, asked, outcome, text)
        return outcome

    def _where(self) -> str | None:
        chosen = self.url() if callable(self.url) else self.url
        found = chosen or TURN_TOOLS_URL.get() or os.environ.get(TOOLS_URL_ENV)
        return found.rstrip("/") if found else None

    def _record(
        self, where: str, arguments: dict[str, Any], outcome: Outcome, text: Callable[[Any], str]
    ) -> None:
        failed = outcome.error
        body = {
            "arguments": arguments,
            "status": "ok" if failed is None else "error",
            "result": text(outcome.value) if failed is None else str(failed),
            "error_type": "" if failed is None else type(failed).__name__,
        }
        _post(f"{where}/{_quoted(self.name)}/result", body, self.name)


def _ran(call: Callable[[], Any]) -> Outcome:
    try:
        return Outcome(value=call())
    except Exception as exc:
        return Outcome(error=exc)


async def _ran_async(call: Callable[[], Awaitable[Any]]) -> Outcome:
    try:
        return Outcome(value=await call())
    except Exception as exc:
        return Outcome(error=exc)


def _served(answer: dict[str, Any]) -> Outcome:
    text = str(answer.get("result", ""))
    if answer["status"] != "error":
        return Outcome(value=text, served=True)
    kind = str(answer.get("error_type") or "ReplayedToolError")
    return Outcome(value=text, error=type(kind, (ReplayedToolError,), {})(text), served=True)


def _post(url: str, body: dict[str, Any], name: str) -> dict[str, Any]:
    """POST `body` as JSON to plangate's tool route; its JSON answer."""
    data = json.dumps(body, ensure_ascii=False).encode()
    request = urllib.request.Request(
        url, data=data, method="POST", headers={"Content-Type": "application/json"}
    )
    try:
        with _OPENER.open(request, timeout=_SECONDS) as response:
            answer = json.loads(response.read())
    except urllib.error.HTTPError as err:
        detail = err.read()[:500].decode("utf-8", "replace")
        raise HermeticError(f"tool {name!r}: plangate answered HTTP {err.code}: {detail}") from None
    except (OSError, ValueError) as err:
        raise HermeticError(f"tool {name!r}: plangate's tools at {url} failed: {err}") from err
    if not isinstance(answer, dict) or "status" not in answer and "recorded" not in answer:
        raise HermeticError(f"tool {name!r}: plangate answered {answer!r}")
    return answer


def _quoted(name: str) -> str:
    return urllib.parse.quote(name, safe="")


def _returns_text(fn: Callable[..., Any]) -> bool:
    annotation = inspect.signature(fn).return_annotation
    return annotation in (str, "str")
