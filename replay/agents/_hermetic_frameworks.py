"""The frameworks' tool objects made hermetic: the OpenAI Agents SDK's and pydantic-ai's.

`hermetic` hands a tool object here. Each adapter copies it and replaces only what the framework
calls when the model calls the tool, so the copy keeps the tool's name, description, schema and
settings:

- Agents SDK `FunctionTool`: the runner awaits `on_invoke_tool(context, input_json)`. The copy's
  invoker records the model's JSON arguments and the output as the text the SDK gives the model
  (`str()` of a value that is not a string). A `@function_tool` invoker catches the tool's error
  and gives the model its failure function's text instead (by default the fixed "An error
  occurred while running the tool. Please try again."): the copy runs the original invoker with
  no failure function, so the error itself is recorded, then hands the error (on replay, the
  recorded one) to the tool's own failure function, so the model gets the same text when
  recorded and when replayed. A tool built by hand (`FunctionTool(on_invoke_tool=...)`) has no
  failure handling: its error fails the run, when recorded and when replayed.
- pydantic-ai `Tool`: the toolset awaits `function_schema.call(args, ctx)`, which calls
  `function_schema.function`. The copy's function records the validated arguments by name
  (not the run context) and the value as the text pydantic-ai gives the model
  (`ToolReturnPart.model_response_str()`: JSON for a value that is not a string), which a
  replay decodes again unless the function is annotated `-> str`. `ModelRetry` and `ToolFailed`
  are raised again as themselves, so the model gets the same retry prompt or failed result.
  A `FunctionToolset` is copied with each of its tools made hermetic so.

What cannot be kept as text is refused with a `TypeError` when recorded, rather than replayed
as other text: an SDK tool's image, file or text parts (`ToolOutputImage`, ...), a pydantic-ai
`ToolReturn` or file. The SDK's own report of a handled error (a log line, an error on the
tool's span) is not made: the failure function runs outside its invoker.

Neither framework is imported here unless one of its objects is given: a tool object is
recognized by the name and package of its class (or of a class it derives from).
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import json
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from agents import FunctionTool
    from pydantic_ai import Tool
    from pydantic_ai._function_schema import FunctionSchema
    from pydantic_ai.toolsets import FunctionToolset

    from plangate.replay.agents._tool_calls import Calls, Outcome

UNPARSED = "_unparsed"
"""The key an Agents SDK call's arguments are recorded under when they are not a JSON object."""


def framework_tool(tool: object, name: str | None, calls: Callable[[str], Calls]) -> Any | None:
    """`tool` made hermetic if it is a framework's tool object; None if it is not one.

    Args:
        tool: What `hermetic` was given.
        name: The name `hermetic` was given (None: each tool's own).
        calls: A tool's calls, given the tool's own name.

    Raises:
        TypeError: `name` was given with a toolset.
    """
    if _is(tool, "agents", "FunctionTool"):
        sdk = cast("FunctionTool", tool)
        return sdk_tool(sdk, calls(sdk.name))
    if _is(tool, "pydantic_ai", "Tool"):
        pydantic = cast("Tool[Any]", tool)
        return pydantic_tool(pydantic, calls(pydantic.name))
    if not _is(tool, "pydantic_ai", "FunctionToolset"):
        return None
    if name is not None:
        raise TypeError(f"hermetic(name={name!r}) names one tool, not a toolset's tools")
    return pydantic_toolset(cast("FunctionToolset[Any]", tool), calls)


def sdk_tool(tool: FunctionTool, calls: Calls) -> FunctionTool:
    """A copy of an Agents SDK function tool whose invocations are recorded and replayed."""
    from agents import tool as sdk

    # The same invoker with no failure function: it raises the tool's error, for the record.
    raw = sdk.set_function_tool_failure_error_function(copy.copy(tool), None)
    # `@function_tool`'s invoker handles errors (it is bound again to each copy, hence this
    # hook); an invoker built by hand lets them fail the run.
    handles = callable(getattr(tool.on_invoke_tool, "__agents_bind_function_tool__", None))
    text = functools.partial(_sdk_text, calls.name)

    async def invoke(context: Any, input_json: str) -> Any:
        outcome = await calls.run_async(
            lambda: _json_object(input_json), lambda: raw.on_invoke_tool(context, input_json), text
        )
        if outcome.error is None:
            return outcome.value
        failed = None
        if handles:
            failed = await sdk.maybe_invoke_function_tool_failure_error_function(
                function_tool=tool, context=context, error=outcome.error
            )
        if failed is None:
            raise outcome.error
        return failed

    wrapped = copy.copy(tool)
    wrapped.on_invoke_tool = invoke
    return wrapped


