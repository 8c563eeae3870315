"""The support demo domain: a customer support desk with orders, refunds and an outbox.

Customers and a product catalog are literal tables; their order history is generated from a fixed
seed, and a few recent orders are written out by hand because the tasks are about them (a
damaged blender, a television above the refund limit, a parcel in transit, an order still being
packed). Each workspace gets its own copy of the data: refunds, cancellations, address changes,
sent emails and escalations change only that copy. "Today" is fixed, never read from the clock.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import Any, Literal

from plangate.harness._domain import CallSpec, Domain, TaskSpec, register_domain
from plangate.harness._tools import Tool, ToolRetry, tool

OrderStatus = Literal["processing", "shipped", "delivered", "cancelled"]
RefundReason = Literal["damaged", "wrong_item", "not_delivered", "changed_mind"]

SEED = 20240614
TODAY = date(2024, 6, 14)
REFUND_WINDOW_DAYS = 30
REFUND_LIMIT_CENTS = 200_00
MAX_LIMIT = 50
MAX_BODY_CHARS = 2_000

_CUSTOMERS: tuple[tuple[str, str, str, str, str], ...] = (
    # id, name, street, city, postal code (the email is first.last@example.com)
    ("C-1001", "Dana Whitfield", "48 Elm Street", "Springfield", "62704"),
    ("C-1002", "Marco Rossi", "9 Canal Road", "Boston", "02118"),
    ("C-1003", "Aiko Tanaka", "310 Pine Avenue", "Seattle", "98101"),
    ("C-1004", "Samuel Okafor", "77 Lake Drive", "Chicago", "60614"),
    ("C-1005", "Priya Raman", "5 Orchard Court", "Austin", "78701"),
    ("C-1006", "Lena Fischer", "1200 Market Street", "Denver", "80202"),
    ("C-1007", "Tomas Alvarez", "63 Bay Street", "Miami", "33131"),
    ("C-1008", "Grace Liu", "22 Hill Road", "San Jose", "95112"),
    ("C-1009", "Omar Haddad", "850 River Lane", "Detroit", "48226"),
    ("C-1010", "Chloe Martin", "14 Maple Way", "Portland", "97205"),
)

_PRODUCTS: dict[str, tuple[str, int]] = {
    # sku: (name, unit price in cents)
    "BLN-200": ("Countertop blender", 89_00),
    "CHR-700": ("Office chair", 219_00),
    "COF-500": ("Espresso machine", 389_00),
    "HDP-300": ("Noise-cancelling headphones", 179_00),
    "KTL-110": ("Electric kettle", 39_50),
    "LMP-045": ("Desk lamp", 45_00),
    "MUG-012": ("Ceramic mug set", 24_00),
    "PAN-028": ("Non-stick pan", 32_00),
    "SPK-150": ("Bluetooth speaker", 59_00),
    "TV-55Q": ("55-inch QLED television", 649_00),
    "TWL-006": ("Bath towel set", 28_00),
    "VAC-900": ("Cordless vacuum", 299_00),
}

_RECENT_ORDERS: tuple[tuple[str, str, str, OrderStatus, str | None, tuple[str, ...]], ...] = (
    # id, customer, ordered on, status, delivered on, skus
    ("O-7001", "C-1001", "2024-06-03", "delivered", "2024-06-07", ("BLN-200", "MUG-012")),
    ("O-7002", "C-1004", "2024-06-01", "delivered", "2024-06-05", ("TV-55Q",)),
    ("O-7003", "C-1002", "2024-06-10", "shipped", None, ("SPK-150", "KTL-110")),
    ("O-7004", "C-1005", "2024-06-13", "processing", None, ("COF-500",)),
    ("O-7005", "C-1003", "2024-04-20", "delivered", "2024-04-24", ("HDP-300",)),
)


def usd(cents: int) -> str:
    """Format an amount in cents as dollars, e.g. `$89.00`."""
    return f"${cents // 100:,}.{cents % 100:02d}"


@dataclass(slots=True, kw_only=True)
class Item:
    """One line of an order."""

    item_id: str
    """The product's SKU, unique within the order."""
    name: str
    """Product name."""
    unit_price_cents: int
    """Price of one unit."""
    quantity: int
    """Units ordered."""
    refund_id: str | None = None
    """Set once the line has been refunded."""

    @property
    def amount_cents(self) -> int:
        """What the line cost: unit price times quantity."""
        return self.unit_price_cents * self.quantity

    def summary(self) -> dict[str, Any]:
        """The line as the tools show it."""
        return {
            "item_id": self.item_id,
            "name": self.name,
            "quantity": self.quantity,
            "amount": usd(self.amount_cents),
            "refunded": self.refund_id is not None,
        }


