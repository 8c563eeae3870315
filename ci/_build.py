"""`plangate dataset build`: record plangate's shipped golden datasets from their requests.

    plangate dataset build [NAME ...] [-o datasets] [--corpus ../shared/corpus]

The request files in `datasets/requests/` are the source of truth (human-readable JSON, see
`load_requests`); each dataset is recorded through the reference agent with a simulated
model and written to `datasets/<name>/`; `third-party` is imported from the shared corpus.
Everything is deterministic: the simulated models, the domains' data and the per-session seeds
are fixed, so a rebuild reproduces the same turns, steps and cassettes
(only timestamps and the manifest's creation time differ).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from plangate.harness import read_text
from plangate.replay import (
    GoldenDataset,
    concat_tables,
    dataset_from_traces,
    import_traces,
    load_requests,
    record,
    write_dataset,
)

CORPUS_ENV = "PLANGATE_CORPUS"
"""Where the third-party trajectories are, when `--corpus` is not given."""


@dataclass(frozen=True, slots=True)
class Part:
    """One request file recorded in one domain."""

    requests: str
    """File name under `datasets/requests/` (without `.json`)."""
    domain: str


@dataclass(frozen=True, slots=True)
class Build:
    """One golden dataset: how to record it."""

    name: str
    variant: str
    model: str
    parts: tuple[Part, ...]
    description: str
    seed: int = 0


BUILDS: tuple[Build, ...] = (
    Build(
        name="context-management",
        variant="alyx-context",
        model="sim:diligent",
        parts=(Part("context-management", "observability"),),
        description=(
            "alyx-context on the observability domain: large tool results (over 600 characters) "
            "reach the model as references with their shape, and multi-turn sessions cross the "
            "history budget so the model writes checkpoints that replace earlier turns."
        ),
    ),
    Build(
        name="observability-core",
        variant="alyx",
        model="sim:diligent",
        parts=(Part("observability-core", "observability"),),
        description=(
            "Reference agent (alyx, sim:diligent) on the observability domain: simple one-step "
            "requests (no plan), requests of 2-5 tasks (plan, required tools), the deploy task "
            "that must be marked blocked, multi-turn redirects ('actually, do this instead') "
            "and closing turns without work."
        ),
    ),
    Build(
        name="support-desk",
        variant="alyx",
        model="sim:diligent",
        parts=(Part("support-desk", "support"),),
        description=(
            "Reference agent (alyx, sim:diligent) on the support domain: simple one-step "
            "requests, requests of 2-5 tasks, the television refund above the agent limit "
            "(escalated and marked blocked), multi-turn redirects and closing turns."
        ),
    ),
    Build(
        name="failure-modes",
        variant="alyx",
        model="sim:diligent",
        parts=(Part("failure-modes", "observability"),),
        description=(
            "alyx on the observability domain with failure models per session (sim:looper, "
            "sim:forgetful, sim:early-finisher, sim:announcer, sim:silent, sim:churner; three "
            "seeds each), so their failures and the harness's reactions are in the goldens."
        ),
    ),
    Build(
        name="flux-dependencies",
        variant="flux",
        model="sim:diligent",
        parts=(
            Part("flux-dependencies-observability", "observability"),
            Part("flux-dependencies-support", "support"),
        ),
        description=(
            "Dependency plans (flux, sim:diligent) on the observability and support domains: "
            "chained steps, a blocked step (deploy, television refund) that fails with its "
            "dependents blocked, and a following turn that drops it and replans."
        ),
    ),
)


def _merge(name: str, description: str, parts: list[GoldenDataset]) -> GoldenDataset:
    if len(parts) == 1:
        return parts[0]
    return GoldenDataset(
        name=name,
        description=description,
        sessions=pa.concat_tables([p.sessions for p in parts]),
        turns=pa.concat_tables([p.turns for p in parts]),
        spans=concat_tables([p.spans for p in parts]),
        model_cassette=pa.concat_tables([p.model_cassette for p in parts]),
        tool_cassette=pa.concat_tables([p.tool_cassette for p in parts]),
    )


async def build(spec: Build, root: Path) -> Path:
    """Record one dataset from its request files (in `root`/requests) and write it under `root`."""
    recorded = []
    for part in spec.parts:
        path = root / "requests" / f"{part.requests}.json"
        requests = load_requests(read_text(path, "requests file"), str(path))
        recorded.append(
            await record(
                requests,
                name=spec.name,
                variant=spec.variant,
                model=spec.model,
                domain=part.domain,
                seed=spec.seed,
                description=spec.description,
            )
        )
    return write_dataset(_merge(spec.name, spec.description, recorded), root / spec.name)


THIRD_PARTY = "third-party"
"""Goldens built from other teams' trajectories in ../shared/corpus (import, then from-traces)."""


def build_third_party(corpus: Path, root: Path) -> Path:
    """tau-bench, tau2-bench and SWE-agent trajectories as one golden dataset.

    These goldens carry the publishers' outcomes (rewards, termination reasons) and serve the
    evaluators and the gate; they have no harness domain behind them, so they are scored, not
    replayed.
    """
    tables = [
        import_traces("tau-bench", [corpus / "tau-bench" / "gpt-4o-airline.json"]),
        import_traces(
            "tau2",
            [corpus / "tau2-bench" / "sierra_gym_gpt-4.1_telecom_no-user_4trials_5tasks.json"],
        ),
        import_traces(
            "swe-agent",
            [
                corpus
                / "swe-agent"
                / "trajectories"
                / "demonstrations"
                / "ctf"
                / "crypto"
                / "eps.traj"
            ],
        ),
    ]
    dataset = dataset_from_traces(
        concat_tables(tables),
        name=THIRD_PARTY,
        description=(
            "Third-party trajectories: tau-bench gpt-4o airline (50 tasks x 4 trials), tau2-bench "
            "gpt-4.1 telecom (5 tasks x 4 trials), and a SWE-agent run that submits the same flag "
            "four times. Scored with their own rewards; not replayable against our harness."
        ),
    )
    return write_dataset(dataset, root / THIRD_PARTY)


def corpus_of(root: Path) -> Path:
    """The third-party corpus for the datasets folder `root`.

    $PLANGATE_CORPUS, else the `shared/corpus` folder beside the repository that holds `root`
    (`root/../../shared/corpus`).
    """
    found = os.environ.get(CORPUS_ENV)
    return Path(found) if found else root.resolve().parent.parent / "shared" / "corpus"
