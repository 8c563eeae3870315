"""Large tool results by reference: the model gets a short description and queries the rest.

A tool result longer than `variant.context.result_reference_chars` is stored with the session
and the model is sent, instead of the text, a reference id (`ref-1`, `ref-2`, …), the result's
shape (for JSON: its type, its top-level keys or its length and item keys; for text: its
length and line count), how it starts, and how to query it: `query_result(ref, expression)`
runs a jq expression over the stored result and returns what it selects.

The store in this feature's state is the source of truth for the full results: the history,
the `TurnResult` and the TOOL span's `output.value` all hold the reference text the model saw,
and the state is saved with the session, so a restored session can still query its references.
Results of `query_result` itself, of `finish`, of the plan tools and of `load_skill` are never
stored (they are the harness talking to the model, or the answer to a query).

Queries run sandboxed: in a separate Python process, with an empty environment, in an empty
temporary folder, under a memory limit (where the platform has one), killed after a time limit
(`QUERY_TIMEOUT`), with the output cut at `MAX_OUTPUT_CHARS`. jq's `import` and `include`
(which read files) are refused. Every mistake the model can fix (an unknown reference, an
expression that does not compile or fails, a JSON expression over plain text, a runaway
expression, an output too long) comes back as an error result that says what to do.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import inspect
import json
import logging
import re
import sys
import tempfile
import textwrap
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from plangate.harness._errors import ConfigError
from plangate.harness._messages import ToolCall
from plangate.harness._tools import Tool, ToolRetry, tool
from plangate.harness._turn import FINISH, Turn
from plangate.harness.features._feature import Feature, SessionView
from plangate.harness.features._skills import LOAD_SKILL

logger = logging.getLogger("plangate.references")

QUERY_TOOL = "query_result"
"""The tool that queries a stored result."""
QUERY_TIMEOUT = 2.0
"""Seconds a query may run (process start included) before it is killed."""
MAX_OUTPUT_CHARS = 4_000
"""Longest query output the model gets; longer output is cut and says so."""
MEMORY_LIMIT = 1 << 30
"""Bytes of address space a query process may use (where the platform can limit it)."""
PREVIEW_CHARS = 200
"""How much of a stored result the reference shows."""
MAX_SHAPE_KEYS = 20
"""Most keys a shape lists (of the top-level object, or of the items of a top-level list)."""
NESTED_SHAPE_KEYS = 8
"""Most item keys a shape lists for a list inside the top-level object."""
MAX_SHAPE_CHARS = 1_000
"""Longest shape description."""
SHAPE_SAMPLE = 50
"""Items of a list whose keys the shape collects."""

_MODULES = re.compile(r"(?<![\w$.])(?:import|include|modulemeta)\b")
_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"')


class ResultReferences(Feature):
    """Stores long tool results, sends references instead, and offers `query_result`."""

    name = "result_references"

    def __init__(
        self,
        session: SessionView,
        *,
        time_limit: float = QUERY_TIMEOUT,
        max_output_chars: int = MAX_OUTPUT_CHARS,
    ) -> None:
        super().__init__(session)
        if importlib.util.find_spec("jq") is None:
            raise ConfigError(
                f"variant {session.variant.name!r} sets 'context.result_reference_chars', "
                "which needs the `jq` package to query stored results; pip install jq"
            )
        self.threshold = session.variant.context.result_reference_chars
        self.time_limit = time_limit
        self.max_output_chars = max_output_chars
        self.results: dict[str, dict[str, Any]] = {}
        """Stored results by reference id: `tool`, `call_id`, `content`, `is_json`, `shape`."""
        self._exempt = {QUERY_TOOL, FINISH, LOAD_SKILL} | session.plan_tool_names
        self._query = tool(description=_QUERY_DESCRIPTION)(self._query_function())

    def tools(self, turn: Turn) -> Sequence[Tool]:
        """`query_result`, once a result is stored."""
        return (self._query,) if self.results else ()

    def on_result(self, turn: Turn, call: ToolCall, content: str) -> str:
        """A reference in place of a result longer than the threshold."""
        if len(content) <= self.threshold or call.name in self._exempt:
            return content
        ref = f"ref-{_next_number(self.results)}"
        value, is_json = _parse(content)
        shape = describe_shape(value) if is_json else describe_text(content)
        self.results[ref] = {
            "tool": call.name,
            "call_id": call.id,
            "content": content,
            "is_json": is_json,
            "shape": shape,
        }
        example = _example(value) if is_json else 'split("\\n")[0:20]'
        return reference_text(ref, content, shape, example)

    async def query(self, ref: str, expression: str) -> str:
        """Run a jq expression over a stored result; what `query_result` returns.

        Raises:
            ToolRetry: Unknown reference, refused or failing expression, time limit.
        """
        stored = self.results.get(ref.strip())
        if stored is None:
            raise ToolRetry(self._unknown(ref))
        source = _STRINGS.sub('""', expression)
        if _MODULES.search(source):
            raise ToolRetry(
                "jq modules (import, include, modulemeta) are not available here. Write the "
                "whole expression inline, with `def name: body;` for helpers."
            )
        answer = await run_jq(
            expression,
            stored["content"],
            is_json=stored["is_json"],
            time_limit=self.time_limit,
            max_chars=self.max_output_chars,
        )
        if "error" in answer:
            raise ToolRetry(_error_advice(ref, stored, expression, answer))
        return _render_outputs(answer, self.max_output_chars)

    def state(self) -> dict[str, Any]:
        """The stored results."""
        return {"results": self.results}

    def restore(self, state: dict[str, Any]) -> None:
        """Load the stored results."""
        self.results = dict(state.get("results", {}))

    def _unknown(self, ref: str) -> str:
        if not self.results:
            return f"Unknown reference {ref!r}: no tool result is stored in this session."
        listed = ", ".join(
            f"{key} ({item['tool']}, {len(item['content']):,} characters)"
            for key, item in list(self.results.items())[-10:]
        )
        return f"Unknown reference {ref!r}. Stored results: {listed}. Query one of these ids."

    def _query_function(self) -> Callable[[str, str], Awaitable[str]]:
        async def query_result(ref: str, expression: str) -> str:
            """Query a stored tool result.

            Args:
                ref: The reference id of the stored result, e.g. "ref-1".
                expression: A jq expression, e.g. ".items | length" or
                    "[.items[] | select(.price > 10) | {id, name}]".
            """
            return await self.query(ref, expression)

        return query_result


_QUERY_DESCRIPTION = (
    "Query a long tool result that was stored by reference (ref-1, ref-2, …) with a jq "
    "expression, instead of reading it whole. Select only what you need: `keys`, `length`, "
    '`.items[0:5]`, `.items[] | select(.status == "open") | .id`, `[.items[].name]`. A text '
    'result is one JSON string: use `split("\\n")[0:20]` or `[splits("\\n") | '
    'select(test("error"))]`.'
)


def reference_text(ref: str, content: str, shape: str, example: str) -> str:
    """What the model sees in place of a stored result."""
    preview = content[:PREVIEW_CHARS].replace("\n", "\\n")
    more = "…" if len(content) > PREVIEW_CHARS else ""
    return (
        f"[Stored as {ref}: the result has {len(content):,} characters, too long to show.]\n"
        f"Shape: {shape}\n"
        f"Starts with: {preview}{more}\n"
        f'Query it with {QUERY_TOOL}(ref="{ref}", expression=<a jq expression>), '
        f"e.g. `{example}`; select only what you need."
    )


def describe_shape(value: Any) -> str:
    """The shape of a JSON value in one line: its type, keys, lengths and item keys."""
    if not isinstance(value, dict):
        return _cut(f"JSON {_kind(value, MAX_SHAPE_KEYS)}")
    keys = list(value)
    listed = ", ".join(
        f"{json.dumps(k, ensure_ascii=False)} ({_kind(value[k], NESTED_SHAPE_KEYS)})"
        for k in keys[:MAX_SHAPE_KEYS]
    )
    more = f", and {len(keys) - MAX_SHAPE_KEYS} more" if len(keys) > MAX_SHAPE_KEYS else ""
    return _cut(f"JSON object with {len(keys)} key{_s(len(keys))}: {listed}{more}")


def describe_text(content: str) -> str:
    """The shape of a plain text result: its length and line count."""
    lines = content.count("\n") + (not content.endswith("\n"))
    return f"plain text (not JSON), {len(content):,} characters in {lines:,} line{_s(lines)}"


def _kind(value: Any, max_keys: int) -> str:
    if isinstance(value, dict):
        return f"object with {len(value)} key{_s(len(value))}"
    if isinstance(value, list):
        return f"array of {len(value):,} {_items(value, max_keys)}"
    if isinstance(value, str):
        return f"string of {len(value):,} characters"
    if isinstance(value, bool):
        return "boolean"
    if value is None:
        return "null"
    return "number"


def _items(items: list[Any], max_keys: int) -> str:
    sample = items[:SHAPE_SAMPLE]
    if not sample:
        return "items"
    kinds = {_json_type(item) for item in sample}
    if kinds != {"object"}:
        return " or ".join(sorted(f"{k}s" for k in kinds))
    keys: dict[str, None] = {}
    for item in sample:
        keys.update(dict.fromkeys(item))
    names = list(keys)
    listed = ", ".join(names[:max_keys]) + (", …" if len(names) > max_keys else "")
    return f"objects with keys: {listed}" if names else "empty objects"


def _json_type(value: Any) -> str:
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "array"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "boolean"
    return "null" if value is None else "number"


def _example(value: Any) -> str:
    if isinstance(value, list):
        return ".[0:5]" if value else "length"
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(item, list) and re.fullmatch(r"[A-Za-z_]\w*", key):
                return f".{key}[0:5]"
        return "keys"
    return "."


def _cut(shape: str) -> str:
    return shape if len(shape) <= MAX_SHAPE_CHARS else shape[: MAX_SHAPE_CHARS - 1] + "…"


def _s(count: int) -> str:
    return "" if count == 1 else "s"


def _parse(content: str) -> tuple[Any, bool]:
    """The JSON value of a result, and whether it is JSON at all (a bare string is not)."""
    stripped = content.lstrip()
    if not stripped or stripped[0] not in "[{":
        return None, False
    try:
        return json.loads(content), True
    except (json.JSONDecodeError, RecursionError):
        return None, False


def _next_number(results: dict[str, Any]) -> int:
    numbers = [int(key[4:]) for key in results if key.startswith("ref-") and key[4:].isdecimal()]
    return max(numbers, default=0) + 1


# -- the sandboxed query process -------------------------------------------------------------


def _work() -> None:  # pragma: no cover - runs in the query process
    """Run one jq query: a JSON header line, then the input, on stdin; JSON on stdout."""
    import json
    import sys

    header = json.loads(sys.stdin.readline())
    try:
        import resource

        limit = header["memory"]
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    except (ImportError, ValueError, OSError):
        pass
    import jq  # type: ignore[import-not-found]

    payload = sys.stdin.read()
    try:
        program = jq.compile(header["expression"])
    except ValueError as exc:
        json.dump({"error": "compile", "message": str(exc)}, sys.stdout)
        return
    outputs: list[str] = []
    size = 0
    truncated = False
    try:
        found = program.input_text(payload) if header["is_json"] else program.input_value(payload)
        for value in found:
            text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
            outputs.append(text[: header["max_chars"] - size + 1])
            size += len(text) + 1
            if size > header["max_chars"]:
                truncated = True
                break
    except ValueError as exc:
        json.dump({"error": "runtime", "message": str(exc), "outputs": outputs}, sys.stdout)
        return
    json.dump({"outputs": outputs, "truncated": truncated}, sys.stdout)


_WORKER = textwrap.dedent(inspect.getsource(_work)) + "\n_work()\n"


async def run_jq(
    expression: str, content: str, *, is_json: bool, time_limit: float, max_chars: int
) -> dict[str, Any]:
    """Run `expression` over `content` in a sandboxed process.

    Returns:
        `{"outputs": [...], "truncated": bool}` (each output as compact JSON), or
        `{"error": kind, "message": text}` with kind `compile`, `runtime`, `timeout` or
        `crash`.
    """
    header = {
        "expression": expression,
        "is_json": is_json,
        "max_chars": max_chars,
        "memory": MEMORY_LIMIT,
    }
    data = (json.dumps(header) + "\n" + content).encode("utf-8", "replace")
    with tempfile.TemporaryDirectory(prefix="plangate-jq-") as folder:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-I",
            "-c",
            _WORKER,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,  # unread: `debug` could fill any buffer
            cwd=folder,
            env={},
        )
        try:
            out, _ = await asyncio.wait_for(process.communicate(data), time_limit)
        except TimeoutError:
            return {"error": "timeout", "message": f"stopped after {time_limit:g} s"}
        finally:
            if process.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
                await process.wait()
    try:
        answer: dict[str, Any] = json.loads(out)
    except (json.JSONDecodeError, RecursionError):
        logger.warning("jq query process ended with code %s", process.returncode)
        return {"error": "crash", "message": f"exit code {process.returncode}"}
    return answer


def _render_outputs(answer: dict[str, Any], max_chars: int) -> str:
    outputs: list[str] = answer["outputs"]
    if not outputs:
        return "(no output: the expression selected nothing)"
    text = "\n".join(outputs)
    if not answer["truncated"] and len(text) <= max_chars:
        return text
    return (
        f"{text[:max_chars]}\n…[output cut at {max_chars:,} characters: select less, e.g. "
        "fewer fields, `.[0:10]`, `length`, or `limit(10; …)`]"
    )


def _error_advice(ref: str, stored: dict[str, Any], expression: str, answer: dict[str, Any]) -> str:
    kind, message = answer["error"], _one_line(answer["message"])
    if kind == "timeout":
        return (
            f"The expression {expression!r} ran too long and was {message}. Narrow it: avoid "
            "unbounded `range`, `repeat`, `recurse` or recursive `def`s; take fewer items with "
            "`.[0:10]` or `limit(10; …)`."
        )
    if kind == "crash":
        return (
            f"The expression {expression!r} failed: the query process ended ({message}), "
            "probably out of memory. Select less at once, e.g. `.[0:10]` or `length`."
        )
    if kind == "compile":
        return (
            f"The jq expression {expression!r} does not compile: {message}. Fix the syntax and "
            "query again, e.g. `.key`, `.items[0:5]`, `[.items[] | .name]`."
        )
    if not stored["is_json"]:
        return (
            f"The expression {expression!r} failed: {message}. {ref} is plain text, not JSON: "
            'in jq it is one string. Use string filters, e.g. `split("\\n")[0:20]`, '
            '`[splits("\\n") | select(test("error"))]`, `.[0:500]`, `length`.'
        )
    return (
        f"The expression {expression!r} failed: {message}. {ref} is a {stored['shape']}. "
        "Fix the expression for that shape (`keys`, `type` and `length` help) and query again."
    )


def _one_line(message: str) -> str:
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    text = " ".join(line for line in lines if not line.startswith("jq: 1 compile error"))
    return text.removeprefix("jq: error: ")[:300]
