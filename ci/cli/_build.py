"""`plangate dataset build`: the shipped golden datasets, recorded again (recipes: `ci._build`)."""

from __future__ import annotations

import argparse
import asyncio
import time
from pathlib import Path

from plangate.ci._build import (
    BUILDS,
    CORPUS_ENV,
    THIRD_PARTY,
    build_third_party,
    corpus_of,
)
from plangate.ci._build import build as record_build
from plangate.harness import PlangateError


def build(args: argparse.Namespace) -> int:
    """Build every shipped dataset (or the ones named) into `-o`, and say what was written."""
    root = Path(args.output)
    names = list(args.names)
    known = [*(b.name for b in BUILDS), THIRD_PARTY]
    unknown = set(names) - set(known)
    if unknown:
        raise PlangateError(
            f"unknown dataset(s): {', '.join(sorted(unknown))}; choose from {', '.join(known)}"
        )
    recorded = [b for b in BUILDS if not names or b.name in names]
    if recorded and not (root / "requests").is_dir():
        raise PlangateError(f"{root}: no requests/ folder; -o names the datasets folder to build")
    started = time.perf_counter()
    if not names or THIRD_PARTY in names:
        # Asked for by name, or from a corpus named: a missing corpus is an error, not a skip.
        required = THIRD_PARTY in names or args.corpus is not None
        _third_party(Path(args.corpus) if args.corpus else corpus_of(root), root, required)
    for spec in recorded:
        began = time.perf_counter()
        folder = asyncio.run(record_build(spec, root))
        print(f"{spec.name}: {folder} ({time.perf_counter() - began:.1f} s)")
    print(f"done in {time.perf_counter() - started:.1f} s")
    return 0


def _third_party(corpus: Path, root: Path, required: bool) -> None:
    if (corpus / "tau-bench").is_dir():
        print(f"{THIRD_PARTY}: {build_third_party(corpus, root)}")
    elif required:
        raise PlangateError(
            f"{corpus}: not the third-party corpus (no tau-bench/ folder in it); --corpus or "
            f"${CORPUS_ENV} names the folder that holds tau-bench/, tau2-bench/ and swe-agent/"
        )
    else:
        print(f"{THIRD_PARTY}: skipped, no corpus at {corpus} (--corpus or ${CORPUS_ENV})")
