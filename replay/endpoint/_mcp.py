"""Tools over the Model Context Protocol for an agent under test: recorded, or from the cassette.

An agent that gets its tools from an MCP server is pointed at plangate's gateway instead: an MCP
server (the official `mcp` SDK's low-level `Server`, streamable HTTP, stateless, on 127.0.0.1,
run by uvicorn in a thread of its own) that stands in front of the tools' source:

- `plangate:DOMAIN`: the demo domain's tools, run here, one workspace per session;
- `stdio:COMMAND ARGS`: the agent's own MCP server, started here and spoken to over stdio;
- `http://...` (or `https://`): the agent's own MCP server over streamable HTTP.

Each call is decided by the route's `ToolProvider`, as a `hermetic` tool's is (`_tools`):
`record` runs it at the source and records its result (or error) in the golden's tool
cassette, `live` runs it and records nothing, `ok`/`error` answer the recording and never reach
the source (an unrecorded call gets the "Not recorded" text, as an error result: a client
checks a plain result against the tool's output schema). A source's tool list is recorded
too, under `mcp:tools/list`, and a replay serves it from the recording (`catalog`), so a replay
works with the agent's own server stopped. A result is kept as its text (the text parts joined
by newlines); a result with other parts is kept whole, as JSON under `mcp_result`.
"""

from __future__ import annotations

import asyncio
import json
import shlex
import socket
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from plangate.harness import PlangateError, Tool, get_domain, render_result
from plangate.replay.endpoint._tools import ToolAnswer, ToolProvider

LIST = "mcp:tools/list"
"""The cassette name a source's tool list is recorded under (arguments: `{"server": NAME}`)."""
WHOLE = "mcp_result"
"""The key of a result kept whole (not only text) in its recorded JSON."""
_START_SECONDS = 10.0


class McpError(PlangateError):
    """An MCP source cannot be used: a bad spec, or the `mcp` extra is not installed."""


def check_source(source: str, where: str = "") -> str:
    """`source` if it names an MCP source plangate can serve; else an `McpError`."""
    kind, _, rest = source.partition(":")
    at = f"{where}: " if where else ""
    if kind == "plangate":
        get_domain(rest)  # an unknown domain names the choices
        return source
    if kind == "stdio" and shlex.split(rest):
        return source
    if kind in ("http", "https") and rest.startswith("//"):
        return source
    raise McpError(
        f"{at}MCP source {source!r}: give plangate:DOMAIN, stdio:COMMAND ARGS or an http:// URL"
    )


@dataclass(slots=True)
class McpGateway:
    """plangate's MCP server in front of one tool source, for one slot of the agent."""

    name: str
    """What the agent calls the server (the environment variable that holds its URL)."""
    source: str
    """`plangate:DOMAIN`, `stdio:COMMAND ARGS` or an `http://` URL."""
    tools: ToolProvider
    """Decides each call: record, live, or the recorded answer (the slot's current turn's)."""
    session: str = ""
    """The current turn's session (a `plangate:` source keeps a workspace per session)."""
    catalog: Sequence[dict[str, Any]] | None = None
    """The recorded tool list to serve (replay); None: ask the source."""
    url: str = field(default="", init=False)
    _server: Any = field(default=None, init=False, repr=False)
    _thread: threading.Thread | None = field(default=None, init=False, repr=False)
    _workspaces: dict[str, dict[str, Tool]] = field(default_factory=dict, init=False, repr=False)
    _upstream: _Upstream | None = field(default=None, init=False, repr=False)

    def start(self) -> McpGateway:
        """Serve on a free port of 127.0.0.1 until `close()`.

        Raises:
            McpError: The `mcp` extra is not installed, or the server did not start.
        """
        check_source(self.source)
        try:
            import uvicorn
            from mcp.server.lowlevel import Server
        except ImportError as exc:
            raise McpError(f"tools over MCP need plangate's mcp extra: {exc}") from exc
        if not self.source.startswith("plangate:"):
            self._upstream = _Upstream(self.source)
        server = Server("plangate", on_list_tools=self._list_tools, on_call_tool=self._call_tool)
        app = server.streamable_http_app(
            streamable_http_path="/mcp", stateless_http=True, json_response=True
        )
        listening = socket.socket()
        listening.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{listening.getsockname()[1]}/mcp"
        config = uvicorn.Config(app, log_level="warning", lifespan="on")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [listening]}, daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + _START_SECONDS
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise McpError(f"the MCP gateway for {self.name} did not start")
            time.sleep(0.005)
        return self

    def close(self) -> None:
        """Stop serving, and stop the agent's own server if it was started here."""
        if self._server is None or self._thread is None:
            return
        if self._upstream is not None:
            self._upstream.stop()
        self._server.should_exit = True
        self._thread.join(timeout=5)
        self._server = self._thread = None

    # -- the MCP handlers (on the gateway's own event loop) ---------------------------------

    async def _list_tools(self, ctx: Any, params: Any) -> Any:
        import mcp_types as types

        if self.catalog is not None:
            listed = list(self.catalog)
        elif self._upstream is None:
            listed = [_definition(t) for t in self._workspace().values()]
        else:
            listed = await self._listed_upstream()
        return types.ListToolsResult(tools=[types.Tool.model_validate(t) for t in listed])

    async def _call_tool(self, ctx: Any, params: Any) -> Any:
        name, arguments = params.name, dict(params.arguments or {})
        answer = self.tools.call(name, arguments)
        if answer.status in ("ok", "error"):
            return _replayed(answer)
        result = await self._run(name, arguments)
        if answer.status == "record":
            failed = bool(result.is_error)
            text = _kept(result)
            self.tools.result(name, arguments, "error" if failed else "ok", text, "")
        return result

    async def _listed_upstream(self) -> list[dict[str, Any]]:
        assert self._upstream is not None
        answer = self.tools.call(LIST, {"server": self.name})
        client = await self._upstream.client()
        listed = [
            t.model_dump(mode="json", by_alias=True, exclude_none=True)
            for t in (await client.list_tools()).tools
        ]
        if answer.status == "record":
            text = json.dumps(listed, ensure_ascii=False, sort_keys=True)
            self.tools.result(LIST, {"server": self.name}, "ok", text, "")
        return listed

    async def _run(self, name: str, arguments: dict[str, Any]) -> Any:
        """Run the call at the source."""
        if self._upstream is not None:
            client = await self._upstream.client()
            return await client.call_tool(name, arguments)
        tool = self._workspace().get(name)
        if tool is None:
            return _result(f"unknown tool {name!r}", error=True)
        try:
            value = tool.function(**arguments)
            if tool.is_async:
                value = await value
        except Exception as exc:  # the tool's own failure: the model is told, as MCP does
            return _result(f"{type(exc).__name__}: {exc}", error=True)
        return _result(render_result(value))

    def _workspace(self) -> dict[str, Tool]:
        if self.session not in self._workspaces:
            domain = get_domain(self.source.partition(":")[2])
            self._workspaces[self.session] = {t.name: t for t in domain.make_tools()}
        return self._workspaces[self.session]