@dataclass(slots=True, kw_only=True)
class Order:
    """One order: its lines, its status and its dates."""

    order_id: str
    """`O-7001`."""
    customer_id: str
    """Who placed it."""
    ordered_on: date
    """When it was placed."""
    status: OrderStatus
    """Where it is."""
    delivered_on: date | None
    """When it arrived, for delivered orders."""
    items: list[Item]
    """The order lines."""

    @property
    def total_cents(self) -> int:
        """The sum of the lines."""
        return sum(item.amount_cents for item in self.items)

    def summary(self) -> dict[str, Any]:
        """One row of an order list."""
        return {
            "order_id": self.order_id,
            "ordered_on": self.ordered_on.isoformat(),
            "status": self.status,
            "items": len(self.items),
            "total": usd(self.total_cents),
        }


@dataclass(slots=True, kw_only=True)
class Customer:
    """A customer account."""

    customer_id: str
    """`C-1001`."""
    name: str
    """Full name."""
    email: str
    """Login and contact email."""
    address: dict[str, str]
    """Shipping address: street, city, postal_code, country."""


def _customers() -> dict[str, Customer]:
    return {
        cid: Customer(
            customer_id=cid,
            name=name,
            email=f"{name.lower().replace(' ', '.')}@example.com",
            address={"street": street, "city": city, "postal_code": code, "country": "US"},
        )
        for cid, name, street, city, code in _CUSTOMERS
    }


def _item(sku: str, quantity: int = 1) -> Item:
    name, price = _PRODUCTS[sku]
    return Item(item_id=sku, name=name, unit_price_cents=price, quantity=quantity)


def _history(rng: random.Random) -> list[Order]:
    """Older orders, all delivered or cancelled, numbered by date from O-5001."""
    first, days = date(2024, 1, 8).toordinal(), (date(2024, 4, 30) - date(2024, 1, 8)).days
    drafts: list[tuple[date, str, list[Item], bool]] = []
    for customer_id, *_ in _CUSTOMERS:
        for _ in range(rng.randint(1, 3)):
            ordered = date.fromordinal(first + rng.randrange(days))
            skus = rng.sample(sorted(_PRODUCTS), rng.randint(1, 3))
            items = [_item(sku, rng.choice((1, 1, 1, 2))) for sku in sorted(skus)]
            drafts.append((ordered, customer_id, items, rng.random() < 0.08))
    drafts.sort(key=lambda draft: (draft[0], draft[1]))
    return [
        Order(
            order_id=f"O-{5001 + number}",
            customer_id=customer_id,
            ordered_on=ordered,
            status="cancelled" if cancelled else "delivered",
            delivered_on=None if cancelled else ordered + timedelta(days=2 + number % 5),
            items=items,
        )
        for number, (ordered, customer_id, items, cancelled) in enumerate(drafts)
    ]


