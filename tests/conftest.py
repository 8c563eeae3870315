"""Test-wide fixtures: no real network, ever.

Any connection to an address other than loopback fails the test: a stray real model call can
not slip into the suite. Tests talk to local servers on 127.0.0.1 only.
"""

from __future__ import annotations

import importlib.abc
import socket
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import settings

# Shared machines are noisy: a property test is about behaviour, never about speed.
settings.register_profile("plangate", deadline=None)
settings.load_profile("plangate")


class _OnlyThroughPlangate(importlib.abc.MetaPathFinder):
    """The repository's folders import as `plangate.<folder>` only.

    pytest puts the checkout on `sys.path`, so `import harness` would load a second copy of the
    package beside `plangate.harness` (a monkeypatch on one would miss the other). Fail loudly
    instead.
    """

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> None:
        if path is None and fullname in ("harness", "replay", "evaluators", "ci"):
            raise ImportError(f"import plangate.{fullname}, not {fullname}")


sys.meta_path.insert(0, _OnlyThroughPlangate())

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


REPO = __import__("pathlib").Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def corpus() -> Any:
    """The third-party trajectories in ../shared/corpus (or $PLANGATE_CORPUS).

    They are part of every checkout's surroundings (CI lays shared/ beside the clone); a missing
    corpus fails the tests that need it rather than skipping them.
    """
    import os
    from pathlib import Path

    path = Path(os.environ.get("PLANGATE_CORPUS", REPO.parent / "shared" / "corpus"))
    if not (path / "tau-bench").is_dir():
        pytest.fail(f"the shared corpus is missing at {path}; set PLANGATE_CORPUS to its folder")
    return path


CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome")


def find_chromium() -> Any:
    """The browser binary: $PLANGATE_CHROMIUM, else the first of CHROMIUM_NAMES on PATH.

    Fails (never skips) without one, saying how to get one: a browser test that skips on a
    machine without a browser would pass CI by checking nothing.
    """
    import os
    import shutil
    from pathlib import Path

    configured = os.environ.get("PLANGATE_CHROMIUM")
    if configured:
        found = shutil.which(configured)
        if found is None:
            pytest.fail(
                f"PLANGATE_CHROMIUM={configured!r} is not an executable; point it at a Chromium "
                "or Chrome binary, or unset it and `apt-get install chromium`"
            )
        return Path(found)
    for name in CHROMIUM_NAMES:
        found = shutil.which(name)
        if found is not None:
            return Path(found)
    pytest.fail(
        f"no headless browser found (looked for {', '.join(CHROMIUM_NAMES)} on PATH): install "
        "one with `apt-get install chromium` (Debian) or set PLANGATE_CHROMIUM to a Chromium or "
        "Chrome binary"
    )


@pytest.fixture(scope="session")
def chromium() -> Any:
    """Path to a Chromium binary for headless browser tests (see `find_chromium`)."""
    return find_chromium()
