"""The pytest plugin: `pytest --plangate GATE.toml` runs the gate's golden cases as test items."""

from __future__ import annotations

import fnmatch
import glob
import json
import subprocess
import sys
from pathlib import Path

import pytest

from plangate.ci._pytest_plugin import ItemFailed, check_case
from plangate.ci.gate._verdict import CaseResult
from tests.conftest import REPO

pytest_plugins = ["pytester"]

DATASET = REPO / "datasets" / "observability-core"
# Counts from `plangate gate` on the same file: of 6 turns x 2 evaluators, task_completion
# regresses on obs-008 turn 0 and obs-009 turn 0, and its pass rate (4 of 6) is under 0.8.
REGRESSING = """
[gate]
repeats = 2
[[datasets]]
path = "{dataset}"
sessions = ["obs-001", "obs-008", "obs-009"]
[baseline]
variant = "alyx"
model = "sim:forgetful"
tools = "live"
[candidate]
variant = "todo-basic"
model = "sim:forgetful"
tools = "live"
[evaluators.task_completion]
min_pass_rate = 0.8
[evaluators.tool_call_loops]
"""
IDENTICAL = """
[gate]
repeats = 2
[[datasets]]
path = "{dataset}"
sessions = ["obs-001", "obs-008"]
[baseline]
variant = "alyx"
model = "sim:diligent"
tools = "live"
[candidate]
variant = "alyx"
model = "sim:diligent"
tools = "live"
[evaluators.task_completion]
[evaluators.tool_call_loops]
"""


def write_gate(pytester: pytest.Pytester, text: str, dataset: Path = DATASET) -> Path:
    path = pytester.path / "gate.toml"
    path.write_text(text.format(dataset=dataset), encoding="utf-8")
    return path


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    """pytest in a subprocess, as a user runs it, without the plugins the gate does not need.

    Importing hypothesis alone takes seconds.
    """
    unrelated = ("hypothesispytest", "anyio", "asyncio", "cacheprovider")
    return pytester.runpytest_subprocess(*(f"-pno:{name}" for name in unrelated), *args)


def test_a_regression_fails_its_cases_and_the_verdict_with_the_explanation(
    pytester: pytest.Pytester,
) -> None:
    write_gate(pytester, REGRESSING)
    result = run(pytester, "--plangate", "gate.toml", "--plangate-report", "out")
    result.assert_outcomes(failed=3, passed=11)
    # Each failure is the evaluator's explanation under the item's id, and nothing else: no
    # traceback between one failure and the next.
    result.stdout.fnmatch_lines(
        [
            "*_ observability-core/obs-008/turn-0::task_completion _*",
            glob.escape(
                "regressed (baseline ✓✓ + noise floor ✓✓ → candidate ✗✗): 1 plan item(s) left "
                "open: [ ] 3 'Write a latency report with suggested improvements' (pending)"
            ),
            "*_ observability-core/obs-009/turn-0::task_completion _*",
            "regressed (baseline ✓✓ + noise floor ✓✓ → candidate ✗✗): 1 plan item(s) left open: *",
            "*_ verdict[[]task_completion[]] _*",
            "task_completion fails the gate: pass rate 66.7% is below the minimum 80.0%",
            "*= plangate =*",
            "plangate gate: REGRESSION (gate.toml: all 6 cases, 2 repeats per side)",
            "  ✗ task_completion: pass rate 66.7% is below the minimum 80.0%",
            "  ✓ tool_call_loops: 0 regressed, 0 improved, p = 1; *",
            "reports: */out/verdict.json, *",
        ],
        consecutive=True,
    )
    verdict = json.loads((pytester.path / "out" / "verdict.json").read_text(encoding="utf-8"))
    regressed = [c for c in verdict["cases"] if c["status"] == "regressed"]
    assert [(c["session_id"], c["turn_index"]) for c in regressed] == [
        ("obs-008", 0),
        ("obs-009", 0),
    ]


def test_the_baseline_against_itself_passes_every_item(pytester: pytest.Pytester) -> None:
    write_gate(pytester, IDENTICAL)
    result = run(
        pytester, "--plangate", "gate.toml", "--plangate-repeats", "1", "--plangate-report", "out"
    )
    # 2 sessions, 4 turns, 2 evaluators: 8 case items, then 2 verdicts.
    result.assert_outcomes(passed=10)
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["plangate gate: PASS (gate.toml: all 4 cases, 1 repeat per side)"])
    assert json.loads((pytester.path / "out" / "verdict.json").read_text())["repeats"] == 1


def test_k_selects_by_session_and_evaluator_and_the_verdict_is_the_full_gates(
    pytester: pytest.Pytester,
) -> None:
    write_gate(pytester, REGRESSING)
    result = run(
        pytester, "--plangate", "gate.toml", "-k", "obs-008 and task_completion or verdict", "-rA"
    )
    result.assert_outcomes(failed=2, passed=2, deselected=10)
    result.stdout.fnmatch_lines(
        [
            "PASSED gate.toml::observability-core/obs-008/turn-1::task_completion",
            "PASSED gate.toml::verdict[[]tool_call_loops[]]",
            "FAILED gate.toml::observability-core/obs-008/turn-0::task_completion - regres*",
            "FAILED gate.toml::verdict[[]task_completion[]] - task_completion fails the gate*",
        ],
    )
    # The verdict is the whole gate's, whatever -k selected: its seeds depend on every case.
    result.stdout.fnmatch_lines(["plangate gate: REGRESSION (gate.toml: all 6 cases, *)"])


