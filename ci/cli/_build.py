"""`plangate dataset build`: the shipped golden datasets, recorded again (recipes: `ci._build`)."""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Sequence
from pathlib import Path

from plangate.ci._build import (
    BUILDS,
    CORPUS_ENV,
    THIRD_PARTY,
    Build,
    build_third_party,
    corpus_of,
)
from plangate.ci._build import build as record_build
from plangate.harness import PlangateError


def build(args: argparse.Namespace) -> int:
    """Build every shipped dataset (or the ones named) into `-o`, and say what was written."""
    root = Path(args.output)
    names = list(args.names)
    unknown = set(names) - {b.name for b in BUILDS} - {THIRD_PARTY}
    if unknown:
        known = ", ".join([*(b.name for b in BUILDS), THIRD_PARTY])
        raise PlangateError(
            f"unknown dataset(s): {', '.join(sorted(unknown))}; choose from {known}"
        )
    recorded = _chosen(names)
    if recorded and not (root / "requests").is_dir():
        raise PlangateError(f"{root}: no requests/ folder; -o names the datasets folder to build")
    started = time.perf_counter()
    if not names or THIRD_PARTY in names:
        _third_party(Path(args.corpus) if args.corpus else corpus_of(root), root)
    for spec in recorded:
        began = time.perf_counter()
        folder = asyncio.run(record_build(spec, root))
        print(f"{spec.name}: {folder} ({time.perf_counter() - began:.1f} s)")
    print(f"done in {time.perf_counter() - started:.1f} s")
    return 0


def _chosen(names: Sequence[str]) -> list[Build]:
    recorded = [n for n in names if n != THIRD_PARTY]
    if names and not recorded:
        return []
    return [b for b in BUILDS if not recorded or b.name in recorded]


def _third_party(corpus: Path, root: Path) -> None:
    if (corpus / "tau-bench").is_dir():
        print(f"{THIRD_PARTY}: {build_third_party(corpus, root)}")
    else:
        print(f"{THIRD_PARTY}: skipped, no corpus at {corpus} (--corpus or ${CORPUS_ENV})")
