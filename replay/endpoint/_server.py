"""An OpenAI-compatible endpoint on 127.0.0.1 in front of plangate models.

One `ThreadingHTTPServer` (HTTP/1.1 keep-alive, a daemon thread per connection) answers every
route; every `Model.request` is awaited on one private event loop in its own daemon thread.
So an agent on any event loop, a blocking client on the caller's own thread, or another process
can all call in without a deadlock: the caller's loop never runs the model. The same routes
receive the agent's spans over OTLP/HTTP (`_otlp`), on the connection's own thread.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import itertools
import logging
import secrets
import socket
import threading
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

from plangate.harness import (
    Message,
    Model,
    ModelError,
    ModelResponse,
    PlangateError,
    ToolDefinition,
)
from plangate.harness.models import WireError
from plangate.replay.endpoint._exchange import (
    ChatRequest,
    Reply,
    completion_reply,
    error_reply,
    models_reply,
    read_request,
)
from plangate.replay.endpoint._otlp import TRACES_PATH, traces_reply
from plangate.replay.endpoint._responses import (
    RESPONSES_PATH,
    ResponsesRequest,
    read_responses_request,
    responses_reply,
)
from plangate.replay.endpoint._route import ObservedCall, Route
from plangate.replay.endpoint._tools import TOOLS_PATH, ToolProvider, tools_reply

_log = logging.getLogger("plangate.endpoint")

CHAT_PATH = "v1/chat/completions"
"""A route's chat-completions path, after `/r/{key}/`."""
MODELS_PATH = "v1/models"
"""A route's model list, after `/r/{key}/`."""
_READERS: dict[str, Callable[[bytes], ChatRequest | ResponsesRequest]] = {
    CHAT_PATH: read_request,
    RESPONSES_PATH: read_responses_request,
}
"""The model APIs a route serves (`POST`), by path: each reads its request."""
_POLL_SECONDS = 0.05
"""How often the server checks for `close()`; the longest `close()` waits for it."""
_MAX_BODY = 64 * 1024 * 1024


class EndpointError(PlangateError):
    """The endpoint was used out of order (a route opened before `start()`, say)."""


@dataclass(frozen=True, slots=True)
class _Open:
    """An open route with the model behind it."""

    route: Route
    model: Model
    model_name: str
    tools: ToolProvider | None = None


