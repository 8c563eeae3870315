"""Tool schemas: JSON schemas from type hints and Google docstrings, and checking arguments.

`function_schema` builds a tool's schema from its function; `validate` names every problem with
a call's arguments (for the model to fix), and `compile_schema` answers the yes-or-no question
fast, from checks built once (the two agree: a property test holds them to it).
"""

from __future__ import annotations

import functools
import inspect
import json
import re
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

_SECTION = re.compile(r"^(Args|Arguments|Returns|Raises|Yields|Examples?|Notes?):\s*$")
_ARG = re.compile(r"^(\s+)(\w+)(?:\s*\([^)]*\))?:\s*(.*)$")


def parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """Split a Google docstring into its description and the `Args:` descriptions."""
    lines = doc.splitlines()
    summary: list[str] = []
    args: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    indent = 0
    for line in lines:
        heading = _SECTION.match(line)
        if heading:
            section, current = heading.group(1), None
            continue
        if section is None:
            summary.append(line)
            continue
        if section not in ("Args", "Arguments") or not line.strip():
            continue
        depth = len(line) - len(line.lstrip())
        match = _ARG.match(line)
        if match and (current is None or depth <= indent):
            indent, current = depth, match.group(2)
            args[current] = match.group(3).strip()
        elif current is not None:
            # A deeper line continues the argument above, even when it reads "Format: …".
            args[current] = f"{args[current]} {line.strip()}".strip()
    return "\n".join(summary).strip(), args


def function_schema(fn: Callable[..., Any], arg_docs: Mapping[str, str]) -> dict[str, Any]:
    """The JSON schema of `fn`'s keyword arguments."""
    hints = typing.get_type_hints(fn, include_extras=False)
    properties: dict[str, Any] = {}
    required: list[str] = []
    for param in inspect.signature(fn).parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise TypeError(f"tool {fn.__name__!r}: *args and **kwargs are not supported")
        if param.name not in hints:
            raise TypeError(f"tool {fn.__name__!r}: parameter {param.name!r} needs a type hint")
        prop = type_schema(hints[param.name])
        if param.name in arg_docs:
            prop["description"] = arg_docs[param.name]
        if param.default is inspect.Parameter.empty:
            required.append(param.name)
        elif param.default is not None:
            prop["default"] = param.default
        properties[param.name] = prop
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


_SCALARS: dict[Any, str] = {str: "string", int: "integer", float: "number", bool: "boolean"}


def type_schema(hint: Any) -> dict[str, Any]:
    """The JSON schema of one type hint."""
    if hint in _SCALARS:
        return {"type": _SCALARS[hint]}
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is Literal:
        return {"enum": list(args)}
    if origin in (typing.Union, types.UnionType):
        options = [a for a in args if a is not type(None)]
        inner = (
            type_schema(options[0])
            if len(options) == 1
            else {"anyOf": [type_schema(a) for a in options]}
        )
        return {"anyOf": [inner, {"type": "null"}]} if type(None) in args else inner
    if origin is tuple and not (len(args) == 2 and args[1] is Ellipsis):
        raise TypeError(f"tuple hints must be tuple[X, ...], not {hint!r}; use a TypedDict")
    if origin in (list, Sequence, tuple) or hint is list:
        return {"type": "array", "items": type_schema(args[0])} if args else {"type": "array"}
    if origin is dict or hint is dict:
        return (
            {"type": "object", "additionalProperties": type_schema(args[1])}
            if args
            else {"type": "object"}
        )
    if typing.is_typeddict(hint):
        return _typeddict_schema(hint)
    if hint is Any:
        return {}
    raise TypeError(f"unsupported type hint for a tool parameter: {hint!r}")


def _typeddict_schema(hint: Any) -> dict[str, Any]:
    # Read Required / NotRequired from the hints themselves: under postponed annotations,
    # Python 3.11's `__required_keys__` does not see them.
    properties: dict[str, Any] = {}
    required: list[str] = []
    for key, value in typing.get_type_hints(hint, include_extras=True).items():
        origin = typing.get_origin(value)
        if origin in (typing.NotRequired, typing.Required):
            inner = typing.get_args(value)[0]
            is_required = origin is typing.Required
        else:
            # `__required_keys__` knows each key's own class totality (inheritance).
            inner, is_required = value, key in hint.__required_keys__
        properties[key] = type_schema(inner)
        if is_required:
            required.append(key)
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
    "null": (type(None),),
}


