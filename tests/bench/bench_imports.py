"""Import time: what importing plangate's four packages costs a fresh interpreter.

Each statement runs in `RUNS` fresh interpreters; the table gives the median wall time of the
whole process (interpreter start included: the bare interpreter's row is that part) and, from
one `python -X importtime` run, the cumulative import time of the statement's own modules.
`import phoenix.client` is measured apart: plangate imports it only when it talks to Phoenix.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from dataclasses import dataclass

from rich.table import Table

RUNS = 7
PACKAGES = ("plangate.harness", "plangate.replay", "plangate.evaluators", "plangate.ci")
STATEMENTS = (
    ("bare interpreter", ()),
    ("the four packages", PACKAGES),
    ("the plangate command", ("plangate.ci.cli",)),
    ("the pytest plugin", ("plangate.ci._pytest_plugin",)),
    ("phoenix.client", ("phoenix.client",)),
)


@dataclass(frozen=True, slots=True)
class ImportTiming:
    """One statement's cost."""

    name: str
    modules: tuple[str, ...]
    wall_median_s: float
    """Median wall time of a fresh interpreter running the imports, start to exit."""
    import_ms: float
    """Cumulative import time of `modules`, as `-X importtime` reports it."""

    def as_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "modules": list(self.modules),
            "wall_median_s": round(self.wall_median_s, 4),
            "import_ms": round(self.import_ms, 1),
        }


def _statement(modules: tuple[str, ...]) -> str:
    return f"import {', '.join(modules)}" if modules else "pass"


def wall_median(modules: tuple[str, ...], runs: int = RUNS) -> float:
    """Median seconds of `runs` fresh interpreters running the imports."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", _statement(modules)], check=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def import_ms(modules: tuple[str, ...]) -> float:
    """Milliseconds `-X importtime` reports for `modules` (top-level entries, cumulative)."""
    if not modules:
        return 0.0
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", _statement(modules)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    total = 0
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        _, cumulative, name = line.split("|")
        if name.startswith(" ") and not name.startswith("  ") and name.strip() in modules:
            total += int(cumulative)
    return total / 1000


def run_all() -> list[ImportTiming]:
    """Every statement's timing."""
    return [
        ImportTiming(name, modules, wall_median(modules), import_ms(modules))
        for name, modules in STATEMENTS
    ]


def table(results: list[ImportTiming]) -> Table:
    """The timings as a table."""
    grid = Table(title=f"Import time in a fresh interpreter (median of {RUNS} runs)")
    grid.add_column("import")
    grid.add_column("wall s (median)", justify="right")
    grid.add_column("-X importtime ms", justify="right")
    for result in results:
        grid.add_row(result.name, f"{result.wall_median_s:.3f}", f"{result.import_ms:,.0f}")
    return grid
