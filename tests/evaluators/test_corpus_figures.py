"""The publishers' own figures, reproduced from their trajectories through importer and evaluator."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from plangate.evaluators import evaluate, repeat_scores
from plangate.replay import import_traces


def test_tau_bench_pass_hat_k_matches_the_published_table(corpus: Path) -> None:
    table = import_traces("tau-bench", [corpus / "tau-bench" / "gpt-4o-airline.json"])
    scores = evaluate(table, names=["task_completion"])
    results = {r.k: r for r in repeat_scores(scores)}
    # tau-bench README, row "TC (gpt-4o)", airline.
    assert [round(results[k].pass_hat_k or -1, 3) for k in (1, 2, 3, 4)] == [
        0.420,
        0.273,
        0.220,
        0.200,
    ]
    assert all(results[k].tasks == 50 for k in (1, 2, 3, 4))


@pytest.mark.parametrize(
    ("results", "submission"),
    [
        (
            "claude-sonnet-4-5_aide-platform_airline.json",
            "claude-sonnet-4-5_aide-platform_submission.json",
        ),
        (
            "button-claude-opus-4-6_distyl_airline.json",
            "button-claude-opus-4-6_distyl_submission.json",
        ),
        ("toolorchestra_airline_gpt-5_1trial.json", "toolorchestra_submission.json"),
    ],
)
def test_tau2_mean_task_completion_is_the_leaderboard_pass_1(
    corpus: Path, results: str, submission: str
) -> None:
    folder = corpus / "tau2-bench"
    table = import_traces("tau2", [folder / results])
    scores = evaluate(table, names=["task_completion"]).to_pandas()
    published = json.loads((folder / submission).read_text())["results"]["airline"]["pass_1"]
    assert round(100 * scores["score"].mean(), 1) == published
    assert round(100 * scores["passed"].mean(), 1) == published


def test_swe_agent_repeated_submit_is_found(corpus: Path) -> None:
    path = corpus / "swe-agent" / "trajectories" / "demonstrations" / "ctf" / "crypto" / "eps.traj"
    table = import_traces("swe-agent", [path])
    row = evaluate(table, names=["tool_call_loops"]).to_pylist()[0]
    details = json.loads(row["details"])
    assert row["passed"] is False and row["label"] == "loop"
    assert details["longest_run"] == 4
    assert details["loop_call"].startswith("submit ")
    assert "repeated 4 times in a row from call 10 of 14" in row["explanation"]


def test_clean_tau_bench_file_has_no_loop_of_three(corpus: Path) -> None:
    table = import_traces("tau-bench", [corpus / "tau-bench" / "gpt-4o-airline.json"])
    scores = evaluate(table, names=["tool_call_loops"]).to_pandas()
    longest = scores["details"].map(lambda d: json.loads(d).get("longest_run", 0))
    assert len(scores) == 200
    assert longest.max() < 3
    assert "loop" not in set(scores["label"])
    # What it does hold: two conversations where the agent goes back and forth between two
    # identical calls (A,B,A,B); those are reported as cycles, with where they start.
    cycles = scores[scores["label"] == "cycle"].set_index("session_id")["explanation"]
    assert sorted(cycles.index) == ["tau-bench/23/3", "tau-bench/9/2"]
    assert "two calls alternate for 7 calls from call 17" in cycles["tau-bench/9/2"]


def test_every_corpus_trajectory_imports_and_scores(corpus: Path) -> None:
    tables = [
        import_traces("tau-bench", [corpus / "tau-bench" / "gpt-4o-airline.json"]),
        import_traces(
            "tau2",
            sorted((corpus / "tau2-bench").glob("*_airline*.json"))
            + sorted((corpus / "tau2-bench").glob("*telecom*.json")),
        ),
        import_traces("swe-agent", sorted((corpus / "swe-agent").rglob("*.traj"))),
    ]
    for table in tables:
        scores = evaluate(table)
        assert set(scores["evaluator"].to_pylist()) == {
            "task_completion",
            "plan_adherence",
            "tool_call_loops",
            "latency",
            "trajectory_match",
            "tokens",
            "cost",
            "judge",
        }