def validate(schema: Mapping[str, Any], value: Any, path: str = "") -> list[str]:
    """Check `value` against the subset of JSON schema that `function_schema` produces.

    Returns one readable problem per mistake, each naming the argument path (empty if valid).
    """
    where = path or "arguments"
    if "anyOf" in schema:
        if any(not validate(option, value, path) for option in schema["anyOf"]):
            return []
        return [f"{where}: {json.dumps(value)} does not match any allowed form"]
    if "enum" in schema:
        if any(value == v and type(value) is type(v) for v in schema["enum"]):
            return []
        allowed = ", ".join(json.dumps(v) for v in schema["enum"])
        return [f"{where} must be one of {allowed} (got {json.dumps(value)})"]
    expected = schema.get("type")
    if expected is not None and not _is_type(value, expected):
        return [f"{where} must be {_article(expected)} (got {json.dumps(value)})"]
    if expected == "array" and "items" in schema:
        return [
            e
            for i, item in enumerate(value)
            for e in validate(schema["items"], item, f"{where}[{i}]")
        ]
    if expected == "object":
        return _validate_object(schema, value, path)
    return []


def _validate_object(schema: Mapping[str, Any], value: dict[str, Any], path: str) -> list[str]:
    problems: list[str] = []
    properties: Mapping[str, Any] = schema.get("properties", {})
    prefix = f"{path}." if path else ""
    for key in schema.get("required", ()):
        if key not in value:
            problems.append(f"missing required argument {prefix}{key!s}")
    extra = schema.get("additionalProperties", True)
    for key, item in value.items():
        if key in properties:
            problems.extend(validate(properties[key], item, f"{prefix}{key}"))
        elif extra is False:
            known = ", ".join(properties) or "none"
            problems.append(f"unknown argument {prefix}{key} (allowed: {known})")
        elif isinstance(extra, Mapping):
            problems.extend(validate(extra, item, f"{prefix}{key}"))
    return problems


Check = Callable[[Any], bool]

_CHECKS: dict[int, tuple[Mapping[str, Any], Check]] = {}


def compiled(schema: Mapping[str, Any]) -> Check:
    """`compile_schema`, once per schema object.

    The tools made for every session (plan tools, `finish`) share their schema object through
    `_described_schema`, so a session does not compile them again.
    """
    cached = _CHECKS.get(id(schema))
    if cached is None or cached[0] is not schema:
        if len(_CHECKS) >= 1024:
            _CHECKS.clear()
        cached = _CHECKS[id(schema)] = (schema, compile_schema(schema))
    return cached[1]


def compile_schema(schema: Mapping[str, Any]) -> Check:
    """A function that says whether `validate(schema, value)` finds no problem, and is fast.

    `validate` interprets the schema and names every problem; a tool runs far more often
    with valid arguments than not, so this answers the yes-or-no question from checks built
    once. The two must agree on every schema and value (a property test holds them to it).
    """
    if "anyOf" in schema:
        options = [compile_schema(option) for option in schema["anyOf"]]
        return lambda value: any(option(value) for option in options)
    if "enum" in schema:
        allowed = list(schema["enum"])
        return lambda value: any(value == v and type(value) is type(v) for v in allowed)
    expected = schema.get("type")
    if expected == "array" and "items" in schema:
        item = compile_schema(schema["items"])
        return lambda value: isinstance(value, list) and all(item(v) for v in value)
    if expected == "object":
        return _compile_object(schema)
    if expected is None:
        return lambda value: True
    return functools.partial(_is_type, expected=expected)


def _compile_object(schema: Mapping[str, Any]) -> Check:
    properties = {key: compile_schema(s) for key, s in schema.get("properties", {}).items()}
    required = tuple(schema.get("required", ()))
    extra = schema.get("additionalProperties", True)
    rest = compile_schema(extra) if isinstance(extra, Mapping) else None

    def check(value: Any) -> bool:
        if not isinstance(value, dict):
            return False
        for key in required:
            if key not in value:
                return False
        for key, item in value.items():
            known = properties.get(key)
            if known is not None:
                if not known(item):
                    return False
            elif extra is False or (rest is not None and not rest(item)):
                return False
        return True

    return check


def _is_type(value: Any, expected: str) -> bool:
    if isinstance(value, bool) and expected in ("integer", "number"):
        return False
    return isinstance(value, _JSON_TYPES.get(expected, (object,)))


def _article(json_type: str) -> str:
    return f"an {json_type}" if json_type[0] in "aeiou" else f"a {json_type}"
