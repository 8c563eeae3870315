"""Golden datasets as Phoenix datasets, and variant replays as Phoenix experiments, against a
real Phoenix server.

Three sessions of the observability golden dataset (six turns) are mirrored under a name unique
to the test run; two variants replay them as two experiments on that dataset.
"""

from __future__ import annotations

import io
import secrets
import time
from pathlib import Path
from typing import Any

import pytest

from plangate.ci.cli import main
from plangate.ci.phoenix._client import wait_for_spans
from plangate.ci.phoenix._datasets import PhoenixDataset, PhoenixDatasetError, mirror_dataset
from plangate.ci.phoenix._experiments import PhoenixExperiment, run_experiment
from plangate.ci.phoenix._server import PhoenixServer
from plangate.harness import ConfigError
from plangate.replay import read_dataset
from tests.phoenix.sending import INGEST_TIMEOUT

# The Phoenix client's dataframe readers (3.5) call `DataFrame.rename(inplace=True)`, which
# pandas 3.1 deprecates.
pytestmark = pytest.mark.filterwarnings("ignore::pandas.errors.Pandas4Warning")

GOLDEN = Path(__file__).resolve().parents[2] / "datasets" / "observability-core"
SESSIONS = ("obs-001", "obs-008", "obs-009")
EVALUATORS = ("task_completion", "trajectory_match", "tool_call_loops")
TOKEN = secrets.token_hex(3)


@pytest.fixture(scope="module")
def client(phoenix: PhoenixServer) -> Any:
    from phoenix.client import Client

    return Client(base_url=phoenix.url)


@pytest.fixture(scope="module")
def mirrored(client: Any) -> PhoenixDataset:
    return mirror_dataset(
        client, GOLDEN, name=f"obs-{TOKEN}", project=f"golden-{TOKEN}", sessions=SESSIONS
    )


@pytest.fixture(scope="module")
def experiments(client: Any, mirrored: PhoenixDataset) -> dict[str, PhoenixExperiment]:
    return {
        variant: run_experiment(
            client,
            mirrored,
            GOLDEN,
            variant,
            model="sim:forgetful",
            tools="live",
            evaluators=EVALUATORS,
        )  # fmt: skip
        for variant in ("alyx", "naive")
    }


def _turns(sessions: tuple[str, ...] = SESSIONS) -> set[tuple[str, int]]:
    golden = read_dataset(GOLDEN)
    return {
        (t["session_id"], t["turn_index"])
        for t in golden.turns.to_pylist()
        if t["session_id"] in sessions
    }


def test_a_mirrored_dataset_has_one_example_per_golden_turn(
    client: Any, mirrored: PhoenixDataset
) -> None:
    assert mirrored.examples == mirrored.created == len(_turns())
    dataset = client.datasets.get_dataset(dataset=mirrored.name)
    assert dataset.id == mirrored.id
    assert dataset.version_id == mirrored.version_id
    keys = {(e["metadata"]["session_id"], e["metadata"]["turn_index"]) for e in dataset.examples}
    assert keys == _turns()
    golden = read_dataset(GOLDEN)
    for example in dataset.examples:
        meta = example["metadata"]
        turn = golden.turn(meta["session_id"], meta["turn_index"])
        assert example["input"]["request"] == turn["request"]
        assert example["output"]["answer"] == turn["answer"]
        assert meta["dataset"] == "observability-core" and meta["variant"] == "alyx"
        assert meta["rubric"] is not None


def test_its_examples_link_to_the_turns_agent_spans(client: Any, mirrored: PhoenixDataset) -> None:
    dataset = client.datasets.get_dataset(dataset=mirrored.id)
    sources = {e["source"]["span_id"]: e["metadata"] for e in dataset.examples}
    assert mirrored.linked == len(sources) == len(_turns())

    spans = wait_for_spans(client, mirrored.project, sources, timeout=INGEST_TIMEOUT)
    golden = read_dataset(GOLDEN)
    for span_id, meta in sources.items():
        attributes = spans[span_id]["attributes"]
        assert spans[span_id]["span_kind"] == "AGENT"
        assert attributes["plangate.session_id"] == meta["session_id"]
        assert attributes["plangate.turn_index"] == meta["turn_index"]
        assert (
            attributes["input.value"]
            == golden.turn(meta["session_id"], meta["turn_index"])["request"]
        )
        # Phoenix session ids are global: the recorded session is namespaced.
        assert attributes["session.id"].startswith("observability-core:recorded:")
        assert attributes["session.id"].endswith(f":{meta['session_id']}")


def test_the_turns_whole_recording_is_uploaded(client: Any, mirrored: PhoenixDataset) -> None:
    golden = read_dataset(GOLDEN)
    recorded = [r for r in golden.spans.to_pylist() if r["session_id"] in SESSIONS]
    assert mirrored.spans == len(recorded)
    found = _poll_count(client, mirrored.project, len(recorded))
    assert found == len(recorded)


def _poll_count(client: Any, project: str, expected: int, timeout: float = INGEST_TIMEOUT) -> int:
    deadline = time.monotonic() + timeout
    while True:
        frame = client.spans.get_spans_dataframe(project_identifier=project, limit=10_000)
        if len(frame) >= expected or time.monotonic() > deadline:
            return len(frame)
        time.sleep(0.5)


