"""Weak references to a session, held by what the session itself holds (its tools, features).

A session holds its tools and features; if they held it back strongly, a dropped session and
its messages would stay alive until the garbage collector looked for cycles. They hold it
weakly, and `alive` gets it back (a session that is gone is a bug, not a user's mistake).
"""

from __future__ import annotations

import weakref
from typing import TypeVar

T = TypeVar("T")


def alive(reference: weakref.ref[T]) -> T:
    """What a weak reference points at; `RuntimeError` when it is gone."""
    found = reference()
    if found is None:
        raise RuntimeError("the session is gone")
    return found
