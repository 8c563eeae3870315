"""The real `plangate` command, run as a user would run it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import plangate

PLANGATE = [sys.executable, "-m", "plangate"]
DEMO_REQUEST = (
    "Sort the LLM spans by latency, identify the bottlenecks, and write a report with "
    "suggested improvements."
)


def test_run_json_reports_stop_reason_plan_calls_and_iterations() -> None:
    done = plangate("run", DEMO_REQUEST, "--variant", "alyx", "--model", "sim:diligent", "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["stop_reason"] == "finished"
    assert [item["status"] for item in data["plan"]] == ["completed"] * 3
    assert data["plan"][0]["text"] == "Sort the LLM spans by latency"
    names = [c["name"] for c in data["tool_calls"]]
    assert names[0] == "todo_write" and names[-1] == "finish"
    assert all(c["status"] == "ok" for c in data["tool_calls"])
    assert data["iterations"] == len(data["tool_calls"])


def test_run_looper_stops_on_the_loop_guard_in_the_support_domain() -> None:
    done = plangate(
        "run",
        "Look up the latest order of dana.whitfield@example.com and refund the damaged blender",
        "--model",
        "sim:looper",
        "--domain",
        "support",
        "--seed",
        "1",
        "--json",
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["stop_reason"] == "loop_guard"


def test_run_without_json_prints_a_readable_trajectory() -> None:
    done = plangate("run", DEMO_REQUEST, "--variant", "alyx", "--model", "sim:early-finisher")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert out.startswith(f"request: {DEMO_REQUEST}")
    assert "→ todo_write" in out
    assert "✗ finish" in out and "[gate_bounce at call" in out
    assert "stop: finished after" in out


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (
            ["--variant", "yolo"],
            "unknown variant 'yolo'; choose one of: alyx, alyx-context, flux, flux-review, harness-plan, naive, todo-basic",
        ),
        (["--model", "sim:lazy"], "unknown simulated model 'lazy'; choose one of: sim:diligent"),
        (["--model", "claude"], "unknown model 'claude'; use sim:NAME"),
        (
            ["--domain", "weather"],
            "unknown domain 'weather'; choose one of: observability, support",
        ),
        (["--model", "openai:gpt-4o-mini"], "PLANGATE_OPENAI_API_KEY"),
    ],
)
def test_bad_choices_exit_2_with_a_message_that_names_them(args: list[str], needle: str) -> None:
    done = plangate("run", "hello", *args)
    assert done.returncode == 2
    assert needle in done.stderr
    assert "Traceback" not in done.stderr


def test_malformed_variant_file_exits_2_naming_file_and_key(tmp_path: Path) -> None:
    bad = tmp_path / "mine.toml"
    bad.write_text('name = "mine"\n[guards]\nloop_gaurd = true\n', encoding="utf-8")
    done = plangate("run", "hello", "--variant", str(bad))
    assert done.returncode == 2
    assert (
        str(bad) in done.stderr
        and "'guards.loop_gaurd'" in done.stderr
        and "loop_guard" in done.stderr
    )
    assert "Traceback" not in done.stderr

    broken = tmp_path / "broken.toml"
    broken.write_text('name = "x"\n[plan\n', encoding="utf-8")
    done = plangate("run", "hello", "--variant", str(broken))
    assert done.returncode == 2 and "not valid TOML" in done.stderr and str(broken) in done.stderr


def test_custom_variant_file_runs(tmp_path: Path) -> None:
    mine = tmp_path / "strict.toml"
    mine.write_text(
        'name = "strict"\n[turn]\nmax_iterations = 3\niteration_warning = 0\n', encoding="utf-8"
    )
    done = plangate("run", DEMO_REQUEST, "--variant", str(mine), "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["stop_reason"] == "forced_finish"


def test_demo_prints_the_matrix_then_the_gate_verdict(tmp_path: Path) -> None:
    done = plangate("demo", "-o", str(tmp_path / "demo"))
    assert done.returncode == 0, done.stdout + done.stderr
    matrix, gate = done.stdout.split("The gate: plangate gate ci/gate.toml")
    for needle in ("observability", "support", "sim:forgetful", "harness-plan", "loop_guard"):
        assert needle in matrix
    assert matrix.count("✓") == 10 and "✗" not in matrix
    assert "plangate gate: REGRESSION" in gate and "alyx → todo-basic" in gate
    assert "✓ the gate catches the regression" in gate
    for name in ("verdict.json", "summary.md", "junit.xml", "report.html", "scores"):
        assert (tmp_path / "demo" / name).exists() and str(tmp_path / "demo" / name) in gate


def test_listings() -> None:
    assert "alyx" in plangate("variants").stdout
    assert "support" in plangate("domains").stdout
    assert "sim:announcer" in plangate("models").stdout


@pytest.mark.parametrize(("chosen", "expected"), [(None, "system"), ("mimalloc", "mimalloc")])
def test_the_command_allocates_arrow_memory_through_malloc_unless_told(
    chosen: str | None, expected: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ARROW_DEFAULT_MEMORY_POOL", raising=False)
    if chosen is not None:
        monkeypatch.setenv("ARROW_DEFAULT_MEMORY_POOL", chosen)
    for first in ("import pyarrow; ", ""):  # Arrow loaded before the command runs, or after
        script = (
            f"{first}from plangate.ci.cli import main; code = main(['variants']); "
            "import pyarrow; print(code, pyarrow.default_memory_pool().backend_name)"
        )
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
        assert done.stdout.split()[-2:] == ["0", expected], done.stderr