def pydantic_tool(tool: Tool[Any], calls: Calls) -> Tool[Any]:
    """A copy of a pydantic-ai tool whose function calls are recorded and replayed."""
    schema = tool.function_schema
    function = _recorded(schema, calls)
    wrapped = copy.copy(tool)
    wrapped.function = function
    wrapped.function_schema = dataclasses.replace(schema, function=function)
    return wrapped


def pydantic_toolset(
    toolset: FunctionToolset[Any], calls: Callable[[str], Calls]
) -> FunctionToolset[Any]:
    """A copy of a pydantic-ai function toolset whose tools are each made hermetic."""
    wrapped = copy.copy(toolset)
    wrapped.tools = {key: pydantic_tool(t, calls(t.name)) for key, t in toolset.tools.items()}
    return wrapped


def _recorded(schema: FunctionSchema, calls: Calls) -> Callable[..., Any]:
    """The schema's function, recorded and replayed: async when it is, as pydantic-ai calls it."""
    fn = schema.function
    text = functools.partial(_pydantic_text, calls.name)

    def arguments(args: Sequence[Any], kwargs: dict[str, Any]) -> Callable[[], dict[str, Any]]:
        return lambda: _named(schema, args, kwargs)

    if schema.is_async:

        async def run_async(*args: Any, **kwargs: Any) -> Any:
            call = functools.partial(fn, *args, **kwargs)
            outcome = await calls.run_async(arguments(args, kwargs), call, text)
            return _pydantic_result(outcome, fn)

        return functools.wraps(fn)(run_async)

    def run(*args: Any, **kwargs: Any) -> Any:
        outcome = calls.run(arguments(args, kwargs), functools.partial(fn, *args, **kwargs), text)
        return _pydantic_result(outcome, fn)

    return functools.wraps(fn)(run)


def _is(tool: object, package: str, name: str) -> bool:
    """Whether `tool` is a `package`'s `name` (its class, or one it derives from)."""
    return any(
        kind.__name__ == name and kind.__module__.partition(".")[0] == package
        for kind in type(tool).__mro__
    )


def _json_object(input_json: str) -> dict[str, Any]:
    """The model's arguments, parsed (as the SDK does: empty text is no arguments)."""
    try:
        parsed = json.loads(input_json) if input_json else {}
    except ValueError:
        parsed = None
    return parsed if isinstance(parsed, dict) else {UNPARSED: input_json}


def _sdk_text(name: str, output: Any) -> str:
    """The text the Agents SDK gives the model for a tool's output."""
    from agents import ItemHelpers

    converted = ItemHelpers._convert_tool_output(output)  # the SDK's own: str(), or parts
    if not isinstance(converted, str):
        raise TypeError(
            f"tool {name!r} returned {type(output).__name__} (image, file or text parts), "
            "which hermetic cannot record: return text"
        )
    return converted


def _named(schema: FunctionSchema, args: Sequence[Any], kwargs: dict[str, Any]) -> dict[str, Any]:
    """The arguments pydantic-ai validated, by name, as JSON (what `function_schema.call` got)."""
    from pydantic_core import to_jsonable_python

    rest = list(args[1:] if schema.takes_ctx else args)
    named: dict[str, Any] = dict(zip(schema.positional_fields, rest, strict=False))
    if schema.var_positional_field is not None:
        named[schema.var_positional_field] = rest[len(schema.positional_fields) :]
    named.update(kwargs)
    return dict(to_jsonable_python(named, serialize_unknown=True))


def _pydantic_text(name: str, value: Any) -> str:
    """The text pydantic-ai gives the model for a tool's value (JSON if not a string)."""
    from pydantic_ai.messages import ToolReturn, ToolReturnPart

    part = None if isinstance(value, ToolReturn) else ToolReturnPart(name, value)
    if part is None or part.files:
        raise TypeError(
            f"tool {name!r} returned {type(value).__name__} (a ToolReturn or files), which "
            "hermetic cannot record: return the value alone"
        )
    return part.model_response_str()


def _pydantic_result(outcome: Outcome, fn: Callable[..., Any]) -> Any:
    """The call's value; a served `ModelRetry` or `ToolFailed` raised as itself."""
    from pydantic_ai.exceptions import ModelRetry, ToolFailed

    error = outcome.error
    if outcome.served and error is not None:
        kind = {c.__name__: c for c in (ModelRetry, ToolFailed)}.get(type(error).__name__)
        if kind is not None:
            raise kind(str(error)) from None
    return outcome.result(fn)
