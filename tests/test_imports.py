"""Importing plangate does not import Phoenix: not the server, and not even the client.

The server package is heavy (its `phoenix/__init__.py` imports the whole server, seconds of
import time, and it installs a pytest plugin), so it lives in its own environment and plangate
never imports it. The client (`phoenix.client`, a namespace package here) is imported only by
the functions that talk to a server, on first use.
"""

from __future__ import annotations

import json
import subprocess
import sys

PACKAGES = (
    "plangate",
    "plangate.harness",
    "plangate.replay",
    "plangate.evaluators",
    "plangate.ci",
    "plangate.ci._pytest_plugin",
    "plangate.ci.cli",
)
"""What `import plangate`'s users, pytest (the plugin) and the `plangate` command import."""


def imported_after(*modules: str) -> list[str]:
    """The `phoenix` modules a fresh interpreter holds after importing `modules`."""
    code = (
        "import importlib, json, sys\n"
        f"for name in {list(modules)!r}: importlib.import_module(name)\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] == 'phoenix')))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    found: list[str] = json.loads(done.stdout)
    return found


def test_importing_plangate_imports_no_phoenix_module() -> None:
    assert imported_after(*PACKAGES) == []


def test_the_check_sees_the_client_when_it_is_imported() -> None:
    found = imported_after("phoenix.client")
    assert "phoenix.client" in found and "phoenix" in found


def test_the_library_environment_has_no_phoenix_server() -> None:
    code = (
        "import importlib.util as u, json\n"
        "spec = u.find_spec('phoenix')\n"
        "print(json.dumps([spec.origin, u.find_spec('phoenix.server') is None,"
        " u.find_spec('phoenix.session') is None, u.find_spec('phoenix.db') is None]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    origin, *absent = json.loads(done.stdout)
    assert origin is None, f"`phoenix` is a regular package ({origin}): the server is installed"
    assert absent == [True, True, True]
