"""A dead model endpoint is never a verdict: errored turns make the gate undecided (exit 2).

The candidate talks to a real local chat-completions endpoint over a socket, through the real
`openai` client; the endpoint answers HTTP 500 to every request, or, healthy, a real completion.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.chat_server import ChatServer, completion, error, tool_call
from tests.conftest import REPO
from tests.helpers import plangate

DATASET = REPO / "datasets" / "observability-core"
CASES = ("obs-008", "obs-009", "obs-010", "obs-013")  # their first turns: four cases


def write_gate(tmp_path: Path, *, max_errors: int = 0, settings: str = "") -> Path:
    path = tmp_path / "gate.toml"
    path.write_text(
        f"""
[gate]
repeats = 1
noise_floor = false
max_errors = {max_errors}
{settings}
[[datasets]]
path = "{DATASET}"
sessions = {json.dumps(list(CASES))}
turns = [0]
[baseline]
variant = "alyx"
model = "sim:diligent"
tools = "live"
[candidate]
variant = "alyx"
model = "openai:test-model"
tools = "live"
[evaluators.task_completion]
min_pass_rate = 0.8
""",
        encoding="utf-8",
    )
    return path


@pytest.fixture
def endpoint(monkeypatch: pytest.MonkeyPatch) -> ChatServer:
    server = ChatServer().start()
    monkeypatch.setenv("PLANGATE_OPENAI_BASE_URL", server.base_url)
    monkeypatch.setenv("PLANGATE_OPENAI_API_KEY", "sk-test-not-a-real-key")
    monkeypatch.setenv("PLANGATE_MODEL_RETRIES", "0")
    yield server  # type: ignore[misc]
    server.close()


def refuse(constant: str) -> None:
    raise AssertionError(f"{constant} is not JSON")


def test_a_candidate_endpoint_failing_every_turn_cannot_pass(
    tmp_path: Path, endpoint: ChatServer
) -> None:
    endpoint.enqueue(*[error(500, "upstream is down") for _ in CASES])
    out = tmp_path / "out"
    done = plangate("gate", str(write_gate(tmp_path)), "-o", str(out))
    assert done.returncode == 2, done.stdout + done.stderr
    assert "CANNOT DECIDE" in done.stdout
    assert "the candidate has 4 errored turn(s), more than gate.max_errors = 0" in done.stdout
    assert "HTTP 500" in done.stdout and "Traceback" not in done.stderr
    endpoint.assert_complete()
    # The reports are still written, and say why there is no verdict: in JSON any reader parses
    # (figures of no judged case are null, not NaN, which JSON has not).
    verdict = json.loads((out / "verdict.json").read_text(encoding="utf-8"), parse_constant=refuse)
    candidate = {v["candidate_pass_hat_k"] for v in verdict["evaluators"]}
    assert candidate == {None}
    assert (verdict["verdict"], verdict["exit_code"], verdict["passed"]) == (
        "cannot decide",
        2,
        False,
    )
    assert len(verdict["errors"]) == 4 and {e["side"] for e in verdict["errors"]} == {"candidate"}
    summary = (out / "summary.md").read_text(encoding="utf-8")
    assert "**Errored turns** (4, not judged)" in summary
    # No evaluator reads as passed, and no figure of no judged case as a number.
    assert "undecided" in done.stdout and "✓" not in done.stdout and "| pass:" not in summary
    assert "| undecided:" in summary
    said = done.stdout + summary
    found = re.search(r"\bnan\b", said)
    assert found is None, said[found.start() - 200 : found.end() + 40]
    suite = ET.fromstring((out / "junit.xml").read_text(encoding="utf-8")).find("testsuite")
    assert suite is not None and suite.get("errors") == "4" and suite.get("failures") == "0"


def test_errors_within_max_errors_are_left_out_and_the_rest_decides(
    tmp_path: Path, endpoint: ChatServer
) -> None:
    """With `max_errors`, errored turns are counted apart; the judged cases give the verdict."""
    finish = completion(tool_calls=[tool_call("finish", '{"summary": "done"}')])
    endpoint.enqueue(error(500), finish, finish, finish)
    out = tmp_path / "out"
    done = plangate("gate", str(write_gate(tmp_path, max_errors=1)), "-o", str(out))
    verdict = json.loads((out / "verdict.json").read_text(encoding="utf-8"))
    assert done.returncode == verdict["exit_code"] != 2, done.stdout + done.stderr
    assert len(verdict["errors"]) == 1
    completion_verdict = verdict["evaluators"][0]
    assert completion_verdict["errors"] == 1 and completion_verdict["cases"] == 4
    statuses = [c["status"] for c in verdict["cases"] if c["evaluator"] == "task_completion"]
    assert statuses.count("error") == 1


def test_a_healthy_endpoint_gets_a_verdict(tmp_path: Path, endpoint: ChatServer) -> None:
    """The same gate, the endpoint answering: a verdict (here a regression: it does no work)."""
    finish = completion(tool_calls=[tool_call("finish", '{"summary": "done"}')])
    endpoint.enqueue(*[finish for _ in CASES])
    out = tmp_path / "out"
    done = plangate("gate", str(write_gate(tmp_path)), "-o", str(out))
    verdict = json.loads((out / "verdict.json").read_text(encoding="utf-8"))
    assert verdict["errors"] == [] and verdict["undecided"] is None
    assert done.returncode == verdict["exit_code"] == 1, done.stdout + done.stderr
    reason = verdict["evaluators"][0]["reason"]
    assert "pass rate 0.0% is below the minimum 80.0%" in reason
    endpoint.assert_complete()


def test_reports_count_not_applicable_cases_and_junit_skips_them() -> None:
    from plangate.ci.gate._reports import junit, markdown, verdict_json
    from plangate.ci.gate._verdict import CaseResult, EvaluatorVerdict, Verdict

    judged = CaseResult(
        dataset="d", session_id="s1", turn_index=0, evaluator="plan_adherence",
        baseline=(True,), candidate=(True,), explanation="adherent",
    )  # fmt: skip
    unplanned = CaseResult(
        dataset="d", session_id="s2", turn_index=0, evaluator="plan_adherence",
        baseline=(), candidate=(), baseline_na=1, candidate_na=1,
        explanation="not applicable: no plan in this turn",
    )  # fmt: skip
    assert (judged.status, unplanned.status) == ("pass", "n/a")
    assert unplanned.change == 0 and not unplanned.flaky
    decision = EvaluatorVerdict(
        evaluator="plan_adherence", regressed=0, improved=0, flaky=0, cases=2, p_value=1.0,
        baseline_pass_hat_k=1.0, candidate_pass_hat_k=1.0, candidate_pass_rate=1.0,
        min_pass_rate=None, failed=False, reason="0 regressed", not_applicable=1,
    )  # fmt: skip
    verdict = Verdict(
        passed=True, repeats=1, alpha=0.05, evaluators=[decision], cases=[judged, unplanned]
    )
    suite = ET.fromstring(junit(verdict)).find("testsuite")
    assert suite is not None and (suite.get("tests"), suite.get("skipped")) == ("2", "1")
    skipped = suite.find("testcase[@name='turn 0 plan_adherence'][@classname='d.s2']/skipped")
    assert skipped is not None
    assert skipped.get("message") == "not applicable: no plan in this turn"
    assert "| plan_adherence | pass: 0 regressed | 0 | 0 | 0 | 1 |" in markdown(verdict)
    data = verdict_json(verdict)
    assert data["evaluators"][0]["not_applicable"] == 1
    assert data["cases"][1]["status"] == "n/a"


def test_an_answer_cut_at_the_token_limit_is_an_event_and_a_warning(
    tmp_path: Path, endpoint: ChatServer
) -> None:
    cut = completion(
        tool_calls=[tool_call("finish", '{"summary": "done"}')], finish_reason="length"
    )
    endpoint.enqueue(*[cut for _ in CASES])
    out = tmp_path / "out"
    done = plangate("gate", str(write_gate(tmp_path)), "-o", str(out))
    verdict = json.loads((out / "verdict.json").read_text(encoding="utf-8"))
    assert len(verdict["warnings"]) == 4, done.stdout + done.stderr
    assert "candidate obs-008 turn 0 repeat 0: a model answer was cut" in verdict["warnings"][0]
    assert "**Warnings** (4):" in (out / "summary.md").read_text(encoding="utf-8")
    assert "warning: candidate obs-008 turn 0" in done.stdout


def test_the_gate_file_sets_the_endpoints_patience_and_a_flag_wins(
    tmp_path: Path, endpoint: ChatServer
) -> None:
    # The environment says no retries (the fixture); the gate file says one: two attempts a case.
    gate = write_gate(tmp_path, settings="model_retries = 1\nmodel_timeout = 2")
    endpoint.enqueue(*[error(500, "upstream is down") for _ in range(2 * len(CASES))])
    done = plangate("gate", str(gate), "-o", str(tmp_path / "file"))
    assert done.returncode == 2, done.stdout + done.stderr
    assert len(endpoint.requests) == 2 * len(CASES)
    endpoint.assert_complete()

    # A flag wins over the file: one attempt a case again.
    endpoint.enqueue(*[error(500, "upstream is down") for _ in CASES])
    done = plangate("gate", str(gate), "-o", str(tmp_path / "flag"), "--model-retries", "0")
    assert done.returncode == 2, done.stdout + done.stderr
    assert len(endpoint.requests) == 3 * len(CASES)
    endpoint.assert_complete()

    # The file's timeout: an endpoint that hangs costs 2 s an attempt, not a minute. (Not less:
    # a pause of a loaded machine past it before an error's reply is taken is a lost attempt.)
    endpoint.enqueue(*[completion("late").after(30) for _ in CASES])
    done = plangate("gate", str(gate), "-o", str(tmp_path / "hang"), "--model-retries", "0")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "timed out after 2 s" in done.stdout


@pytest.mark.parametrize(
    ("setting", "problem"),
    [
        ("model_timeout = 0", "gate.model_timeout must be a number of seconds > 0, not 0"),
        ('model_deadline = "soon"', "gate.model_deadline must be a number of seconds > 0"),
        ("model_deadline = inf", "gate.model_deadline must be a number of seconds > 0, not inf"),
        ("model_retries = -1", "gate.model_retries must be a whole number >= 0, not -1"),
        ("model_retries = 1.5", "gate.model_retries must be a whole number >= 0, not 1.5"),
    ],
)
def test_a_bad_endpoint_setting_in_the_gate_file_is_named(
    tmp_path: Path, setting: str, problem: str
) -> None:
    from plangate.ci.gate import GateFileError, load_gate

    with pytest.raises(GateFileError, match=problem):
        load_gate(write_gate(tmp_path, settings=setting))
