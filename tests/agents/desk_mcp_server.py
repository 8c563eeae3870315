"""A team's own MCP server, for the MCP tool tests: not plangate's, two tools of a support desk.

Run it over stdio (`python -m tests.agents.desk_mcp_server`) or serve it over streamable HTTP
from a test (`app()`). Each real call is counted in `CALLS` (in its own process: over stdio, a
test cannot see it; over HTTP in the test's process, it can).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from mcp.server.mcpserver import MCPServer

CALLS: Counter[str] = Counter()
"""How many times each tool really ran (in this process)."""
ORDERS = {"O-7003": {"carrier": "UPS", "status": "in transit", "eta": "2026-03-14"}}

server = MCPServer("desk")


@server.tool()
def track_shipment(order_id: str) -> dict[str, Any]:
    """Where an order is."""
    CALLS["track_shipment"] += 1
    return ORDERS.get(order_id, {"error": "no such order"})


@server.tool()
def get_refund_policy() -> str:
    """The refund rules."""
    CALLS["get_refund_policy"] += 1
    return "30 days, for damaged or unopened items"


def app() -> Any:
    """The server as an ASGI app (streamable HTTP at /mcp)."""
    return server.streamable_http_app()


if __name__ == "__main__":
    server.run("stdio")
