"""Tools: a decorator that turns a typed function into a tool, argument validation, execution.

A tool's JSON schema comes from its type hints and its Google-style docstring. Every failure a
model can fix (unknown tool, malformed or invalid arguments, a `ToolRetry` raised by the tool,
any other exception in the tool) comes back as an error result that says what to do next; the
run goes on. A failure of what serves the tools (`ToolSourceError`: a tool server that is down,
a tool that does not answer within its timeout) is not the model's to fix: it propagates, and
the loop stops the turn with `tool_error`.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import inspect
import json
import threading
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, overload

from plangate.harness._errors import PlangateError
from plangate.harness._messages import ToolCall, ToolDefinition, canonical_json, parse_json
from plangate.harness._schemas import compiled, function_schema, parse_docstring, validate

ToolFunction = Callable[..., Any] | Callable[..., Awaitable[Any]]


class ToolRetry(Exception):
    """Raised by a tool when the model can fix the call; the message becomes the tool result."""


class ToolSourceError(PlangateError):
    """What serves a tool failed, not the tool: an infrastructure error, not the model's to fix.

    Raised by a tool source (a tool server that is down, a cassette that cannot answer) or by
    `run_tool` when a call outlives its timeout. The turn stops with `tool_error`, which every
    evaluator counts as an error, never as a pass or a fail.
    """


@dataclass(frozen=True, slots=True, kw_only=True)
class Tool:
    """A tool the model can call: its definition and the function that runs it."""

    name: str
    """The name the model calls."""
    description: str
    """What it does, for the model."""
    parameters: dict[str, Any]
    """JSON schema of the arguments object."""
    function: ToolFunction
    """The implementation; sync or async; called with keyword arguments."""
    is_async: bool
    """Whether `function` must be awaited."""
    definition: ToolDefinition = field(init=False, repr=False, compare=False)
    """What the model is told about this tool (made once: it is offered on every model call)."""
    accepts: Callable[[Any], bool] = field(init=False, repr=False, compare=False)
    """Whether arguments are valid under `parameters`: `validate` without the messages,
    compiled when the tool is made (`validate` runs only to explain a refusal)."""

    def __post_init__(self) -> None:
        definition = ToolDefinition(
            name=self.name, description=self.description, parameters=self.parameters
        )
        object.__setattr__(self, "definition", definition)
        object.__setattr__(self, "accepts", compiled(self.parameters))


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolResult:
    """The outcome of running one tool call."""

    call: ToolCall
    """The call that was run."""
    content: str
    """What the model sees."""
    status: Literal["ok", "error"]
    """`error` for anything the model should fix."""
    arguments: Mapping[str, Any] | None
    """The parsed arguments, or None when they were not valid JSON."""
    value: Any = None
    """The tool's return value before it was turned into text (None on error)."""


@overload
def tool(function: ToolFunction, /) -> Tool: ...
@overload
def tool(
    *, name: str | None = None, description: str | None = None
) -> Callable[[ToolFunction], Tool]: ...
def tool(
    function: ToolFunction | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
) -> Tool | Callable[[ToolFunction], Tool]:
    """Make a `Tool` from a typed function; usable bare (`@tool`) or with options.

    The schema is built from the parameters' type hints (str, int, float, bool, `Literal`,
    `list[...]`, `dict[str, ...]`, `TypedDict`, `X | None`) and their descriptions from the
    docstring's `Args:` section. Parameters without a default are required.
    """

    def build(fn: ToolFunction) -> Tool:
        summary, parameters = _described_schema(fn)
        return Tool(
            name=name or fn.__name__,
            description=description or summary,
            parameters=parameters,
            function=fn,
            is_async=inspect.iscoroutinefunction(fn),
        )

    return build(function) if function is not None else build


_SCHEMAS: dict[object, tuple[str, dict[str, Any]]] = {}


def _described_schema(fn: ToolFunction) -> tuple[str, dict[str, Any]]:
    """The docstring summary and schema of `fn`, computed once per function body.

    Closures built per session (plan tools, `finish`) and methods of per-session workspaces
    share their code object, so each session does not pay for type hints and docstring
    parsing again.
    """
    code = getattr(getattr(fn, "__func__", fn), "__code__", None)
    cached = _SCHEMAS.get(code) if code is not None else None
    if cached is None:
        summary, arg_docs = parse_docstring(inspect.getdoc(fn) or "")
        cached = (summary, function_schema(fn, arg_docs))
        if code is not None:
            _SCHEMAS[code] = cached
    return cached


