"""Hermetic tools for Python agents: recorded when recording, answered from the cassette on replay.

`hermetic(fn)` wraps a function tool (sync or async) so that, under plangate, each call first
asks the turn's tools URL (`_tools` in `plangate.replay.endpoint` has the protocol):

- when recording, the endpoint answers `record`: the wrapper runs `fn` here, in the agent's
  process, and posts its result (or the error it raised) to be kept in the golden's tool
  cassette;
- when replaying from the cassette, the endpoint answers with the recorded result (or error)
  and `fn` never runs: a replay never touches the outside world. A call with other arguments
  than any recorded one gets the "Not recorded: ..." text as its result;
- with live tools (`replay --tools live`), the wrapper runs `fn` and records nothing.

Without plangate (no URL), the wrapper calls `fn` as it is. The URL is, in order: the `url`
given to `hermetic`, the current turn's (`PythonRunner` sets it for an in-process agent's
turn, in a context variable, so concurrent turns keep theirs), `$PLANGATE_TOOLS_URL` (set for
a `command:` agent).
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import functools
import inspect
import json
import os
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from typing import Any, TypeVar, cast, overload

from plangate.replay.agents._boundary import TOOLS_URL_ENV

F = TypeVar("F", bound=Callable[..., Any])
URL = str | Callable[[], str | None] | None
"""Where the tools are served: a URL, a function returning the current one, or None."""

TURN_TOOLS_URL: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "plangate_tools_url", default=None
)
"""The running in-process turn's tools URL (set by `PythonRunner` around the turn)."""
_SECONDS = 60.0
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # 127.0.0.1: no proxy


class HermeticError(RuntimeError):
    """plangate's tool routes could not be reached or refused a call: the tool was not run."""


class ReplayedToolError(Exception):
    """A tool error served from the cassette; the raised class has the recorded class's name."""


@overload
def hermetic(fn: F, /, *, url: URL = None, name: str | None = None) -> F: ...


@overload
def hermetic(
    fn: None = None, /, *, url: URL = None, name: str | None = None
) -> Callable[[F], F]: ...


def hermetic(
    fn: F | None = None, /, *, url: URL = None, name: str | None = None
) -> F | Callable[[F], F]:
    """Make a function tool hermetic: recorded when recording, served from the cassette on replay.

    Use it as `@hermetic` (or `hermetic(fn)`) under a framework's own decorator: the wrapper
    keeps `fn`'s name, docstring, signature and annotations (`functools.wraps`), and is async
    when `fn` is, so the framework builds the same tool schema.

    Arguments are sent by name as JSON (pydantic models and dataclasses as their fields; other
    values, such as a framework's run context, as `<TypeName>`). A result is kept as text: a
    string as it is, anything else as JSON (in its own key order), which the replayed call
    decodes again (unless `fn` is annotated `-> str`): a tuple comes back a list, a pydantic
    model a dict. A recorded error is raised again on replay as a
    `ReplayedToolError` subclass with the recorded class's name and the same text.

    Args:
        fn: The tool function.
        url: Where the tools are served (a URL, or a function that returns the current one);
            default: the in-process turn's `tools_url`, then `$PLANGATE_TOOLS_URL`.
        name: The name the call is recorded under (default: `fn.__name__`).

    Returns:
        The wrapped function (or, without `fn`, a decorator).

    Raises:
        HermeticError: (From a call.) plangate's tool routes did not answer; the tool was not run.
    """
    if fn is None:
        return functools.partial(hermetic, url=url, name=name)
    tool = _Tool(fn, name or fn.__name__, url)
    if inspect.iscoroutinefunction(fn):

        async def run_async(*args: Any, **kwargs: Any) -> Any:
            return await tool.run_async(*args, **kwargs)

        return cast(F, functools.wraps(fn)(run_async))

    def run(*args: Any, **kwargs: Any) -> Any:
        return tool.run(*args, **kwargs)

    return cast(F, functools.wraps(fn)(run))


@dataclasses.dataclass(frozen=True, slots=True)
class _Tool:
    fn: Callable[..., Any]
    name: str
    url: URL

    def run(self, *args: Any, **kwargs: Any) -> Any:
        where = self._where()
        if where is None:
            return self.fn(*args, **kwargs)
        arguments = self._arguments(args, kwargs)
        answer = _post(f"{where}/{_quoted(self.name)}", arguments, self.name)
        if answer["status"] not in ("record", "live"):
            return self._served(answer)
        try:
            value = self.fn(*args, **kwargs)
        except Exception as exc:
            self._record(where, answer, arguments, exc)
            raise
        return self._record(where, answer, arguments, value)

    async def run_async(self, *args: Any, **kwargs: Any) -> Any:
        where = self._where()
        if where is None:
            return await self.fn(*args, **kwargs)
        arguments = self._arguments(args, kwargs)
        url = f"{where}/{_quoted(self.name)}"
        answer = await asyncio.to_thread(_post, url, arguments, self.name)
        if answer["status"] not in ("record", "live"):
            return self._served(answer)
        try:
            value = await self.fn(*args, **kwargs)
        except Exception as exc:
            await asyncio.to_thread(self._record, where, answer, arguments, exc)
            raise
        return await asyncio.to_thread(self._record, where, answer, arguments, value)

    def _where(self) -> str | None:
        chosen = self.url() if callable(self.url) else self.url
        found = chosen or TURN_TOOLS_URL.get() or os.environ.get(TOOLS_URL_ENV)
        return found.rstrip("/") if found else None

    def _arguments(self, args: Sequence[Any], kwargs: dict[str, Any]) -> dict[str, Any]:
        bound = inspect.signature(self.fn).bind(*args, **kwargs)  # a wrong call: TypeError
        return json.loads(json.dumps(dict(bound.arguments), default=_jsonable))  # type: ignore[no-any-return]

    def _record(
        self, where: str, answer: dict[str, Any], arguments: dict[str, Any], value: Any
    ) -> Any:
        """Post the outcome when the endpoint records; give `value` back (an error is re-raised)."""
        if answer["status"] == "record":
            failed = isinstance(value, Exception)
            body = {
                "arguments": arguments,
                "status": "error" if failed else "ok",
                "result": str(value) if failed else _text(value),
                "error_type": type(value).__name__ if failed else "",
            }
            _post(f"{where}/{_quoted(self.name)}/result", body, self.name)
        return value

    def _served(self, answer: dict[str, Any]) -> Any:
        text = str(answer.get("result", ""))
        if answer["status"] == "error":
            kind = str(answer.get("error_type") or "ReplayedToolError")
            raise type(kind, (ReplayedToolError,), {})(text)
        if _returns_text(self.fn):
            return text
        try:
            return json.loads(text)
        except ValueError:
            return text


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


def _jsonable(value: Any) -> Any:
    """What `json.dumps` cannot write, as JSON: a model's or dataclass's fields, else its type."""
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    return f"<{type(value).__name__}>"


def _text(value: Any) -> str:
    """A result as text: a string as it is, anything else as JSON in its own key order.

    Not sorted: the replayed value must come back in the order the tool built it, or an agent
    that writes it out again would send the model other text than it recorded.
    """
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=_jsonable)


def _returns_text(fn: Callable[..., Any]) -> bool:
    annotation = inspect.signature(fn).return_annotation
    return annotation in (str, "str")
