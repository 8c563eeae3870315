"""Tables whose scores must not change: the shipped goldens (third-party among them), the corpus.

`python -m tests.evaluators.baseline` writes `data/scores_baseline.parquet` (the scores of the
evaluators as they were before they were vectorized); `test_scores_unchanged.py` compares today's
scores with it, row by row.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from plangate.ci._rubrics import rubrics_at
from plangate.evaluators import RubricSet, evaluate
from plangate.replay import import_traces, read_table
from tests.bench.bench_evaluators import synthetic_table

ROOT = Path(__file__).resolve().parents[2]
BASELINE = Path(__file__).parent / "data" / "scores_baseline.parquet"
CORPUS_FORMATS = {"tau-bench": "tau-bench", "tau2-bench": "tau2", "swe-agent": "swe-agent"}


def sources(corpus: Path) -> Iterator[tuple[str, pa.Table, RubricSet | None]]:
    """Each source's name, trace table and rubrics."""
    for folder in sorted((ROOT / "datasets").iterdir()):
        if (folder / "manifest.json").is_file():
            table = read_table(str(folder / "spans.parquet"))
            yield f"datasets/{folder.name}", table, rubrics_at(str(folder))
    for name, format in CORPUS_FORMATS.items():
        pattern = "*.traj" if format == "swe-agent" else "*.json"
        for path in sorted((corpus / name).rglob(pattern)):
            if path.name.endswith("_submission.json"):
                continue
            yield f"corpus/{path.relative_to(corpus)}", import_traces(format, [path]), None
    table, _ = synthetic_table(turns=300, calls=12)
    yield "bench/synthetic", table, None


def scores_of(corpus: Path) -> pa.Table:
    """Every source's scores, with a `source` column."""
    parts = []
    for name, table, rubrics in sources(corpus):
        scores = evaluate(table, rubrics)
        parts.append(scores.append_column("source", pa.array([name] * scores.num_rows)))
    return pa.concat_tables(parts)


if __name__ == "__main__":
    corpus = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT.parent / "shared" / "corpus"
    table = scores_of(corpus)
    pq.write_table(table, BASELINE, compression="zstd")
    print(f"{BASELINE}: {table.num_rows} rows")