def test_mirroring_again_reuses_the_dataset(client: Any, mirrored: PhoenixDataset) -> None:
    again = mirror_dataset(
        client, GOLDEN, name=mirrored.name, project=mirrored.project, sessions=SESSIONS
    )
    assert (again.id, again.version_id, again.examples) == (
        mirrored.id,
        mirrored.version_id,
        mirrored.examples,
    )
    assert again.created == again.spans == 0


def test_mirroring_more_sessions_adds_a_version_with_the_new_turns(client: Any) -> None:
    name, project = f"grow-{TOKEN}", f"grow-{TOKEN}"
    first = mirror_dataset(client, GOLDEN, name=name, project=project, sessions=SESSIONS[:1])
    second = mirror_dataset(client, GOLDEN, name=name, project=project, sessions=SESSIONS[:2])
    assert second.id == first.id and second.version_id != first.version_id
    assert second.examples == len(_turns(SESSIONS[:2]))
    assert second.created == len(_turns(SESSIONS[1:2]))
    assert second.linked == second.examples  # kept examples keep their links

    older = client.datasets.get_dataset(dataset=name, version_id=first.version_id)
    assert len(older.examples) == len(_turns(SESSIONS[:1]))


def test_two_variants_are_two_experiments_with_a_run_per_example(
    client: Any, mirrored: PhoenixDataset, experiments: dict[str, PhoenixExperiment]
) -> None:
    import pandas as pd

    assert len({e.id for e in experiments.values()}) == 2
    listed = {e["id"] for e in client.experiments.list(dataset_id=mirrored.id)}
    assert listed >= {e.id for e in experiments.values()}
    for variant, experiment in experiments.items():
        assert experiment.runs == mirrored.examples and experiment.failed_runs == 0
        assert experiment.dataset_version_id == mirrored.version_id
        stored = client.experiments.get_experiment(experiment_id=experiment.id)
        assert len(stored["task_runs"]) == mirrored.examples
        names = [run.name for run in stored["evaluation_runs"]]
        assert sorted(set(names)) == sorted(EVALUATORS)
        assert all(names.count(n) == mirrored.examples for n in EVALUATORS)
        assert stored["experiment_metadata"]["variant"] == variant

        csv = client._client.get(f"v1/experiments/{experiment.id}/csv")
        csv.raise_for_status()
        table = pd.read_csv(io.StringIO(csv.text))
        assert len(table) == mirrored.examples
        for name in EVALUATORS:
            assert table[f"annotation_{name}_score"].notna().all()
            assert table[f"annotation_{name}_label"].notna().all()


def test_the_experiments_scores_are_plangates_evaluators_on_the_replays(
    experiments: dict[str, PhoenixExperiment],
) -> None:
    # The naive variant on the forgetful model leaves the multi-task turns unfinished.
    alyx, naive = experiments["alyx"], experiments["naive"]
    assert naive.passed["task_completion"] < alyx.passed["task_completion"]
    assert all(0.0 <= (s or 0.0) <= 1.0 for s in naive.scores.values())


def test_a_runs_trace_holds_the_replayed_turn(
    client: Any, experiments: dict[str, PhoenixExperiment]
) -> None:
    from phoenix.client.types.spans import SpanQuery

    experiment = experiments["naive"]
    assert experiment.project is not None
    query = SpanQuery().where("span_kind == 'AGENT'")
    deadline = time.monotonic() + INGEST_TIMEOUT  # as long as ingest may take under load
    while True:
        agents = client.spans.get_spans_dataframe(
            query=query, project_identifier=experiment.project, limit=1000
        )
        if len(agents) >= experiment.runs or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert len(agents) == experiment.runs
    assert agents["parent_id"].notna().all()  # under Phoenix's "Task: replay_naive" span
    assert all(s.startswith("observability-core:naive:") for s in agents["attributes.session.id"])


def test_an_unknown_dataset_variant_or_model_fails_before_any_run(client: Any) -> None:
    with pytest.raises(PhoenixDatasetError, match="no Phoenix dataset 'no-such-dataset' at http"):
        run_experiment(client, "no-such-dataset", GOLDEN, "alyx", model="cassette")
    with pytest.raises(ConfigError, match="unknown variant 'no-such-variant'"):
        run_experiment(client, "no-such-dataset", GOLDEN, "no-such-variant", model="cassette")
    with pytest.raises(ConfigError, match="unknown simulated model 'nope'"):
        run_experiment(client, "no-such-dataset", GOLDEN, "alyx", model="sim:nope")


def test_the_commands_mirror_and_experiment(
    phoenix: PhoenixServer, capsys: pytest.CaptureFixture[str]
) -> None:
    name = f"cli-{TOKEN}"
    common = [str(GOLDEN), "--phoenix-url", phoenix.url, "--name", name, "--session", "obs-001"]
    assert main(["phoenix", "dataset", *common, "--phoenix-project", f"cli-{TOKEN}"]) == 0
    out = capsys.readouterr().out
    assert f"{name}: 2 examples (2 new, 2 linked" in out

    code = main(
        ["phoenix", "experiment", *common, "--variant", "alyx", "--model", "cassette",
         "--evaluator", "task_completion"]
    )  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0
    assert "alyx · cassette: 2 runs, 0 failed" in out
    assert f"compare: {phoenix.url}/datasets/" in out