def render_result(value: Any) -> str:
    """Turn a tool's return value into the text the model sees."""
    if isinstance(value, str):
        return value
    return canonical_json(value)


async def run_tool(
    call: ToolCall,
    tools: Mapping[str, Tool],
    parsed: dict[str, Any] | None = None,
    *,
    time_limit: float = 0,
) -> ToolResult:
    """Run one call; every mistake the model can fix becomes an error result, never a raise.

    `parsed` is the call's arguments object when the caller has parsed it already (the loop
    does, for the loop guard's key); without it the arguments text is parsed here.

    Raises:
        ToolSourceError: The tool's source failed, or the call took longer than `time_limit`
            seconds (0: no limit).
    """
    found = tools.get(call.name)
    if found is None:
        names = ", ".join(sorted(tools)) or "none"
        return _error(
            call, None, f"Unknown tool {call.name!r}. Available tools: {names}. Call one of them."
        )
    if parsed is not None:
        arguments: Any = parsed
    else:
        try:
            arguments = parse_json(call.arguments or "{}")
        except (json.JSONDecodeError, RecursionError) as exc:
            return _error(
                call,
                None,
                f"The arguments of {call.name!r} are not valid JSON ({_where(exc)}). "
                "Send a JSON object that matches the tool's schema.",
            )
    if not isinstance(arguments, dict):
        return _error(call, None, f"The arguments of {call.name!r} must be a JSON object.")
    problems = [] if found.accepts(arguments) else validate(found.parameters, arguments)
    if problems:
        listed = "; ".join(problems)
        return _error(
            call,
            arguments,
            f"Invalid arguments for {call.name!r}: {listed}. "
            "Fix the arguments and call the tool again.",
        )
    try:
        value = await invoke(found, arguments, time_limit)
        content = render_result(value)
    except ToolRetry as exc:
        return _error(call, arguments, str(exc))
    except ToolSourceError:
        raise
    except Exception as exc:  # a tool bug must not end the run: the model can try another way
        return _error(
            call,
            arguments,
            f"Tool {call.name!r} failed: {type(exc).__name__}: {exc}. "
            "Try different arguments or another approach.",
        )
    return ToolResult(call=call, content=content, status="ok", arguments=arguments, value=value)


async def invoke(found: Tool, arguments: Mapping[str, Any], time_limit: float = 0) -> Any:
    """Call a tool's function with `arguments`, within `time_limit` seconds (0: no limit).

    Without a limit a sync tool runs right here, at no cost. With one, a sync tool runs in a
    daemon thread, since only a thread lets the loop stop waiting for a function that hangs;
    a thread left hanging is abandoned, and never keeps the process from exiting.

    Raises:
        ToolSourceError: The call took longer than `time_limit`.
    """
    if not time_limit:
        value = found.function(**arguments)
        return await value if found.is_async else value
    deadline = asyncio.timeout(time_limit)
    try:
        async with deadline:
            if found.is_async:
                return await found.function(**arguments)
            return await _in_thread(functools.partial(found.function, **arguments))
    except TimeoutError:
        if not deadline.expired():  # the tool's own timeout: the model sees it, as any error
            raise
        raise ToolSourceError(
            f"tool {found.name!r} did not answer within {time_limit:g} s (the tools' timeout)"
        ) from None


def _in_thread(function: Callable[[], Any]) -> asyncio.Future[Any]:
    """`function()` in a daemon thread of its own, with the caller's context (its spans)."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()
    context = contextvars.copy_context()

    def settle(value: Any, error: BaseException | None) -> None:
        if future.done():  # abandoned: the caller stopped waiting
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(value)

    def work() -> None:
        try:
            value, error = context.run(function), None
        except BaseException as exc:  # handed to the caller, who decides
            value, error = None, exc
        with contextlib.suppress(RuntimeError):  # the loop closed while the tool hung
            loop.call_soon_threadsafe(settle, value, error)

    threading.Thread(target=work, name="plangate-tool", daemon=True).start()
    return future


def _error(call: ToolCall, arguments: Mapping[str, Any] | None, message: str) -> ToolResult:
    return ToolResult(call=call, content=message, status="error", arguments=arguments)


def _where(exc: Exception) -> str:
    if isinstance(exc, json.JSONDecodeError):
        return f"{exc.msg} at position {exc.pos}"
    return "nested too deeply to read"
