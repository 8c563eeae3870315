"""Test-wide fixtures: no real network, ever.

Any connection to an address other than loopback fails the test: a stray real model call can
not slip into the suite. Tests talk to local servers on 127.0.0.1 only.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest

_LOOPBACK = ("127.", "::1", "localhost")
_real_connect = socket.socket.connect


def _guarded_connect(self: socket.socket, address: Any) -> Any:
    host = address[0] if isinstance(address, tuple) else str(address)
    if isinstance(host, str) and not host.startswith(_LOOPBACK) and self.family != socket.AF_UNIX:
        raise RuntimeError(f"tests may not reach the network: connect to {address!r}")
    return _real_connect(self, address)


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Block every non-loopback connection."""
    monkeypatch.setattr(socket.socket, "connect", _guarded_connect)
    for name in (
        "OPENAI_API_KEY",
        "PLANGATE_OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "PLANGATE_OPENAI_BASE_URL",
    ):
        monkeypatch.delenv(name, raising=False)
    yield
