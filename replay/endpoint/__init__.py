"""A local OpenAI-compatible model endpoint, so that an agent in any framework can be recorded.

An agent that speaks the chat-completions API or the Responses API (the OpenAI Agents SDK on
its default model or on chat completions, pydantic-ai, a plain `openai` client script, any
language) needs no code change: point its `OPENAI_BASE_URL` at a
route of a `ModelEndpoint`, and a plangate `Model` answers it (a simulated model, a cassette, a
recording model in front of a real endpoint), while the route keeps every exchange. Point its
`OTEL_EXPORTER_OTLP_ENDPOINT` at the route's `otlp_endpoint`, and the route keeps the spans it
exports too (OTLP/HTTP, protobuf or JSON), as records `rows_from_spans` makes trace rows of.

- `_server`: `ModelEndpoint`, the HTTP server on 127.0.0.1 and the private event loop every
  model call runs on;
- `_route`: `Route` (one model at its own base URL, its exchanges and spans) and `ObservedCall`
  (one exchange);
- `_exchange`: reading a chat-completions request and writing its answer (JSON or server-sent
  events);
- `_responses`: the same for the Responses API (`POST /r/{key}/v1/responses`), read into the
  same messages and tools, so that an exchange records alike through either API;
- `_otlp`: the OTLP/HTTP trace receiver (`POST /r/{key}/v1/traces`);
- `_tools`: the tool routes (`POST /r/{key}/tools/NAME`), where an agent's wrapped tools are
  recorded or answered from the cassette (`RecordingTools`, `CassetteTools`, `LiveTools`);
- `_mcp`: `McpGateway`, an MCP server in front of an agent's own MCP server (or plangate's demo
  tools) whose calls are recorded or answered from the cassette the same way.

Served: `/chat/completions`, `/responses` and `/models`. The Responses API is served
statelessly (the whole conversation in every request; `previous_response_id`, `conversation`
and stored prompts are refused with a 400), with messages, function calls and function tools
only. Traces over OTLP, over HTTP only (not gRPC).
"""

from plangate.replay.endpoint._mcp import LIST as MCP_LIST
from plangate.replay.endpoint._mcp import (
    McpError,
    McpGateway,
    catalog_from,
    check_source,
    mcp_urls,
)
from plangate.replay.endpoint._route import ObservedCall, Route
from plangate.replay.endpoint._server import EndpointError, ModelEndpoint
from plangate.replay.endpoint._tools import (
    CassetteTools,
    LiveTools,
    RecordingTools,
    ToolAnswer,
    ToolProvider,
)

__all__ = [
    "MCP_LIST",
    "CassetteTools",
    "EndpointError",
    "LiveTools",
    "McpError",
    "McpGateway",
    "ModelEndpoint",
    "ObservedCall",
    "RecordingTools",
    "Route",
    "ToolAnswer",
    "ToolProvider",
    "catalog_from",
    "check_source",
    "mcp_urls",
]