class ModelEndpoint:
    """Serves plangate models over the OpenAI chat-completions and Responses APIs on a local port.

    Open one route per model (`open_route`) and point an agent's `OPENAI_BASE_URL` at the
    route's `base_url`. A route answers `POST /r/{key}/v1/chat/completions` and
    `POST /r/{key}/v1/responses` (each streamed or not) and `GET /r/{key}/v1/models`, and keeps
    every exchange in its `calls`: a Responses request is read into the same messages and tools
    as its chat-completions twin, so both record alike. The Responses API is served statelessly:
    a request carries the whole conversation (`previous_response_id` is a 400). Point the agent's
    `OTEL_EXPORTER_OTLP_ENDPOINT` at the route's `otlp_endpoint` too, and its OTLP/HTTP exports
    (`POST /r/{key}/v1/traces`) land in the route's `spans`.

    Use it as a context manager, or call `start()` and later `close()`:

        with ModelEndpoint() as endpoint:
            route = endpoint.open_route(model)
            ...  # run the agent with OPENAI_BASE_URL=route.base_url
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        """Prepare an endpoint on `host`; port 0 takes a free port when it starts."""
        self._address = (host, port)
        self._routes: dict[str, _Open] = {}
        self._ids = itertools.count(1)
        self._server: _Server | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._threads: list[threading.Thread] = []
        self._closed = False

    def start(self) -> ModelEndpoint:
        """Bind the port and start serving; returns the endpoint (a no-op when running).

        Raises:
            EndpointError: The endpoint was closed, or the port cannot be bound.
        """
        if self._closed:
            raise EndpointError("the model endpoint is closed; start a new one")
        if self._server is not None:
            return self
        try:
            server = _Server(self._address, _Handler)
        except OSError as err:
            host, port = self._address
            raise EndpointError(
                f"the model endpoint cannot listen on {host}:{port}: {err}"
            ) from err
        server.endpoint = self
        self._loop = asyncio.new_event_loop()
        self._threads = [
            threading.Thread(target=_run_loop, args=(self._loop,), name="plangate-endpoint-models"),
            threading.Thread(
                target=server.serve_forever, args=(_POLL_SECONDS,), name="plangate-endpoint-http"
            ),
        ]
        for thread in self._threads:
            thread.daemon = True
            thread.start()
        self._server = server
        return self

    def close(self) -> None:
        """Stop serving: the port, open connections, calls in flight, the loop; idempotent."""
        server, loop = self._server, self._loop
        self._closed = True
        if server is None or loop is None:
            return
        self._server = self._loop = None
        server.shutdown()
        server.server_close()
        with contextlib.suppress(RuntimeError, TimeoutError):
            asyncio.run_coroutine_threadsafe(_cancel_all(), loop).result(timeout=5)
        server.drop_connections()
        loop.call_soon_threadsafe(loop.stop)
        for thread in self._threads:
            thread.join(timeout=5)
        if not loop.is_running():
            loop.close()
        self._routes.clear()

    def __enter__(self) -> ModelEndpoint:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def url(self) -> str:
        """`http://127.0.0.1:PORT`, the endpoint's root.

        Raises:
            EndpointError: The endpoint is not running.
        """
        host, port = self._running().server_address[:2]
        return f"http://{host!s}:{port}"

    def open_route(
        self, model: Model, *, model_name: str | None = None, tools: ToolProvider | None = None
    ) -> Route:
        """Serve `model` at a new route.

        Args:
            model: The model that answers the route's requests.
            model_name: The name `GET /models` lists and an answer names when the model's
                response names none (default: `model.name`).
            tools: What answers the route's tool calls (`POST /r/{key}/tools/NAME`, see
                `_tools`); None: the route serves no tools.

        Raises:
            EndpointError: The endpoint is not running.
        """
        key = secrets.token_urlsafe(12)
        route = Route(key=key, base_url=f"{self.url}/r/{key}/v1")
        name = model.name if model_name is None else model_name
        self._routes[key] = _Open(route, model, name, tools)
        return route

    def close_route(self, route: Route) -> None:
        """Stop serving `route`: its URL answers 404 from now on (a no-op when already closed)."""
        self._routes.pop(route.key, None)

    def _running(self) -> _Server:
        if self._server is None:
            state = "closed" if self._closed else "not started: call start() first"
            raise EndpointError(f"the model endpoint is {state}")
        return self._server

    def _get(self, path: str) -> Reply:
        found = self._find(path, (MODELS_PATH,), "GET")
        return found if isinstance(found, Reply) else models_reply(found.model_name)

    def _post(self, path: str, body: bytes, *, content_type: str = "", encoding: str = "") -> Reply:
        r, key, rest = _parts(path)
        if rest == TRACES_PATH:
            found_traces = self._routes.get(key) if r == "r" else None
            route = None if found_traces is None else found_traces.route
            return traces_reply(route, key, body, content_type=content_type, encoding=encoding)
        open_ = self._routes.get(key) if r == "r" else None
        if open_ is not None and rest.startswith(f"{TOOLS_PATH}/"):
            return tools_reply(open_.tools, key, rest, body)
        found = self._find(path, _READERS, "POST")
        if isinstance(found, Reply):
            return found
        try:
            request = _READERS[rest](body)
        except WireError as bad:
            return error_reply(400, str(bad), "invalid_request_error")
        return self._exchange(found, request)

    def _find(self, path: str, expected: Collection[str], method: str) -> _Open | Reply:
        """The open route `path` names, or the 404 that says what is wrong."""
        r, key, rest = _parts(path)
        found = self._routes.get(key) if r == "r" else None
        if found is None:
            return error_reply(
                404,
                f"no route {key!r} on this endpoint: it was never opened or is closed "
                f"(paths are /r/KEY/{CHAT_PATH}, /r/KEY/{RESPONSES_PATH} and /r/KEY/{MODELS_PATH})",
                "invalid_request_error",
            )
        if rest not in expected:
            return error_reply(
                404,
                f"{method} /{rest} is not served on route {key!r}: use POST "
                f"/r/{key}/{CHAT_PATH}, POST /r/{key}/{RESPONSES_PATH}, GET /r/{key}/{MODELS_PATH} "
                f"or POST /r/{key}/{TRACES_PATH}",
                "invalid_request_error",
            )
        return found

    def _exchange(self, found: _Open, request: ChatRequest | ResponsesRequest) -> Reply:
        """Await the model on the private loop, record the exchange, and answer."""
        loop = self._loop
        if loop is None:
            return error_reply(503, "the model endpoint is closing", "server_error")
        start = time.time_ns()
        try:
            response = asyncio.run_coroutine_threadsafe(
                _ask(found.model, request.messages, request.tools), loop
            ).result()
        except Exception as err:  # the agent gets a 500 whatever the model raised
            error = _describe(err)
            if not isinstance(err, ModelError | concurrent.futures.CancelledError):
                name, key = found.model_name, found.route.key
                _log.error("model %r failed on route %r", name, key, exc_info=err)
            found.route._observe(_observed(request, None, error, start))
            return error_reply(500, error, "server_error")
        found.route._observe(_observed(request, response, None, start))
        model, number = response.model_name or found.model_name, next(self._ids)
        created = start // 1_000_000_000
        if isinstance(request, ResponsesRequest):
            response_id = f"resp_plangate_{number}"
            return responses_reply(
                request, response, model=model, response_id=response_id, created=created
            )
        completion_id = f"chatcmpl-plangate-{number}"
        return completion_reply(
            request, response, model=model, completion_id=completion_id, created=created
        )


def _parts(path: str) -> tuple[str, str, str]:
    """`/r/KEY/REST?QUERY` as ("r", KEY, REST without a trailing slash); "" for a part missing."""
    _, r, key, rest = (path.split("?", 1)[0].split("/", 3) + ["", "", ""])[:4]
    return r, key, rest.rstrip("/")


def _describe(err: Exception) -> str:
    """What the agent and the route are told: a model error's message, else the exception."""
    if isinstance(err, ModelError):
        return str(err)
    if isinstance(err, concurrent.futures.CancelledError):
        return "the model call was cancelled: the endpoint closed"
    return f"{type(err).__name__}: {err}"


