"""`plangate import otlp-json`'s peak RSS: what a span costs while a file is imported.

The spans are the receiver bench's (`bench_receiver.make_spans`: turns of an AGENT, four LLM and
four TOOL spans), written as one OTLP JSON file and as JSON Lines, a request per batch of 512 (a
collector's file exporter's format), beside a file of one span: the command's own footprint.
Each import runs in a child process that reads its own peak RSS (`bench_stream.CHILD`); the
cost per span is the peak above the one-span import's, divided by the spans.
Run alone: `python -m tests.bench.bench_import_memory [SPANS]`.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

from plangate.replay.importers import otlp_json_from_spans
from tests.bench.bench_receiver import BATCH, make_spans
from tests.bench.bench_stream import CHILD, PEAK

SPANS = 50_000


@dataclass(frozen=True, slots=True)
class ImportPeak:
    """One import's peak RSS."""

    name: str
    spans: int
    peak_mib: float
    kib_per_span: float | None
    """Above the one-span import's peak; None for that import itself."""

    def as_dict(self) -> dict[str, object]:
        per_span = None if self.kib_per_span is None else round(self.kib_per_span, 2)
        return {"name": self.name, "spans": self.spans, "peak_mib": round(self.peak_mib, 1),
                "kib_per_span": per_span}  # fmt: skip


def _peak_mib(file: Path, out: Path) -> float:
    """The peak RSS of `plangate import otlp-json FILE` in a child process."""
    command = [sys.executable, "-c", CHILD, "import", "otlp-json", str(file), "-o", str(out)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=1800, check=True)
    found = PEAK.search(done.stdout)
    assert found is not None, done.stdout
    return int(found.group(1)) / 1024


def run_all(count: int = SPANS) -> list[ImportPeak]:
    """Import the spans as one file, as JSON Lines, and one span alone; each one's peak."""
    spans = make_spans(count)
    with tempfile.TemporaryDirectory() as folder:
        files = {
            "one span (the command's own)": [otlp_json_from_spans(spans[:1])],
            "one OTLP JSON file": [otlp_json_from_spans(spans)],
            f"JSON Lines, a request per {BATCH} spans": [
                otlp_json_from_spans(spans[at : at + BATCH]) for at in range(0, count, BATCH)
            ],
        }
        peaks: list[ImportPeak] = []
        for number, (name, requests) in enumerate(files.items()):
            file = Path(folder) / f"{number}.json"
            file.write_text("\n".join(json.dumps(r) for r in requests), encoding="utf-8")
            peak = _peak_mib(file, Path(folder) / f"{number}.parquet")
            size = 1 if number == 0 else count
            above = None if number == 0 else (peak - peaks[0].peak_mib) * 1024 / count
            peaks.append(ImportPeak(name=name, spans=size, peak_mib=peak, kib_per_span=above))
    return peaks


def table(results: list[ImportPeak]) -> Table:
    grid = Table(title="plangate import otlp-json: peak RSS of the command")
    for column in ("file", "spans", "peak RSS MiB", "KiB per span"):
        grid.add_column(column, justify="left" if column == "file" else "right")
    for r in results:
        per_span = "" if r.kib_per_span is None else f"{r.kib_per_span:.1f}"
        grid.add_row(r.name, f"{r.spans:,}", f"{r.peak_mib:,.0f}", per_span)
    return grid


if __name__ == "__main__":
    count = int(sys.argv[1]) if len(sys.argv) > 1 else SPANS
    Console(width=None if sys.stdout.isatty() else 150).print(table(run_all(count)))
