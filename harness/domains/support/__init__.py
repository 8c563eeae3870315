"""The support demo domain: a customer support desk with orders, refunds and an outbox.

Customers and a product catalog are literal tables; their order history is generated from a fixed
seed, and a few recent orders are written out by hand because the tasks are about them (a
damaged blender, a television above the refund limit, a parcel in transit, an order still being
packed). Each workspace gets its own copy of the data: refunds, cancellations, address changes,
sent emails and escalations change only that copy. "Today" is fixed, never read from the clock.
"""

from __future__ import annotations

from plangate.harness.domains._domain import CallSpec, Domain, TaskSpec, register_domain
from plangate.harness.domains.support._data import (
    REFUND_LIMIT_CENTS,
    REFUND_WINDOW_DAYS,
    SEED,
    TODAY,
    Customer,
    Item,
    Order,
    usd,
)
from plangate.harness.domains.support._desk import SupportDesk, make_tools

INSTRUCTIONS = (
    "You are a customer support agent for an online home goods store. Look customers and "
    "orders up with the tools before you act, and quote order ids, item ids and amounts exactly. "
    f"You may refund delivered items up to {usd(REFUND_LIMIT_CENTS)} within "
    f"{REFUND_WINDOW_DAYS} days of delivery; anything else needs a manager: escalate it and "
    "mark the task blocked."
)

DEMO_REQUEST = (
    "Look up the latest order of dana.whitfield@example.com, refund the damaged blender, and "
    "email Dana a refund confirmation."
)

TASKS = (
    TaskSpec(
        key="lookup-latest-order",
        title="Look up Dana Whitfield's latest order",
        phrases=("latest order", "most recent order"),
        calls=(
            CallSpec(name="find_customer", arguments={"email": "dana.whitfield@example.com"}),
            CallSpec(name="list_orders", arguments={"customer_id": "C-1001", "limit": 5}),
            CallSpec(name="get_order", arguments={"order_id": "O-7001"}),
        ),
    ),
    TaskSpec(
        key="refund-blender",
        title="Refund the damaged blender",
        phrases=("damaged blender", "refund the blender"),
        calls=(
            CallSpec(
                name="refund_item",
                arguments={"order_id": "O-7001", "item_id": "BLN-200", "reason": "damaged"},
            ),
        ),
    ),
    TaskSpec(
        key="email-refund-confirmation",
        title="Email Dana the refund confirmation",
        phrases=("refund confirmation", "email dana"),
        calls=(
            CallSpec(
                name="send_email",
                arguments={
                    "to": "dana.whitfield@example.com",
                    "subject": "Your refund for order O-7001",
                    "body": "Hi Dana, we are sorry your blender arrived damaged. We have "
                    "refunded $89.00 for the Countertop blender (order O-7001) to your "
                    "original payment method; it arrives in 5-10 business days. "
                    "Kind regards, the support team",
                },
            ),
        ),
    ),
    TaskSpec(
        key="track-shipment",
        title="Track the shipment of order O-7003",
        phrases=("track the shipment", "where is order"),
        calls=(CallSpec(name="track_shipment", arguments={"order_id": "O-7003"}),),
    ),
    TaskSpec(
        key="update-address",
        title="Update Aiko Tanaka's shipping address",
        phrases=("shipping address", "update her address", "new address"),
        calls=(
            CallSpec(name="find_customer", arguments={"email": "aiko.tanaka@example.com"}),
            CallSpec(
                name="update_address",
                arguments={
                    "customer_id": "C-1003",
                    "street": "12 Harbor Lane",
                    "city": "Portland",
                    "postal_code": "97201",
                },
            ),
        ),
    ),
    TaskSpec(
        key="cancel-espresso-order",
        title="Cancel the espresso machine order",
        phrases=("cancel the espresso", "espresso machine order"),
        calls=(CallSpec(name="cancel_order", arguments={"order_id": "O-7004"}),),
    ),
    TaskSpec(
        key="refund-policy",
        title="Check the refund policy",
        phrases=("refund policy", "return window"),
        calls=(CallSpec(name="get_refund_policy"),),
    ),
    TaskSpec(
        key="order-history",
        title="Show Grace Liu's order history",
        phrases=("order history",),
        calls=(
            CallSpec(name="find_customer", arguments={"email": "grace.liu@example.com"}),
            CallSpec(name="list_orders", arguments={"customer_id": "C-1008", "limit": 10}),
        ),
    ),
    TaskSpec(
        key="refund-television",
        title="Refund Samuel Okafor's damaged television",
        phrases=("television",),
        calls=(
            CallSpec(
                name="escalate",
                arguments={
                    "order_id": "O-7002",
                    "reason": "The 55-inch QLED television arrived damaged; its $649.00 refund "
                    "is above the $200.00 agent limit.",
                },
            ),
        ),
        blocked_reason=(
            "The $649.00 television is above the $200.00 agent refund limit: a manager must "
            "approve the refund (escalated to the refund-approvals queue)."
        ),
    ),
)

REQUESTS = (
    "What is your refund policy for damaged items?",
    "Where is order O-7003?",
    "Show Grace Liu's order history.",
    "Aiko Tanaka moved: please update her address to 12 Harbor Lane, Portland 97201.",
    "Cancel the espresso machine order O-7004 for Priya Raman.",
    "Check the refund policy, then refund the damaged blender on order O-7001.",
    "Samuel Okafor's television from order O-7002 arrived broken: check the refund policy and "
    "refund the television.",
    "Look up Dana Whitfield's latest order, check the refund policy, refund the damaged "
    "blender, and email Dana a refund confirmation.",
    "Show Grace Liu's order history, track the shipment of order O-7003, cancel the espresso "
    "machine order O-7004, update Aiko Tanaka's shipping address to 12 Harbor Lane, Portland "
    "97201, and check the refund policy.",
)


@register_domain("support")
def support() -> Domain:
    """The support domain: a customer support desk with orders, refunds and an outbox."""
    return Domain(
        name="support",
        description="A customer support desk: look up orders, refund, cancel, email, escalate.",
        instructions=INSTRUCTIONS,
        make_tools=make_tools,
        tasks=TASKS,
        demo_request=DEMO_REQUEST,
        requests=REQUESTS,
    )


__all__ = [
    "SEED",
    "TODAY",
    "Customer",
    "Item",
    "Order",
    "SupportDesk",
    "make_tools",
    "support",
    "usd",
]