class _Upstream:
    """The agent's own MCP server, connected once on the gateway's loop and kept open."""

    def __init__(self, source: str) -> None:
        self.source = source
        self._ready: asyncio.Future[Any] | None = None
        self._stop: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closed = threading.Event()

    async def client(self) -> Any:
        """The connected client (connecting on first use)."""
        if self._ready is None:
            self._loop = asyncio.get_running_loop()
            self._ready, self._stop = self._loop.create_future(), asyncio.Event()
            self._loop.create_task(self._hold(self._ready, self._stop))
        return await asyncio.shield(self._ready)

    async def _hold(self, ready: asyncio.Future[Any], stop: asyncio.Event) -> None:
        from mcp import Client, StdioServerParameters

        kind, _, rest = self.source.partition(":")
        server: Any = self.source
        if kind == "stdio":
            command, *args = shlex.split(rest)
            server = StdioServerParameters(command=command, args=args)
        try:
            async with Client(server) as client:
                ready.set_result(client)
                await stop.wait()
        except Exception as exc:
            if not ready.done():
                ready.set_exception(McpError(f"MCP server {self.source!r}: {exc}"))
        finally:
            self._closed.set()

    def stop(self) -> None:
        """Close the connection (and stop a stdio server), from any thread."""
        if self._loop is not None and self._stop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._stop.set)
            self._closed.wait(timeout=_START_SECONDS)  # closed before the gateway's loop stops


def catalog_from(records: Sequence[Any], server: str) -> list[dict[str, Any]] | None:
    """The tool list recorded for `server` among the `LIST` records (the last); None if none."""
    listed = [r for r in records if _server_of(r.tool_args) == server]
    return json.loads(listed[-1].result) if listed else None


def _server_of(arguments: str) -> object:
    try:
        parsed = json.loads(arguments)
    except json.JSONDecodeError:
        return None  # another tool's arguments, not a listing's
    return parsed.get("server") if isinstance(parsed, dict) else None


def mcp_urls(gateways: Sequence[McpGateway]) -> Mapping[str, str]:
    """Each gateway's URL, by the name the agent knows it by."""
    return {g.name: g.url for g in gateways}


def _definition(tool: Tool) -> dict[str, Any]:
    return {"name": tool.name, "description": tool.description, "inputSchema": tool.parameters}


def _result(text: str, *, error: bool = False) -> Any:
    import mcp_types as types

    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=error)


def _kept(result: Any) -> str:
    """A result as the text the cassette keeps: its text parts, or the whole result as JSON."""
    parts = list(result.content or ())
    if all(getattr(p, "type", None) == "text" for p in parts) and not result.structured_content:
        return "\n".join(p.text for p in parts)
    whole = result.model_dump(mode="json", by_alias=True, exclude_none=True)
    return json.dumps({WHOLE: whole}, ensure_ascii=False)


def _replayed(answer: ToolAnswer) -> Any:
    import mcp_types as types

    try:
        kept = json.loads(answer.result)
    except ValueError:
        kept = None
    if isinstance(kept, dict) and set(kept) == {WHOLE}:
        return types.CallToolResult.model_validate(kept[WHOLE])
    return _result(answer.result, error=answer.status == "error" or not answer.recorded)
