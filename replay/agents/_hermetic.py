"""Hermetic tools for Python agents: recorded when recording, answered from the cassette on replay.

`hermetic(tool)` wraps an agent's tool so that, under plangate, each call first asks the turn's
tools URL (`_tools` in `plangate.replay.endpoint` has the protocol):

- when recording, the endpoint answers `record`: the wrapper runs the tool here, in the agent's
  process, and posts its result (or the error it raised) to be kept in the golden's tool
  cassette;
- when replaying from the cassette, the endpoint answers with the recorded result (or error)
  and the tool never runs: a replay never touches the outside world. A call with other
  arguments than any recorded one gets the "Not recorded: ..." text as its result;
- with live tools (`replay --tools live`), the wrapper runs the tool and records nothing.

The tool is a function (sync or async), or a framework's tool object that a team already built:
an OpenAI Agents SDK `FunctionTool` or a pydantic-ai `Tool` or `FunctionToolset`
(`_hermetic_frameworks` wraps those, without plangate importing either framework).

Without plangate (no URL), the wrapper runs the tool as it is. The URL is, in order: the `url`
given to `hermetic`, the current turn's (`PythonRunner` sets it for an in-process agent's
turn, in a context variable, so concurrent turns keep theirs), `$PLANGATE_TOOLS_URL` (set for
a `command:` agent).
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import json
from collections.abc import Callable, Sequence
from typing import Any, TypeVar, overload

from plangate.replay.agents._hermetic_frameworks import framework_tool
from plangate.replay.agents._tool_calls import (
    URL,
    Calls,
    HermeticError,
    ReplayedToolError,
)

__all__ = ["HermeticError", "ReplayedToolError", "hermetic"]

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")


@overload
def hermetic(
    tool: None = None, /, *, url: URL = None, name: str | None = None
) -> Callable[[F], F]: ...


@overload
def hermetic(tool: T, /, *, url: URL = None, name: str | None = None) -> T: ...


def hermetic(tool: Any = None, /, *, url: URL = None, name: str | None = None) -> Any:
    """Make a tool hermetic: recorded when recording, served from the cassette on replay.

    `tool` is one of:

    - a function (sync or async). Use it as `@hermetic` (or `hermetic(fn)`) under a framework's
      own decorator: the wrapper keeps `fn`'s name, docstring, signature and annotations
      (`functools.wraps`), and is async when `fn` is, so the framework builds the same tool
      schema. Arguments are recorded by name as JSON (pydantic models and dataclasses as their
      fields; other values, such as a framework's run context, as `<TypeName>`). A result is
      kept as text: a string as it is, anything else as JSON (in its own key order), which the
      replayed call decodes again (unless `fn` is annotated `-> str`): a tuple comes back a
      list, a pydantic model a dict.
    - an OpenAI Agents SDK `FunctionTool` (from `@function_tool`, or built by hand): a copy, the
      same name, description, JSON schema and settings, whose invocation is recorded under the
      tool's name with the model's JSON arguments as they were sent, and its output as the text
      the SDK gives the model (`str()` of a value that is not a string: a dict in Python's
      notation). Image, file or text parts (`ToolOutputImage`, ...) cannot be kept as text.
    - a pydantic-ai `Tool`: a copy, the same name, description, schema, `takes_ctx`,
      `max_retries` and settings, whose function call is recorded with its validated arguments
      (without the run context), and its return value as the text pydantic-ai gives the model
      (JSON), decoded again on replay unless the function is annotated `-> str`. A `ToolReturn`
      or a file cannot be kept as text. A pydantic-ai `FunctionToolset`: a copy whose tools
      are each made hermetic so.

    An error the tool raised is recorded (its class's name and text, not what the model was
    told) and raised again on replay as a `ReplayedToolError` subclass with the recorded class's
    name and the same text; the framework then treats it as it treated the original, so the
    model is given the same text. pydantic-ai's `ModelRetry` and `ToolFailed` come back as
    themselves. An Agents SDK tool's failure function (by default the fixed "An error occurred
    while running the tool. Please try again.") turns the replayed error into text again (it
    sees a `ReplayedToolError`: its class's name, not the class), and a tool built without one
    fails the run again.

    Args:
        tool: The tool: a function, an Agents SDK `FunctionTool`, a pydantic-ai `Tool` or
            `FunctionToolset`.
        url: Where the tools are served (a URL, or a function that returns the current one);
            default: the in-process turn's `tools_url`, then `$PLANGATE_TOOLS_URL`.
        name: The name the calls are recorded under (default: the function's or the tool's;
            not for a toolset, whose tools keep their own).

    Returns:
        The wrapped tool, of the kind given (or, without `tool`, a decorator).

    Raises:
        TypeError: `tool` is none of those, or `name` was given for a toolset. (From a recorded
            call.) A framework tool's result cannot be kept as text.
        HermeticError: (From a call.) plangate's tool routes did not answer; the tool was not run.
    """
    if tool is None:
        return functools.partial(hermetic, url=url, name=name)
    wrapped = framework_tool(tool, name, lambda recorded: Calls(name or recorded, url))
    if wrapped is not None:
        return wrapped
    if not callable(tool):
        raise TypeError(
            "hermetic takes a tool function, an OpenAI Agents SDK FunctionTool, or a "
            f"pydantic-ai Tool or FunctionToolset, not {type(tool).__qualname__!r}: {tool!r:.80}"
        )
    return _wrapped_function(_Function(tool, Calls(name or tool.__name__, url)))


def _wrapped_function(function: _Function) -> Any:
    fn = function.fn
    if inspect.iscoroutinefunction(fn):

        async def run_async(*args: Any, **kwargs: Any) -> Any:
            return await function.run_async(*args, **kwargs)

        return functools.wraps(fn)(run_async)

    def run(*args: Any, **kwargs: Any) -> Any:
        return function.run(*args, **kwargs)

    return functools.wraps(fn)(run)


@dataclasses.dataclass(frozen=True, slots=True)
class _Function:
    fn: Callable[..., Any]
    calls: Calls

    def run(self, *args: Any, **kwargs: Any) -> Any:
        outcome = self.calls.run(
            lambda: self._arguments(args, kwargs), lambda: self.fn(*args, **kwargs), _text
        )
        return outcome.result(self.fn)

    async def run_async(self, *args: Any, **kwargs: Any) -> Any:
        outcome = await self.calls.run_async(
            lambda: self._arguments(args, kwargs), lambda: self.fn(*args, **kwargs), _text
        )
        return outcome.result(self.fn)

    def _arguments(self, args: Sequence[Any], kwargs: dict[str, Any]) -> dict[str, Any]:
        bound = inspect.signature(self.fn).bind(*args, **kwargs)  # a wrong call: TypeError
        return json.loads(json.dumps(dict(bound.arguments), default=_jsonable))  # type: ignore[no-any-return]


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
