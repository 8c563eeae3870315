"""Paused and interrupted runs from the command line: runs, plan, resume."""

from __future__ import annotations

import json
from pathlib import Path

from tests.helpers import plangate

REQUEST = "Sort the LLM spans by latency, identify the bottlenecks, and write a report with suggested improvements."


def test_pause_list_show_approve(tmp_path: Path) -> None:
    store = str(tmp_path / "runs.db")
    done = plangate(
        "run", REQUEST, "--variant", "flux-review", "--store", store, "--session", "r1", "--json"
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["stop_reason"] == "awaiting_approval"
    assert "paused for plan approval: `plangate plan r1 --store" in done.stderr

    listed = plangate("runs", "--store", store)
    assert listed.stdout.split()[:3] == ["r1", "awaiting_approval", "flux-review"]
    shown = plangate("plan", "r1", "--store", store, "--json")
    assert [s["name"] for s in json.loads(shown.stdout)["proposed"]] == [
        "sort-llm-latency",
        "find-bottlenecks",
        "write-report",
    ]

    finished = plangate("resume", "r1", "--store", store, "--approve", "--json")
    assert finished.returncode == 0, finished.stderr
    result = json.loads(finished.stdout)
    assert result["stop_reason"] == "finished"
    assert [i["status"] for i in result["plan"]] == ["completed"] * 3
    assert "idle" in plangate("runs", "--store", store).stdout


def test_edit_the_plan_from_a_file_and_reject(tmp_path: Path) -> None:
    store = str(tmp_path / "runs.db")
    for session in ("edit", "no"):
        assert (
            plangate(
                "run", REQUEST, "--variant", "flux-review", "--store", store, "--session", session
            ).returncode
            == 0
        )
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"steps": [
        {"name": "sort-llm-latency", "description": "Sort the LLM spans by latency"},
        {"name": "write-report", "description": "Write a latency report with suggested improvements", "depends_on": ["sort-llm-latency"]},
    ]}))  # fmt: skip
    edited = plangate("resume", "edit", "--store", store, "--plan", str(plan), "--json")
    assert [i["id"] for i in json.loads(edited.stdout)["plan"]] == [
        "sort-llm-latency",
        "write-report",
    ]

    rejected = plangate(
        "resume", "no", "--store", store, "--reject", "--reason", "split the report", "--json"
    )
    assert (
        json.loads(rejected.stdout)["stop_reason"] == "awaiting_approval"
    )  # the model planned again


def test_mistakes_exit_2(tmp_path: Path) -> None:
    store = str(tmp_path / "runs.db")
    missing = plangate("runs", "--store", store)
    assert missing.returncode == 2 and "no session store at" in missing.stderr
    assert plangate("run", "Say hi", "--store", store, "--session", "idle").returncode == 0
    unknown = plangate("resume", "ghost", "--store", store)
    assert (
        unknown.returncode == 2
        and "no saved session 'ghost'" in unknown.stderr
        and "idle" in unknown.stderr
    )
    nothing = plangate("resume", "idle", "--store", store, "--approve")
    assert nothing.returncode == 2 and "has no plan awaiting approval" in nothing.stderr
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    broken = plangate("resume", "idle", "--store", store, "--plan", str(bad))
    assert broken.returncode == 2 and "not valid JSON" in broken.stderr
    for done in (missing, unknown, nothing, broken):
        assert "Traceback" not in done.stderr
