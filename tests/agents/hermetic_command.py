"""A `command:` support agent with `hermetic` tools: one JSON turn per line, `openai` client.

plangate sets `OPENAI_BASE_URL` and `PLANGATE_TOOLS_URL`; every real run of a tool appends a
line to the file `$COUNT_FILE` names, so a test can see that a replay ran none.
"""

import json
import os
import sys

from openai import OpenAI

from plangate.replay.agents import hermetic


def _count(name: str) -> None:
    with open(os.environ["COUNT_FILE"], "a", encoding="utf-8") as file:
        file.write(name + "\n")


@hermetic
def track_shipment(order_id: str) -> dict:
    """Where an order is."""
    _count("track_shipment")
    return {"order_id": order_id, "carrier": "UPS", "status": "in transit"}


@hermetic
def get_refund_policy() -> str:
    """The refund rules."""
    _count("get_refund_policy")
    return "30 days, for damaged or unopened items"


TOOLS = {"track_shipment": track_shipment, "get_refund_policy": get_refund_policy}
OFFERED = [
    {"type": "function", "function": {"name": "track_shipment", "description": "Where an order is",
     "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}}}},
    {"type": "function", "function": {"name": "get_refund_policy", "description": "Refund rules",
     "parameters": {"type": "object", "properties": {}}}},
]  # fmt: skip


def turn(client: OpenAI, request: str, history: list) -> str:
    messages = [{"role": "system", "content": "You are a support agent."}, *history,
                {"role": "user", "content": request}]  # fmt: skip
    for _ in range(6):
        reply = client.chat.completions.create(model="any", messages=messages, tools=OFFERED)
        message = reply.choices[0].message
        messages.append(message.model_dump(exclude_none=True))
        if not message.tool_calls:
            return message.content or ""
        for call in message.tool_calls:
            value = TOOLS[call.function.name](**json.loads(call.function.arguments or "{}"))
            content = value if isinstance(value, str) else json.dumps(value)
            messages.append({"role": "tool", "tool_call_id": call.id, "content": content})
    return "I could not finish."


def main() -> None:
    client = OpenAI()
    for line in sys.stdin:
        request = json.loads(line)
        answer = turn(client, request["request"], request["history"])
        print(json.dumps({"answer": answer}), flush=True)


if __name__ == "__main__":
    main()
