"""A real Phoenix server for the Phoenix tests: one per test process (each pytest-xdist worker
that runs a Phoenix test file starts its own), from its own env.

The server runs from `.venv-phoenix` (created on first use, see `plangate.ci.phoenix._server`), with its
data in a temporary folder and free ports on 127.0.0.1. Its span queue is kept small
(`QUEUE`), so that a burst of a few thousand spans meets the server's back-pressure (503).
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from plangate.ci.phoenix._server import PhoenixServer, down, free_ports, server_python, up

QUEUE = 1_000
"""PHOENIX_MAX_SPANS_QUEUE_SIZE of the test server (Phoenix's default is 20,000)."""

_ENVIRONMENT = ThreadPoolExecutor(max_workers=1, thread_name_prefix="phoenix-env")
_SERVER_PYTHON = _ENVIRONMENT.submit(server_python)
"""The server's environment, checked (and on a fresh clone created: about two minutes) in the
background from collection on, while the tests before these run."""


@pytest.fixture(scope="session", autouse=True)
def phoenix_environment() -> Path:
    """The server's Python, once its environment is ready: every Phoenix test waits for it."""
    return _SERVER_PYTHON.result()


@pytest.fixture(scope="session")
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PhoenixServer]:
    """A running Phoenix server; stopped at the end of the test run."""
    folder: Path = tmp_path_factory.mktemp("phoenix")
    port, grpc_port = free_ports(2)
    server = up(folder, port=port, grpc_port=grpc_port, max_spans_queue=QUEUE)
    try:
        yield server
    finally:
        down(folder)


@pytest.fixture
def phoenix_client(phoenix: PhoenixServer) -> Any:
    """A `phoenix.client.Client` for the test server."""
    from phoenix.client import Client

    return Client(base_url=phoenix.url)