def _observed(
    request: ChatRequest | ResponsesRequest,
    response: ModelResponse | None,
    error: str | None,
    start: int,
) -> ObservedCall:
    return ObservedCall(
        messages=request.messages,
        tools=request.tools,
        response=response,
        error=error,
        stream=request.stream,
        start_ns=start,
        end_ns=time.time_ns(),
        model_name=request.model,
    )


async def _ask(
    model: Model, messages: Sequence[Message], tools: Sequence[ToolDefinition]
) -> ModelResponse:
    return await model.request(messages, tools)


def _run_loop(loop: asyncio.AbstractEventLoop) -> None:
    asyncio.set_event_loop(loop)
    loop.run_forever()


async def _cancel_all() -> None:
    """Cancel the model calls in flight (their agents get a 500) and wait for them to end."""
    tasks = asyncio.all_tasks() - {asyncio.current_task()}
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


class _Server(ThreadingHTTPServer):
    """The HTTP server: daemon threads, and the open connections, to drop them on close."""

    daemon_threads = True
    request_queue_size = 128  # the default 5 drops connections when many agents call at once
    endpoint: ModelEndpoint

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler]) -> None:
        super().__init__(address, handler)
        self._connections: set[socket.socket] = set()
        self._connections_lock = threading.Lock()

    def track(self, connection: socket.socket, *, open_: bool) -> None:
        """Note a connection opening or closing."""
        with self._connections_lock:
            if open_:
                self._connections.add(connection)
            else:
                self._connections.discard(connection)

    def drop_connections(self) -> None:
        """Shut every open connection, so that their threads end instead of waiting for input."""
        with self._connections_lock:
            connections = list(self._connections)
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A failure outside a handler's own guard (a connection reset mid-read, say): log it,
        # never print it, and keep serving.
        _log.debug("connection from %s failed", client_address, exc_info=True)


