"""A local chat-completions endpoint that plays back scripted replies over a real socket.

Tests point a real client (the `openai` package, through `OpenAIModel`) at `server.base_url`,
queue the replies the endpoint should give, and then assert on what the client sent:

    with ChatServer() as server:
        server.enqueue(error(429, headers={"Retry-After": "2"}), completion(content="hi"))
        ...  # call the client
        assert len(server.requests) == 2
        server.assert_complete()

The server listens on 127.0.0.1 on a port the OS picks, answers in a background thread, and
closes every connection after one response (HTTP/1.0), so closing it never waits on a client.
"""

from __future__ import annotations

import collections
import json
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

CHAT_PATH = "/v1/chat/completions"
"""The one path the server answers."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Reply:
    """One scripted answer: a status, headers and a body, sent after an optional delay."""

    status: int = 200
    """The HTTP status code."""
    body: bytes = b""
    """The response body, sent as is."""
    headers: Mapping[str, str] = field(default_factory=dict)
    """Extra response headers (`Retry-After`, say); `Content-Type` defaults to JSON."""
    delay: float = 0.0
    """Seconds to wait before answering; longer than the client's timeout makes it time out."""

    def after(self, seconds: float) -> Reply:
        """Return this reply, sent only after `seconds`."""
        return replace(self, delay=seconds)


@dataclass(frozen=True, slots=True, kw_only=True)
class RecordedRequest:
    """One request the server received."""

    method: str
    """The HTTP method."""
    path: str
    """The request path, with the query string."""
    headers: dict[str, str]
    """The request headers, names lower-cased."""
    body: Any
    """The body parsed as JSON, or the raw text when it is not JSON."""


def json_reply(
    payload: Any, *, status: int = 200, headers: Mapping[str, str] | None = None
) -> Reply:
    """A reply whose body is `payload` serialized as JSON (any payload: without `choices`, say)."""
    return Reply(status=status, body=json.dumps(payload).encode(), headers=dict(headers or {}))


def raw(body: str | bytes, *, status: int = 200, content_type: str = "application/json") -> Reply:
    """A reply with a body sent byte for byte: malformed JSON, HTML from a proxy, nothing."""
    data = body.encode() if isinstance(body, str) else body
    return Reply(status=status, body=data, headers={"Content-Type": content_type})


def tool_call(name: str, arguments: str, call_id: str | None = None) -> dict[str, Any]:
    """A wire-format tool call; `arguments` is sent as written, malformed or not."""
    return {
        "id": call_id or f"call_{name}",
        "type": "function",
        "function": {"name": name, "arguments": arguments},
    }


def completion(
    content: str | None = None,
    *,
    tool_calls: Sequence[dict[str, Any]] = (),
    model: str = "test-model",
    finish_reason: str | None = None,
    usage: tuple[int, int] | None = (10, 5),
) -> Reply:
    """A successful chat completion with one choice.

    Args:
        content: The assistant text; `None` sends `"content": null`.
        tool_calls: Wire-format tool calls (see `tool_call`).
        model: The model name the endpoint reports.
        finish_reason: Defaults to `tool_calls` when there are calls, else `stop`.
        usage: Prompt and completion tokens, or `None` to leave `usage` out.
    """
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = list(tool_calls)
    payload: dict[str, Any] = {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": finish_reason or ("tool_calls" if tool_calls else "stop"),
            }
        ],
    }
    if usage is not None:
        prompt, completion_tokens = usage
        payload["usage"] = {
            "prompt_tokens": prompt,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt + completion_tokens,
        }
    return json_reply(payload)


def error(
    status: int, message: str = "scripted error", *, headers: Mapping[str, str] | None = None
) -> Reply:
    """An error status with an OpenAI-style error body."""
    payload = {"error": {"message": message, "type": "scripted_error", "code": str(status)}}
    return json_reply(payload, status=status, headers=headers)


class ChatServer:
    """A chat-completions endpoint on 127.0.0.1 that answers from a queue of scripted replies.

    Use it as a context manager; it serves in a background thread until closed. A request that
    finds the queue empty gets HTTP 599 and is counted as unexpected (`assert_complete` fails).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._replies: collections.deque[Reply] = collections.deque()
        self._requests: list[RecordedRequest] = []
        self._unexpected = 0
        self._stopping = threading.Event()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        # Join handler threads on close, so no thread outlives the test.
        self._httpd.daemon_threads = False
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.005},  # how long `close` may wait for the serving loop
            name="chat-server",
            daemon=True,
        )

    @property
    def base_url(self) -> str:
        """The API base URL to give a client: `http://127.0.0.1:PORT/v1`."""
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    @property
    def requests(self) -> list[RecordedRequest]:
        """The requests received so far, in order (a copy)."""
        with self._lock:
            return list(self._requests)

    @property
    def bodies(self) -> list[Any]:
        """The parsed bodies of the requests received so far."""
        return [request.body for request in self.requests]

    def enqueue(self, *replies: Reply) -> None:
        """Add replies to the end of the queue, to be sent one per request."""
        with self._lock:
            self._replies.extend(replies)

    def assert_complete(self) -> None:
        """Fail if replies are left over or a request came after the queue ran out."""
        with self._lock:
            left, unexpected = len(self._replies), self._unexpected
        if left or unexpected:
            raise AssertionError(
                f"chat server: {left} scripted replies unused, {unexpected} unexpected requests"
            )

    def start(self) -> ChatServer:
        """Start serving in the background; returns the server."""
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop serving, cut pending delays short and wait for the handler threads."""
        self._stopping.set()
        if self._thread.is_alive():
            self._httpd.shutdown()
            self._thread.join()
        self._httpd.server_close()

    def __enter__(self) -> ChatServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def _record(self, request: RecordedRequest) -> Reply:
        with self._lock:
            self._requests.append(request)
            if self._replies:
                return self._replies.popleft()
            self._unexpected += 1
        return error(599, f"chat server: no scripted reply left for request {len(self.requests)}")

    def _wait(self, seconds: float) -> bool:
        """Wait `seconds` unless the server is closing; True when the reply should still go out."""
        return not self._stopping.wait(seconds) if seconds > 0 else True


def _handler_for(server: ChatServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            if self.path.split("?")[0] != CHAT_PATH:
                self._send(error(404, f"chat server: no route {self.path!r}"))
                return
            length = int(self.headers.get("Content-Length") or 0)
            text = self.rfile.read(length).decode()
            reply = server._record(
                RecordedRequest(
                    method="POST",
                    path=self.path,
                    headers={name.lower(): value for name, value in self.headers.items()},
                    body=_parse(text),
                )
            )
            if server._wait(reply.delay):
                self._send(reply)

        def _send(self, reply: Reply) -> None:
            headers = {"Content-Type": "application/json", **reply.headers}
            try:
                self.send_response(reply.status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(reply.body)))
                self.end_headers()
                self.wfile.write(reply.body)
            except (BrokenPipeError, ConnectionResetError):
                pass  # The client gave up first (a timeout test): nothing to answer.

        def log_message(self, format: str, *args: Any) -> None:
            pass  # Keep test output clean.

    return Handler


def _parse(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text
