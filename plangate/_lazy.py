"""Package roots whose public names load on first use (a module `__getattr__`, PEP 562).

`plangate`, `plangate.ci`, `plangate.ci.gate` and `plangate.ci.phoenix` are imported by every
`plangate` command and every pytest run (the plugin); importing what they name up front would
load pandas, pyarrow and the OpenTelemetry SDK for commands that need none of it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_getattr(package: str, home: Mapping[str, str]) -> Callable[[str], Any]:
    """A module `__getattr__` for `package` that imports each name of `home` from its module.

    `home` maps a public name to the module that defines it. Define it only outside
    `TYPE_CHECKING`: to a type checker, a module `__getattr__` makes every missing name `Any`.
    """

    def __getattr__(name: str) -> Any:
        if name in home:
            return getattr(importlib.import_module(home[name]), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__