def _orders() -> dict[str, Order]:
    orders = _history(random.Random(SEED))
    for order_id, customer_id, ordered, status, delivered, skus in _RECENT_ORDERS:
        orders.append(
            Order(
                order_id=order_id,
                customer_id=customer_id,
                ordered_on=date.fromisoformat(ordered),
                status=status,
                delivered_on=date.fromisoformat(delivered) if delivered else None,
                items=[_item(sku) for sku in skus],
            )
        )
    return {order.order_id: order for order in orders}


def _events(order: Order) -> list[dict[str, str]]:
    steps = [
        (order.ordered_on, "label created"),
        (order.ordered_on + timedelta(days=1), "picked up by UPS"),
        (order.ordered_on + timedelta(days=2), "in transit at the Memphis hub"),
    ]
    if order.delivered_on is not None:
        steps.append((order.delivered_on, "delivered"))
    limit = order.delivered_on or TODAY
    return [{"date": day.isoformat(), "event": what} for day, what in steps if day <= limit]


def _check_limit(limit: int) -> None:
    if not 1 <= limit <= MAX_LIMIT:
        raise ToolRetry(f"limit must be between 1 and {MAX_LIMIT} (got {limit}). Call again.")


def _required(**values: str) -> dict[str, str]:
    """The values stripped; a `ToolRetry` names the first empty one."""
    stripped = {key: value.strip() for key, value in values.items()}
    for key, value in stripped.items():
        if not value:
            raise ToolRetry(f"{key} must not be empty. Call again with a value for {key}.")
    return stripped


