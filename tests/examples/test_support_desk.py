"""The desk both framework examples share: rebuilt from the history, with its task list."""

from __future__ import annotations

import json

from examples.support_desk import Desk

REFUND = {"order_id": "O-7001", "item_id": "BLN-200", "reason": "damaged"}


def call(call_id: str, name: str, arguments: dict[str, object]) -> dict[str, object]:
    function = {"name": name, "arguments": json.dumps(arguments)}
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": call_id, "function": function}],
    }


def test_the_desk_is_rebuilt_from_the_calls_of_the_history() -> None:
    history = [
        {"role": "user", "content": "Refund the damaged blender on order O-7001."},
        call("call_1", "refund_item", REFUND),
        {"role": "tool", "tool_call_id": "call_1", "content": "..."},
        call("call_2", "todo_write", {"todos": [{"content": "not a desk call"}]}),
        {"role": "assistant", "content": "Refunded."},
    ]
    desk = Desk.for_turn(history, task_list=False)
    assert "already refunded (R-001)" in desk.call("refund_item", json.dumps(REFUND))
    assert set(desk.tools) == {
        "find_customer", "list_orders", "get_order", "track_shipment", "get_refund_policy",
        "refund_item", "cancel_order", "update_address", "send_email", "escalate",
    }  # fmt: skip
    # A fresh desk per session: without the history, the blender is refundable.
    fresh = json.loads(Desk.for_turn([], task_list=False).call("refund_item", REFUND))
    assert fresh["refund_id"] == "R-001"


def test_the_task_list_is_new_each_turn_and_rendered_for_pinning() -> None:
    desk = Desk.for_turn([], task_list=True)
    assert {"todo_write", "todo_update", "todo_read"} <= set(desk.tools)
    desk.call("todo_write", {"todos": [{"content": "Track the shipment"}, {"content": "Refund"}]})
    desk.call("todo_update", '{"item_id": 1, "status": "completed"}')
    assert desk.pinned_plan() == (
        "# Plan\n[x] 1. Track the shipment\n[ ] 2. Refund\n"
        'Next: mark "Refund" in_progress and work on it.'
    )
    assert Desk.for_turn([], task_list=False).pinned_plan() is None


def test_a_mistake_the_model_can_fix_comes_back_as_the_result() -> None:
    desk = Desk.for_turn([], task_list=False)
    assert desk.call("no_such_tool", "{}").startswith("Unknown tool 'no_such_tool'")
    assert "not valid JSON" in desk.call("get_order", "{order")
    assert "Invalid arguments for 'get_order'" in desk.call("get_order", {"order": "O-7001"})
    assert "Unknown order id 'O-9'" in desk.call("get_order", {"order_id": "O-9"})
