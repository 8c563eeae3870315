"""The support domain's data: customers, a product catalog and order histories from a fixed seed."""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any, Literal

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


def make_customers() -> dict[str, Customer]:
    """A fresh copy of the desk's customers, by id."""
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


def make_orders() -> dict[str, Order]:
    """A fresh copy of the desk's orders, by id: a seeded history and the recent orders."""
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


def order_events(order: Order) -> list[dict[str, str]]:
    """An order's tracking events so far, oldest first."""
    steps = [
        (order.ordered_on, "label created"),
        (order.ordered_on + timedelta(days=1), "picked up by UPS"),
        (order.ordered_on + timedelta(days=2), "in transit at the Memphis hub"),
    ]
    if order.delivered_on is not None:
        steps.append((order.delivered_on, "delivered"))
    limit = order.delivered_on or TODAY
    return [{"date": day.isoformat(), "event": what} for day, what in steps if day <= limit]