@dataclass(slots=True)
class SupportDesk:
    """One session's copy of the support desk: accounts, orders, refunds, outbox, tickets."""

    customers: dict[str, Customer] = field(default_factory=_customers)
    orders: dict[str, Order] = field(default_factory=_orders)
    refunds: list[dict[str, Any]] = field(default_factory=list)
    outbox: list[dict[str, str]] = field(default_factory=list)
    tickets: list[dict[str, str]] = field(default_factory=list)

    def _customer(self, customer_id: str) -> Customer:
        found = self.customers.get(customer_id.strip().upper())
        if found is None:
            raise ToolRetry(
                f"Unknown customer id {customer_id!r}. Customer ids look like 'C-1001'; "
                "call find_customer(email) to get the id of an account."
            )
        return found

    def _order(self, order_id: str) -> Order:
        found = self.orders.get(order_id.strip().upper())
        if found is None:
            raise ToolRetry(
                f"Unknown order id {order_id!r}. Order ids look like 'O-7001'; call "
                "list_orders(customer_id) to see a customer's orders."
            )
        return found

    def find_customer(self, email: str) -> dict[str, Any]:
        """Find a customer account by email.

        Args:
            email: The email on the account, e.g. `dana.whitfield@example.com`.
        """
        wanted = email.strip().lower()
        for customer in self.customers.values():
            if customer.email == wanted:
                orders = [o for o in self.orders.values() if o.customer_id == customer.customer_id]
                return {
                    "customer_id": customer.customer_id,
                    "name": customer.name,
                    "email": customer.email,
                    "address": dict(customer.address),
                    "orders": len(orders),
                }
        raise ToolRetry(
            f"No customer has the email {email!r}. Check the spelling (emails look like "
            "'first.last@example.com') or ask the user for the email on the account."
        )

    def list_orders(
        self, customer_id: str, status: OrderStatus | None = None, limit: int = 10
    ) -> dict[str, Any]:
        """List a customer's orders, newest first.

        Args:
            customer_id: The customer, e.g. `C-1001` (find_customer gives it).
            status: Only orders with this status.
            limit: How many orders to return, 1 to 50.
        """
        customer = self._customer(customer_id)
        _check_limit(limit)
        orders = [
            order
            for order in self.orders.values()
            if order.customer_id == customer.customer_id and status in (None, order.status)
        ]
        orders.sort(key=lambda order: (order.ordered_on, order.order_id), reverse=True)
        return {
            "customer_id": customer.customer_id,
            "matched": len(orders),
            "orders": [order.summary() for order in orders[:limit]],
        }

    def get_order(self, order_id: str) -> dict[str, Any]:
        """Show one order: status, dates, lines with their item ids, and total.

        Args:
            order_id: The order, e.g. `O-7001`.
        """
        order = self._order(order_id)
        return order.summary() | {
            "customer_id": order.customer_id,
            "delivered_on": order.delivered_on.isoformat() if order.delivered_on else None,
            "items": [item.summary() for item in order.items],
        }

    def track_shipment(self, order_id: str) -> dict[str, Any]:
        """Show where an order's parcel is: carrier, tracking number and scan events.

        Args:
            order_id: The order, e.g. `O-7003`.
        """
        order = self._order(order_id)
        if order.status in ("processing", "cancelled"):
            return {
                "order_id": order.order_id,
                "status": order.status,
                "events": [],
                "note": "Nothing has shipped for this order.",
            }
        result = {
            "order_id": order.order_id,
            "status": order.status,
            "carrier": "UPS",
            "tracking_number": f"1Z999AA1{order.order_id[2:]}{order.ordered_on:%m%d}",
            "events": _events(order),
        }
        if order.delivered_on is None:
            result["estimated_delivery"] = (order.ordered_on + timedelta(days=5)).isoformat()
        return result

    def get_refund_policy(self) -> dict[str, Any]:
        """The refund policy: who can be refunded, for what, and when a manager must approve."""
        return {
            "refundable_status": "delivered",
            "window_days": REFUND_WINDOW_DAYS,
            "agent_limit": usd(REFUND_LIMIT_CENTS),
            "reasons": ["damaged", "wrong_item", "not_delivered", "changed_mind"],
            "over_limit_or_late": "escalate(order_id, reason) to a manager",
            "not_yet_shipped": "cancel_order(order_id) instead of a refund",
            "refund_time": "5-10 business days to the original payment method",
            "today": TODAY.isoformat(),
        }

    def _refundable(self, order: Order, item_id: str) -> Item:
        items = {item.item_id: item for item in order.items}
        item = items.get(item_id.strip().upper())
        if item is None:
            raise ToolRetry(
                f"Order {order.order_id} has no item {item_id!r}; its item ids are "
                f"{', '.join(items)}. Call again with one of them."
            )
        if item.refund_id is not None:
            raise ToolRetry(
                f"{item.item_id} of {order.order_id} was already refunded "
                f"({item.refund_id}); do not refund it again."
            )
        if order.status != "delivered" or order.delivered_on is None:
            raise ToolRetry(
                f"Order {order.order_id} is {order.status}; only delivered items can be "
                "refunded. Cancel a processing order with cancel_order, track a shipped one "
                "with track_shipment."
            )
        age = (TODAY - order.delivered_on).days
        if age > REFUND_WINDOW_DAYS or item.amount_cents > REFUND_LIMIT_CENTS:
            raise ToolRetry(
                f"{item.name} ({usd(item.amount_cents)}, delivered {age} days ago) is beyond "
                f"the agent's limit ({usd(REFUND_LIMIT_CENTS)} within {REFUND_WINDOW_DAYS} "
                "days): a manager must approve it. Call escalate(order_id, reason) and tell "
                "the customer."
            )
        return item

    def refund_item(self, order_id: str, item_id: str, reason: RefundReason) -> dict[str, Any]:
        """Refund one line of a delivered order to the original payment method.

        Args:
            order_id: The order, e.g. `O-7001`.
            item_id: The line's item id as get_order shows it, e.g. `BLN-200`.
            reason: Why the customer gets the refund.
        """
        order = self._order(order_id)
        item = self._refundable(order, item_id)
        item.refund_id = f"R-{len(self.refunds) + 1:03d}"
        refund = {
            "refund_id": item.refund_id,
            "order_id": order.order_id,
            "item_id": item.item_id,
            "name": item.name,
            "amount": usd(item.amount_cents),
            "reason": reason,
            "arrives": "in 5-10 business days",
        }
        self.refunds.append(refund)
        return refund

    def cancel_order(self, order_id: str) -> dict[str, Any]:
        """Cancel an order that has not shipped yet; nothing is charged.

        Args:
            order_id: The order, e.g. `O-7004`.
        """
        order = self._order(order_id)
        if order.status != "processing":
            raise ToolRetry(
                f"Order {order.order_id} is {order.status}; only processing orders can be "
                "cancelled. For a delivered order, refund its items with refund_item."
            )
        order.status = "cancelled"
        return {
            "order_id": order.order_id,
            "status": order.status,
            "released": usd(order.total_cents),
        }

    def update_address(
        self, customer_id: str, street: str, city: str, postal_code: str, country: str = "US"
    ) -> dict[str, Any]:
        """Change a customer's shipping address; orders still processing ship to the new one.

        Args:
            customer_id: The customer, e.g. `C-1003` (find_customer gives it).
            street: Street and number.
            city: City.
            postal_code: Postal code.
            country: Two-letter country code.
        """
        customer = self._customer(customer_id)
        address = _required(street=street, city=city, postal_code=postal_code, country=country)
        previous, customer.address = customer.address, address
        open_orders = [
            order.order_id
            for order in self.orders.values()
            if order.customer_id == customer.customer_id and order.status == "processing"
        ]
        return {
            "customer_id": customer.customer_id,
            "address": dict(address),
            "previous_address": previous,
            "open_orders_updated": open_orders,
        }

    def send_email(self, to: str, subject: str, body: str) -> dict[str, Any]:
        """Send an email to a customer.

        Args:
            to: The customer's email address.
            subject: The subject line.
            body: The message, plain text, at most 2000 characters.
        """
        recipients = sorted(customer.email for customer in self.customers.values())
        if to.strip().lower() not in recipients:
            raise ToolRetry(
                f"{to!r} is not a customer's email. Send only to the email on the account "
                "(find_customer shows it)."
            )
        fields = _required(subject=subject, body=body)
        if len(fields["body"]) > MAX_BODY_CHARS:
            raise ToolRetry(
                f"The body has {len(fields['body'])} characters; shorten it to at "
                f"most {MAX_BODY_CHARS}."
            )
        message = {"message_id": f"M-{len(self.outbox) + 1:03d}", "to": to.strip().lower()}
        self.outbox.append(message | fields)
        return message | {"subject": fields["subject"], "status": "sent"}

    def escalate(self, order_id: str, reason: str) -> dict[str, Any]:
        """Hand an order to a manager (refunds above the limit or past the window, disputes).

        Args:
            order_id: The order, e.g. `O-7002`.
            reason: What the manager must decide, in one or two sentences.
        """
        order = self._order(order_id)
        text = _required(reason=reason)["reason"]
        for ticket in self.tickets:
            if ticket["order_id"] == order.order_id:
                raise ToolRetry(
                    f"Order {order.order_id} is already escalated as "
                    f"{ticket['ticket_id']}; tell the customer a manager will reply."
                )
        ticket = {
            "ticket_id": f"T-{len(self.tickets) + 1:03d}",
            "order_id": order.order_id,
            "queue": "refund-approvals",
            "reason": text,
            "status": "waiting for a manager",
        }
        self.tickets.append(ticket)
        return ticket

    def tools(self) -> list[Tool]:
        """This desk's tools."""
        methods: list[Callable[..., Any]] = [
            self.find_customer,
            self.list_orders,
            self.get_order,
            self.track_shipment,
            self.get_refund_policy,
            self.refund_item,
            self.cancel_order,
            self.update_address,
            self.send_email,
            self.escalate,
        ]
        return [tool(method) for method in methods]


def make_tools() -> list[Tool]:
    """Build a fresh copy of the support desk and return its tools."""
    return SupportDesk().tools()


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
