"""Redaction: what the one policy at every exit costs, against its own detectors run alone.

The texts are a shipped golden's span table (our agent's traces), the tau-bench corpus as
imported (another team's), and the evaluators' bench table, whose trace and span ids make most
of its distinct texts (as in production traces). `plangate` is `Redactor.table` on the whole table with a fresh
redactor (nothing remembered); the peer is detect-secrets' detectors run over every distinct
text of the same table, which is the detection part alone, without patterns, contexts or the
rewrite.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from rich.table import Table

from plangate.replay import Redactor, import_traces
from tests.bench.bench_evaluators import synthetic_table

REPO = Path(__file__).resolve().parents[2]
TAU = REPO.parent / "shared" / "corpus" / "tau-bench" / "gpt-4o-airline.json"


@dataclass(frozen=True, slots=True)
class RedactTiming:
    """One table: its texts, and the seconds of each side."""

    name: str
    texts: int
    distinct: int
    plangate_s: float
    detectors_s: float

    def as_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "texts": self.texts,
            "distinct": self.distinct,
            "plangate_s": round(self.plangate_s, 4),
            "detect_secrets_detectors_s": round(self.detectors_s, 4),
        }


def _texts(table: pa.Table) -> list[str]:
    return [
        v
        for name in table.column_names
        if pa.types.is_string(table.column(name).type)
        for v in table.column(name).to_pylist()
        if v
    ]


def _time(name: str, table: pa.Table) -> RedactTiming:
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class

    texts = _texts(table)
    started = time.perf_counter()
    Redactor().table(table)
    plangate = time.perf_counter() - started
    detectors = [plugin() for plugin in get_mapping_from_secret_type_to_class().values()]
    started = time.perf_counter()
    for text in set(texts):
        for detector in detectors:
            detector.analyze_line(filename="text", line=text, line_number=1)
    peer = time.perf_counter() - started
    return RedactTiming(name, len(texts), len(set(texts)), plangate, peer)


def run_all() -> list[RedactTiming]:
    """Every table."""
    tables = [
        (
            "observability-core spans",
            pq.read_table(REPO / "datasets" / "observability-core" / "spans.parquet"),
        )
    ]
    if TAU.exists():
        tables.append(("tau-bench, imported", import_traces("tau-bench", [TAU])))
    spans, _ = synthetic_table(2_000, 20)
    tables.append((f"evaluators' bench, {spans.num_rows:,} spans", spans))
    return [_time(name, table) for name, table in tables]


def table(results: list[RedactTiming]) -> Table:
    """The timings as a table."""
    grid = Table(title="Redaction at every exit (fresh redactor, every string column)")
    for column in (
        "table",
        "texts",
        "distinct",
        "plangate s",
        "detect-secrets detectors s",
        "ratio",
    ):
        grid.add_column(column, justify="left" if column == "table" else "right")
    for r in results:
        grid.add_row(
            r.name, f"{r.texts:,}", f"{r.distinct:,}", f"{r.plangate_s:.3f}",
            f"{r.detectors_s:.3f}", f"{r.plangate_s / r.detectors_s:.2f}",
        )  # fmt: skip
    return grid