@pytest.mark.parametrize(
    ("text", "args", "needle"),
    [
        (
            REGRESSING.replace("repeats = 2", "repeat = 2"),
            (),
            "unknown key 'gate.repeat'; allowed: alpha, budget_tokens, budget_usd, jobs, max_errors, model_deadline, model_retries, model_timeout, noise_floor, price_as, repeats, seed",
        ),
        (REGRESSING, ("--plangate-repeats", "0"), "--plangate-repeats must be 1 or more, not 0"),
    ],
)
def test_a_bad_gate_is_a_usage_error_naming_the_key(
    pytester: pytest.Pytester, text: str, args: tuple[str, ...], needle: str
) -> None:
    path = write_gate(pytester, text)
    result = run(pytester, "--plangate", "gate.toml", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert needle in result.stderr.str()
    assert "Traceback" not in result.stderr.str() + result.stdout.str()
    if not args:
        assert str(path) in result.stderr.str()


def test_a_missing_dataset_is_a_usage_error_naming_it(pytester: pytest.Pytester) -> None:
    write_gate(pytester, REGRESSING, dataset=pytester.path / "nowhere")
    result = run(pytester, "--plangate", "gate.toml")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [f"ERROR: --plangate: {pytester.path / 'nowhere'}: no such folder*"]
    )


def test_a_gate_that_cannot_run_fails_every_item_with_the_reason(
    pytester: pytest.Pytester,
) -> None:
    # The file is fine; the candidate's model has no API key (the tests clear it): the gate
    # fails when it runs, not when it loads.
    candidate = 'variant = "todo-basic"\nmodel = "sim:forgetful"'
    write_gate(pytester, REGRESSING.replace(candidate, 'variant = "alyx"\nmodel = "openai:m"'))
    result = run(pytester, "--plangate", "gate.toml")
    result.assert_outcomes(failed=14)
    reason = "the gate could not run: no API key for model 'm' at *"
    assert sum(fnmatch.fnmatch(line, reason) for line in result.stdout.lines) == 14
    result.stdout.fnmatch_lines(["*= plangate =*", "plangate gate: could not run: no API key*"])
    assert "Traceback" not in result.stdout.str()


def test_an_unknown_variant_is_a_usage_error(pytester: pytest.Pytester) -> None:
    write_gate(pytester, REGRESSING.replace('variant = "todo-basic"', 'variant = "nope"'))
    result = run(pytester, "--plangate", "gate.toml")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*candidate.variant: unknown variant 'nope'; choose one of: *"])


def test_without_the_option_the_plugin_changes_nothing(pytester: pytest.Pytester) -> None:
    write_gate(pytester, REGRESSING)
    pytester.makepyfile(test_plain="def test_plain():\n    assert True\n")
    result = run(pytester)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["plugins: *plangate-*", "collected 1 item"])
    assert "plangate:" not in result.stdout.str() and "= plangate =" not in result.stdout.str()


def case(status: str) -> CaseResult:
    baseline, candidate = {
        "pass": ((True, True), (True, True)),
        "improved": ((False, False), (True, True)),
        "fail": ((False, False), (False, False)),
        "regressed": ((True, True), (False, False)),
        "flaky": ((True, True), (True, False)),
        "below_minimum": ((True, True), (True, False)),
    }[status]
    result = CaseResult(
        dataset="d",
        session_id="s-1",
        turn_index=0,
        evaluator="task_completion",
        baseline=baseline,
        candidate=candidate,
        explanation="why",
        min_pass_rate=1.0 if status == "below_minimum" else None,
    )
    assert result.status == status
    return result


@pytest.mark.parametrize("status", ["pass", "improved", "fail"])
def test_cases_without_a_regression_pass(status: str) -> None:
    check_case(case(status))


@pytest.mark.parametrize(
    ("status", "message"),
    [
        ("regressed", "regressed (baseline ✓✓ → candidate ✗✗): why"),
        (
            "below_minimum",
            "below the case's minimum pass rate 100% (baseline ✓✓ → candidate ✓✗): why",
        ),
    ],
)
def test_regressed_cases_fail_with_outcomes_and_explanation(status: str, message: str) -> None:
    with pytest.raises(ItemFailed) as raised:
        check_case(case(status))
    assert str(raised.value) == message


def test_a_flaky_case_is_skipped_not_failed() -> None:
    with pytest.raises(pytest.skip.Exception, match=r"flaky \(baseline ✓✓ → candidate ✓✗\): why"):
        check_case(case("flaky"))


HEAVY = (
    "pandas",
    "pyarrow",
    "numpy",
    "plangate.ci.gate._gate",
    "plangate.ci.gate._gate_file",
    "plangate.ci.phoenix._export",
    "plangate.replay",
    "plangate.evaluators",
)


def imported_by_plugin(code: str) -> list[str]:
    """The heavy modules loaded in a fresh interpreter running `code`, then the plugin."""
    script = f"""
import sys
{code}
before = set(sys.modules)
import plangate.ci._pytest_plugin
print(" ".join(sorted(m for m in {HEAVY!r} if m in sys.modules and m not in before)))
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60
    )
    return done.stdout.split()


def test_the_heavy_modules_are_real_modules() -> None:
    # A name that no longer exists would make the checks below pass whatever the plugin loads.
    import importlib.util

    assert [m for m in HEAVY if importlib.util.find_spec(m) is None] == []


def test_importing_the_plugin_loads_no_data_stack() -> None:
    # pytest imports the plugin in every run of anyone who installs plangate.
    assert imported_by_plugin("import plangate.ci") == []
    assert not {"pandas", "pyarrow"} & set(imported_by_plugin(""))


def test_importing_the_plugin_loads_not_even_numpy() -> None:
    assert imported_by_plugin("") == []
