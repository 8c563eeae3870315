"""The support domain's workspace.

One session's copy of the desk (accounts, orders, refunds, outbox, tickets) and its tools.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from plangate.harness._tools import Tool, ToolRetry, tool
from plangate.harness.domains.support._data import (
    MAX_BODY_CHARS,
    MAX_LIMIT,
    REFUND_LIMIT_CENTS,
    REFUND_WINDOW_DAYS,
    TODAY,
    Customer,
    Item,
    Order,
    OrderStatus,
    RefundReason,
    make_customers,
    make_orders,
    order_events,
    usd,
)


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

    customers: dict[str, Customer] = field(default_factory=make_customers)
    orders: dict[str, Order] = field(default_factory=make_orders)
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
            "events": order_events(order),
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
