"""The CI gate: gate files, verdicts with real statistics, flaky cases, reports, exit codes."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from plangate.ci.gate._cases import gate_cases
from plangate.ci.gate._gate import run_gate
from plangate.ci.gate._gate_file import GateFileError, load_gate
from plangate.ci.gate._reports import junit, markdown, write_reports
from tests.conftest import REPO
from tests.helpers import plangate

DATASET = REPO / "datasets" / "observability-core"
SESSIONS = (
    '["obs-008", "obs-009", "obs-010", "obs-013", "obs-017", "obs-020", "obs-001", "obs-004"]'
)


def gate_file(
    tmp_path: Path,
    baseline: str,
    candidate: str,
    *,
    repeats: int = 2,
    extra: str = "",
    sessions: str = SESSIONS,
) -> Path:
    path = tmp_path / "gate.toml"
    path.write_text(
        f"""
[gate]
repeats = {repeats}
[[datasets]]
path = "{DATASET}"
sessions = {sessions}
[baseline]
{baseline}
[candidate]
{candidate}
[evaluators.task_completion]
{extra}
[evaluators.tool_call_loops]
""",
        encoding="utf-8",
    )
    return path


def test_a_real_regression_fails_with_evidence_and_reports(tmp_path: Path) -> None:
    path = gate_file(
        tmp_path,
        'variant = "alyx"\nmodel = "sim:forgetful"\ntools = "live"',
        'variant = "naive"\nmodel = "sim:forgetful"\ntools = "live"',
    )
    verdict = asyncio.run(run_gate(load_gate(path)))
    assert not verdict.passed and verdict.exit_code == 1
    completion = next(v for v in verdict.evaluators if v.evaluator == "task_completion")
    assert completion.failed and completion.regressed >= 5 and completion.p_value < 0.05
    difference = completion.score_difference
    assert difference is not None and difference.mean < 0 and difference.high < 0
    regressed = [
        c for c in verdict.cases if c.status == "regressed" and c.evaluator == "task_completion"
    ]
    assert all(c.baseline == (True, True) and c.candidate == (False, False) for c in regressed)

    suites = ET.fromstring(junit(verdict))
    suite = next(s for s in suites if s.get("name") == "task_completion")
    assert suite.get("tests") == str(
        sum(1 for c in verdict.cases if c.evaluator == "task_completion")
    )
    assert int(suite.get("failures") or 0) == completion.regressed
    failures = [tc.find("failure") for tc in suite if tc.find("failure") is not None]
    assert len(failures) == completion.regressed
    assert all(f is not None and f.get("message") for f in failures)

    summary = markdown(verdict)
    assert summary.startswith("❌ **plangate: regression**")
    assert "Δ score (95% CI)" in summary
    assert "**Regressed cases**" in summary
    files = write_reports(verdict, tmp_path / "out")
    assert json.loads(files["json"].read_text())["exit_code"] == 1


def test_the_baseline_against_itself_passes(tmp_path: Path) -> None:
    side = 'variant = "alyx"\nmodel = "sim:diligent"\ntools = "live"'
    verdict = asyncio.run(run_gate(load_gate(gate_file(tmp_path, side, side))))
    assert verdict.passed
    assert all(v.regressed == 0 and v.flaky == 0 for v in verdict.evaluators)


def test_a_flaky_case_is_reported_as_flaky_and_does_not_fail_the_gate(tmp_path: Path) -> None:
    # Only obs-008 has a plan whose last item the coin can leave open; the others are one-step.
    path = gate_file(
        tmp_path,
        'variant = "todo-basic"\nmodel = "sim:diligent"\ntools = "live"',
        'variant = "todo-basic"\nmodel = "sim:flaky"\ntools = "live"',
        repeats=4,
        sessions='["obs-001", "obs-002", "obs-004", "obs-008"]',
    )
    verdict = asyncio.run(run_gate(load_gate(path)))
    completion = next(v for v in verdict.evaluators if v.evaluator == "task_completion")
    assert completion.flaky == 1 and completion.regressed == 1
    assert completion.p_value == 0.5 and not completion.failed
    assert verdict.passed
    flaky = [c for c in verdict.cases if c.status == "flaky"]
    assert any(len(set(c.candidate)) == 2 for c in flaky)
    assert "**Flaky cases**" in markdown(verdict)
    suite = next(s for s in ET.fromstring(junit(verdict)) if s.get("name") == "task_completion")
    assert int(suite.get("skipped") or 0) == completion.flaky


def test_min_pass_rate_fails_the_gate_without_a_regression(tmp_path: Path) -> None:
    side = 'variant = "naive"\nmodel = "sim:forgetful"\ntools = "live"'
    verdict = asyncio.run(
        run_gate(load_gate(gate_file(tmp_path, side, side, extra="min_pass_rate = 0.99")))
    )
    completion = next(v for v in verdict.evaluators if v.evaluator == "task_completion")
    assert completion.regressed == 0 and completion.failed
    assert "below the minimum 99.0%" in completion.reason


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        (
            "[gate]\nrepeat = 2\n",
            "unknown key 'gate.repeat'; allowed: alpha, budget_tokens, budget_usd, jobs, max_errors, model_deadline, model_retries, model_timeout, noise_floor, price_as, repeats, seed",
        ),
        (
            "[gate]\nalpha = 2\n[[datasets]]\npath = 'x'\n[baseline]\nvariant = 'alyx'\n[candidate]\nvariant = 'naive'\n",
            "gate.alpha must be between 0 and 1",
        ),
        (
            "[[datasets]]\npath = 'x'\n[baseline]\nvariant = 'alyx'\nmodel = 'gpt'\n[candidate]\nvariant = 'naive'\n",
            "baseline.model is 'gpt'; allowed: cassette, cassette-lenient",
        ),
        (
            "[baseline]\nvariant = 'alyx'\n[candidate]\nvariant = 'naive'\n",
            "[[datasets]] is missing",
        ),
        ("[gate]\nnoise_floor = 1\n", "gate.noise_floor must be true or false"),
        (
            "[[datasets]]\npath = 'x'\n[baseline]\nvariant = 'alyx'\n[candidate]\nvariant = 'nope'\n",
            "candidate.variant: unknown variant 'nope'; choose one of: alyx",
        ),
        (
            "[[datasets]]\npath = 'x'\n[baseline]\nvariant = 'alyx'\nscores = 's.parquet'\n"
            "[candidate]\nvariant = 'naive'\n",
            "baseline has both variant and scores",
        ),
        (
            "[[datasets]]\npath = 'x'\n[baseline]\nvariant = 'alyx'\n[candidate]\nvariant = 'naive'\n"
            "[evaluators.task_completion]\ncases = { 'obs-1:x' = 1.0 }\n",
            "evaluators.task_completion.cases key 'obs-1:x' must be SESSION or SESSION:TURN",
        ),
        (
            "[[datasets]]\npath = 'x'\n[baseline]\nvariant = 'alyx'\n[candidate]\nvariant = 'naive'\n"
            "[evaluators.task_completion]\ncases = { 'obs-1' = 2 }\n",
            "evaluators.task_completion.cases.obs-1 must be a pass rate in [0, 1]",
        ),
        (
            "[[datasets]]\npath = 'x'\n[baseline]\nvariant = 'alyx'\n[candidate]\nvariant = 'naive'\n[evaluators.speed]\n",
            "unknown key 'evaluators.speed'",
        ),
        ("[[datasets]]\npath = 'x'\n[candidate]\nvariant = 'naive'\n", "[baseline] is missing"),
        ("[[datasets]]\npath = 'x'\nturns = ['a']\n", "datasets[0].turns must be a list of turn"),
        ("[[datasets]]\npath = 'x'\nturns = 1\n", "datasets[0].turns must be a list of turn"),
        ("[[datasets]]\npath = 'x'\nturns = [-1]\n", "datasets[0].turns must be a list of turn"),
        ("[[datasets]]\npath = 'x'\nsessions = 'a'\n", "datasets[0].sessions must be a list"),
        ("datasets = 'x'\n", "datasets must be [[datasets]] tables"),
        (
            "[[datasets]]\npath = 'a/gold'\n[[datasets]]\npath = 'b/gold'\n",
            "are both named 'gold'; a gate knows a dataset by its folder's name",
        ),
        (
            "[[datasets]]\npath = 'x'\n[baseline]\nvariant = 'alyx'\n[candidate]\nvariant = 'naive'\n"
            "[evaluators.tool_call_loops]\nparams = 5\n",
            "evaluators.tool_call_loops.params must be a table",
        ),
    ],
)
def test_gate_file_mistakes_name_the_key(tmp_path: Path, text: str, needle: str) -> None:
    path = tmp_path / "g.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(GateFileError) as raised:
        load_gate(path)
    assert needle in str(raised.value) and str(path) in str(raised.value)


@pytest.mark.parametrize(
    ("selection", "needle"),
    [
        ('sessions = ["obs-008", "obs-0099"]', "datasets[0].sessions names 'obs-0099', which is"),
        ('sessions = ["obs-008"]\nturns = [0, 7]', "datasets[0].turns names 7, which no selected"),
    ],
)
def test_a_selection_of_what_the_dataset_lacks_is_refused(
    tmp_path: Path, selection: str, needle: str
) -> None:
    """A typo would otherwise leave the gate deciding on fewer cases than the file says."""
    path = tmp_path / "gate.toml"
    side = 'variant = "naive"\nmodel = "sim:forgetful"\ntools = "live"'
    path.write_text(
        f'[[datasets]]\npath = "{DATASET}"\n{selection}\n[baseline]\n{side}\n[candidate]\n{side}\n'
    )
    with pytest.raises(GateFileError) as raised:
        gate_cases(load_gate(path))
    assert needle in str(raised.value)


def test_exit_codes_of_the_real_command(tmp_path: Path) -> None:
    same = 'variant = "alyx"\nmodel = "sim:diligent"\ntools = "live"'
    passing = plangate("gate", str(gate_file(tmp_path, same, same)), "-o", str(tmp_path / "pass"))
    assert passing.returncode == 0, passing.stdout + passing.stderr
    assert passing.stdout.startswith("plangate gate: PASS")

    (tmp_path / "b").mkdir()
    worse = gate_file(
        tmp_path / "b",
        'variant = "alyx"\nmodel = "sim:forgetful"\ntools = "live"',
        'variant = "naive"\nmodel = "sim:forgetful"\ntools = "live"',
    )
    failing = plangate("gate", str(worse), "-o", str(tmp_path / "fail"))
    assert failing.returncode == 1
    assert "REGRESSION" in failing.stdout and "regressed:" in failing.stdout
    assert ET.parse(tmp_path / "fail" / "junit.xml").getroot().tag == "testsuites"

    bad = tmp_path / "bad.toml"
    bad.write_text("[gate\n", encoding="utf-8")
    unusable = plangate("gate", str(bad))
    assert (
        unusable.returncode == 2
        and "not valid TOML" in unusable.stderr
        and "Traceback" not in unusable.stderr
    )
    missing = plangate("gate", str(tmp_path / "none.toml"))
    assert missing.returncode == 2 and "cannot read gate file" in missing.stderr


def test_the_shipped_gate_file_loads() -> None:
    gate = load_gate(REPO / "ci" / "gate.toml")
    assert [d.path.name for d in gate.datasets] == ["observability-core", "support-desk"]
    assert all(d.path.is_dir() for d in gate.datasets)
    assert gate.repeats == 3 and set(gate.evaluators) == {
        "task_completion",
        "tool_call_loops",
        "plan_adherence",
    }


def test_latency_gets_a_paired_ratio_interval(tmp_path: Path) -> None:
    from plangate.ci.gate._gate_file import DatasetSelection, EvaluatorRule, GateFile, Side

    side = Side(variant="alyx", model="sim:diligent", tools="live")
    gate = GateFile(
        path=tmp_path / "g.toml",
        datasets=(DatasetSelection(path=DATASET, sessions=("obs-008", "obs-009", "obs-010")),),
        baseline=side,
        candidate=side,
        evaluators={"latency": EvaluatorRule()},
        repeats=1,
    )
    verdict = asyncio.run(run_gate(gate))
    latency = verdict.evaluators[0]
    # 3 sessions, 7 turns: one interval pair per turn.
    assert latency.ratio is not None and latency.ratio.n == latency.cases == 7
    assert latency.ratio.low <= latency.ratio.mean <= latency.ratio.high
    from plangate.ci import verdict_json

    assert verdict_json(verdict)["evaluators"][0]["ratio"]["n"] == 7
    # No case has a time budget: a time is a measurement, not a pass, so there is no verdict
    # on latency unless the gate file allows an evaluator with no applicable case.
    assert latency.not_applicable == 7 and verdict.exit_code == 2
    assert "evaluator 'latency' has no applicable case on the baseline" in str(verdict.undecided)
    allowed = dataclasses.replace(
        gate, evaluators={"latency": EvaluatorRule(allow_not_applicable=True)}
    )
    assert asyncio.run(run_gate(allowed)).exit_code == 0


def test_a_stored_baseline_gives_the_verdict_of_replaying_it(tmp_path: Path) -> None:
    from plangate.ci.gate import gate_with_reports

    replayed = gate_file(
        tmp_path,
        'variant = "alyx"\nmodel = "sim:forgetful"\ntools = "live"',
        'variant = "naive"\nmodel = "sim:forgetful"\ntools = "live"',
    )
    first, files = gate_with_reports(replayed, tmp_path / "main")
    stored = files["baseline scores"]
    assert stored == tmp_path / "main" / "scores" / "baseline.parquet"
    import pyarrow.parquet as pq

    # With the noise floor on, the baseline holds 2k trials: k paired runs, then k fresh ones.
    assert sorted(set(pq.read_table(stored)["trial"].to_pylist())) == [0, 1, 2, 3]

    (tmp_path / "pr").mkdir()
    from_scores = gate_file(
        tmp_path / "pr",
        f'scores = "{stored}"',
        'variant = "naive"\nmodel = "sim:forgetful"\ntools = "live"',
    )
    second = asyncio.run(run_gate(load_gate(from_scores)))
    assert not first.passed and not second.passed
    assert second.baseline == str(stored)
    for a, b in zip(first.evaluators, second.evaluators, strict=True):
        assert (a.regressed, a.improved, a.p_value, a.noise) == (
            b.regressed,
            b.improved,
            b.p_value,
            b.noise,
        )


def test_a_stored_table_must_cover_every_case(tmp_path: Path) -> None:
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from plangate.ci.gate import gate_with_reports

    side = 'variant = "alyx"\nmodel = "sim:diligent"\ntools = "live"'
    _, files = gate_with_reports(gate_file(tmp_path, side, side, repeats=1), tmp_path / "out")
    table = pq.read_table(files["baseline scores"])
    partial = tmp_path / "partial.parquet"
    pq.write_table(table.filter(pc.not_equal(table["session_id"], "obs-004")), partial)
    (tmp_path / "b").mkdir()
    with pytest.raises(
        GateFileError, match=r"partial.parquet: no '\w+' score for session 'obs-004'"
    ):
        asyncio.run(run_gate(load_gate(gate_file(tmp_path / "b", f'scores = "{partial}"', side))))

    one_trial = tmp_path / "one.parquet"
    pq.write_table(table.filter(pc.equal(table["trial"], 0)), one_trial)
    (tmp_path / "c").mkdir()
    path = gate_file(tmp_path / "c", f'scores = "{one_trial}"', side, repeats=1)
    with pytest.raises(GateFileError, match="noise floor needs an even number"):
        asyncio.run(run_gate(load_gate(path)))
    path.write_text(
        path.read_text(encoding="utf-8").replace("[gate]", "[gate]\nnoise_floor = false"),
        encoding="utf-8",
    )
    assert asyncio.run(run_gate(load_gate(path))).passed


def test_a_case_below_its_own_minimum_fails_the_gate(tmp_path: Path) -> None:
    side = 'variant = "naive"\nmodel = "sim:forgetful"\ntools = "live"'
    path = gate_file(tmp_path, side, side, extra='cases = { "obs-008" = 1.0, "obs-001:0" = 1.0 }')
    verdict = asyncio.run(run_gate(load_gate(path)))
    completion = next(v for v in verdict.evaluators if v.evaluator == "task_completion")
    below = [c for c in verdict.cases if c.status == "below_minimum"]
    assert [(c.session_id, c.evaluator) for c in below] == [("obs-008", "task_completion")]
    assert completion.failed and completion.regressed == 0 and completion.below_minimum == 1
    assert "1 case(s) below their own minimum, e.g. obs-008 turn 0: 0% < 100%" in completion.reason
    suite = next(s for s in ET.fromstring(junit(verdict)) if s.get("name") == "task_completion")
    assert int(suite.get("failures") or 0) == 1

    unknown = gate_file(tmp_path, side, side, extra='cases = { "obs-999" = 1.0 }')
    with pytest.raises(GateFileError, match="cases names 'obs-999', which is not a case"):
        asyncio.run(run_gate(load_gate(unknown)))


def test_a_regression_must_beat_the_noise_floor(tmp_path: Path) -> None:
    from plangate.ci.gate._gate import _decide
    from plangate.ci.gate._gate_file import EvaluatorRule, GateFile, Side
    from plangate.ci.gate._verdict import CaseResult

    gate = GateFile(
        path=tmp_path / "g.toml",
        datasets=(),
        baseline=Side(variant="a"),
        candidate=Side(variant="b"),
        evaluators={"task_completion": EvaluatorRule()},
        repeats=1,
    )

    def case(n: int, candidate: bool, noise: bool) -> CaseResult:
        return CaseResult(
            dataset="d", session_id=f"s{n}", turn_index=0, evaluator="task_completion",
            baseline=(True,), candidate=(candidate,), noise=(noise,), explanation="",
        )  # fmt: skip

    # Six cases worse and none better: the sign test alone says p = 1/64.
    quiet = [case(n, candidate=n >= 6, noise=True) for n in range(12)]
    decided = _decide(gate, "task_completion", quiet)
    assert decided.regressed == 6 and decided.p_value == 1 / 64
    assert decided.failed and decided.noise is not None and decided.noise.regressed == 0

    # The same six, when the baseline does as badly against itself on six others: chance.
    noisy = [case(n, candidate=n >= 6, noise=n < 6) for n in range(12)]
    decided = _decide(gate, "task_completion", noisy)
    assert decided.noise is not None and decided.noise.regressed == 6
    assert decided.p_beyond_noise == pytest.approx(0.6128, abs=1e-4)
    assert not decided.failed and "not beyond it" in decided.reason
    assert "the baseline is unstable against itself" in decided.reason