class _Handler(BaseHTTPRequestHandler):
    """One connection: reads each request, asks the endpoint, writes its reply."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server: _Server

    def setup(self) -> None:
        super().setup()
        self.server.track(self.connection, open_=True)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.track(self.connection, open_=False)

    def do_GET(self) -> None:
        self._respond(lambda: self.server.endpoint._get(self.path))

    def do_POST(self) -> None:
        self._respond(
            lambda: self.server.endpoint._post(
                self.path,
                self._body(),
                content_type=self.headers.get("Content-Type", ""),
                encoding=self.headers.get("Content-Encoding", ""),
            )
        )

    def log_message(self, format: str, *args: Any) -> None:
        # Every request is logged at debug level, never printed as the base class does.
        if _log.isEnabledFor(logging.DEBUG):
            _log.debug("%s " + format, self.address_string(), *args)

    def _respond(self, answer: Callable[[], Reply]) -> None:
        try:
            reply = answer()
        except _BadBody as bad:
            self.close_connection = True
            reply = error_reply(400, str(bad), "invalid_request_error")
        except Exception:  # never let one request take the server down
            _log.exception("the model endpoint failed on %s %s", self.command, self.path)
            reply = error_reply(
                500, "plangate's model endpoint failed; see its log", "server_error"
            )
        self._send(reply)

    def _send(self, reply: Reply) -> None:
        # One write for the head and the body: two would cost a second wake-up of the client.
        self.log_request(reply.status)
        head = (
            f"{self.protocol_version} {reply.status} {HTTPStatus(reply.status).phrase}\r\n"
            f"Content-Type: {reply.content_type}\r\nContent-Length: {len(reply.body)}\r\n"
            + ("Connection: close\r\n" if self.close_connection else "")
            + "\r\n"
        )
        try:
            self.wfile.write(head.encode("latin-1") + reply.body)
        except OSError:  # the client hung up; nothing to answer
            self.close_connection = True

    def _body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            return _read_chunked(self.rfile)
        try:
            length = int(self.headers.get("Content-Length", "0"))
        except ValueError:
            raise _BadBody("the Content-Length header is not a number") from None
        if not 0 <= length <= _MAX_BODY:
            raise _BadBody(f"a body of {length} bytes is out of bounds (at most {_MAX_BODY})")
        return self.rfile.read(length)


class _BadBody(Exception):
    """The request's body cannot be read; the connection is closed after the 400."""


def _read_chunked(stream: Any) -> bytes:
    """A body sent with `Transfer-Encoding: chunked`."""
    parts: list[bytes] = []
    total = 0
    while True:
        line = stream.readline(1024).split(b";", 1)[0].strip()
        try:
            size = int(line, 16)
        except ValueError:
            raise _BadBody(f"a malformed chunk size: {line[:40]!r}") from None
        total += size
        if size < 0 or total > _MAX_BODY:
            raise _BadBody(f"a chunked body over {_MAX_BODY} bytes")
        if size == 0:
            while stream.readline(1024).strip():  # trailers, up to the blank line
                pass
            return b"".join(parts)
        parts.append(stream.read(size))
        stream.readline(1024)  # the CRLF after the chunk
