"""A run's budget: `gate` and `replay` stop starting turns once it is spent, and say so.

The live runs talk to a real local chat-completions endpoint over a socket, through the real
`openai` client; every scripted reply finishes the turn in one model call and reports its usage,
so the tokens each turn spends are known from the script, in the order the turns ran (`--jobs 1`).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from plangate.ci._budget import (
    NOT_RUN,
    BudgetError,
    RunBudget,
    check_priceable,
    not_run_table,
)
from plangate.ci.cli._dataset import turns_per_second
from plangate.ci.cli._main import main
from plangate.ci.gate import GateFileError, gate_with_reports
from plangate.evaluators import evaluate
from plangate.replay import ReplayResult, build_table
from plangate.replay.schema import ERROR_STOP_REASONS
from tests.chat_server import ChatServer, completion, error, tool_call
from tests.conftest import REPO
from tests.helpers import plangate

DATASET = REPO / "datasets" / "observability-core"
CASES = ("obs-008", "obs-009", "obs-010", "obs-013")  # their first turns: four cases
USAGE = [(100, 20), (50, 10), (200, 40), (80, 20), (60, 15), (90, 30), (70, 10), (40, 5)]
"""Prompt and completion tokens of the scripted replies, one per turn, in the order served."""


def turn(
    tokens: list[tuple[int, int]], *, model: str = "gpt-4o-mini", stop: str = "finished"
) -> Any:
    """One finished turn's trace table: an AGENT row and an LLM row per (prompt, completion)."""
    rows: list[dict[str, Any]] = [
        {"session_id": "s", "turn_index": 0, "trace_id": "t", "span_id": "a", "span_kind": "AGENT",
         "name": "agent.turn", "status_code": "OK", "source": "plangate", "stop_reason": stop}
    ]  # fmt: skip
    for number, (prompt, done) in enumerate(tokens):
        rows.append(
            {"session_id": "s", "turn_index": 0, "trace_id": "t", "span_id": f"l{number}",
             "parent_span_id": "a", "span_kind": "LLM", "name": "llm", "status_code": "OK",
             "source": "plangate", "model_name": model, "tokens_prompt": prompt,
             "tokens_completion": done}
        )  # fmt: skip
    return build_table(rows)


# -- RunBudget ---------------------------------------------------------------------------------


def test_a_budget_sums_finished_turns_and_is_reached_at_its_limit() -> None:
    budget = RunBudget(max_tokens=300)
    budget.spend(turn([(100, 20), (30, 10)]))
    assert (budget.tokens, budget.finished, budget.reached()) == (160, 1, False)
    budget.spend(turn([(120, 20)]))
    assert (budget.tokens, budget.reached()) == (300, True)
    assert budget.skip() == "the run's budget of 300 tokens was reached (300 tokens spent)"
    assert budget.use().line == "300 tokens, 300 tokens spent over 2 turn(s); 1 turn(s) not run"


def test_a_dollar_budget_prices_each_turn_with_genai_prices() -> None:
    budget = RunBudget(max_usd=1.0)
    budget.spend(turn([(1_000_000, 0)]))  # gpt-4o-mini: $0.15 per million input tokens
    assert budget.usd == pytest.approx(0.15) and not budget.reached()
    budget.spend(turn([(0, 2_000_000)]))  # $0.60 per million output tokens
    assert budget.usd == pytest.approx(1.35) and budget.reached()


def test_an_unpriced_turn_under_a_dollar_budget_stops_the_run_naming_the_model() -> None:
    budget = RunBudget(max_usd=1.0)
    budget.spend(turn([(10, 5)], model="sim:diligent"))
    assert budget.usd == 0 and budget.reached()
    assert "cannot be kept" in budget.reason() and "'sim:diligent'" in budget.reason()
    priced = RunBudget(max_usd=1.0, price_as="gpt-4o-mini")
    priced.spend(turn([(1_000_000, 0)], model="sim:diligent"))
    assert priced.usd == pytest.approx(0.15) and not priced.reached()


def test_uncounted_tokens_stop_a_token_budget_unless_the_call_failed() -> None:
    budget = RunBudget(max_tokens=1000)
    failed = build_table([{**row, "tokens_prompt": None, "tokens_completion": None}
                          for row in turn([(1, 1)], stop="model_error").to_pylist()])  # fmt: skip
    budget.spend(failed)  # a failed call is not billed: nothing spent, the budget still holds
    assert (budget.tokens, budget.reached()) == (0, False)
    uncounted = build_table([{**row, "tokens_prompt": None, "tokens_completion": None}
                             for row in turn([(1, 1)]).to_pylist()])  # fmt: skip
    budget.spend(uncounted)
    assert budget.reached() and "tokens is unknown" in budget.reason()


def test_a_turn_that_reports_no_model_calls_stops_the_budget_too() -> None:
    budget = RunBudget(max_tokens=1000)
    budget.spend(turn([(100, 20)]))
    budget.spend(turn([]))  # a team's agent whose spans hold no LLM call: spend unknown
    assert budget.reached() and "cannot be kept" in budget.reason()
    assert budget.use().line == "1,000 tokens, at least 120 tokens spent over 2 turn(s)"


def test_only_the_measure_a_turn_did_not_report_is_a_lower_bound() -> None:
    budget = RunBudget(max_tokens=10_000, max_usd=5.0)
    budget.spend(turn([(100, 20)], model="gpt-4o-mini"))
    budget.spend(turn([(50, 10)], model="no-such-model"))  # its tokens known, its cost not
    assert budget.reached()
    assert budget.use().line.startswith("10,000 tokens or $5, 180 tokens, at least $0.0000 spent")


def test_a_turn_not_run_is_an_error_under_every_evaluator_naming_the_budget() -> None:
    assert NOT_RUN in ERROR_STOP_REASONS
    table = not_run_table("s", 2, "the run's budget of 10 tokens was reached", "alyx")
    scores = evaluate(table, names=["task_completion", "tool_call_loops", "tokens"]).to_pylist()
    assert {s["outcome"] for s in scores} == {"error"}
    assert all("the run's budget of 10 tokens was reached" in s["explanation"] for s in scores)


@pytest.mark.parametrize(
    ("model", "price_as", "message"),
    [
        ("openai:test-model", None, "genai-prices cannot price 'openai:test-model'"),
        ("sim:diligent", None, "the simulated model 'sim:diligent' has none"),
        ("openai:gpt-4o", "no-such-model", "--price-as 'no-such-model'"),
    ],
)
def test_a_dollar_budget_needs_a_priced_model_up_front(
    model: str, price_as: str | None, message: str
) -> None:
    with pytest.raises(BudgetError) as raised:
        check_priceable(RunBudget(max_usd=1.0, price_as=price_as), model)
    assert message in str(raised.value)
    check_priceable(RunBudget(max_usd=1.0), "openai:gpt-4o")  # known: fine
    check_priceable(RunBudget(max_usd=1.0, price_as="gpt-4o-mini"), "sim:diligent")
    check_priceable(RunBudget(max_tokens=10), "sim:diligent")  # a token budget needs no price


@settings(max_examples=25, deadline=None)
@given(
    spends=st.lists(st.integers(0, 500), min_size=1, max_size=8),
    limit=st.integers(1, 2000),
    jobs=st.integers(1, 3),
)
def test_every_turn_is_finished_or_not_run_and_the_overshoot_is_the_turns_in_flight(
    spends: list[int], limit: int, jobs: int
) -> None:
    """The replay loop's shape: ask inside the concurrency limit, spend when a turn finishes."""
    budget = RunBudget(max_tokens=limit)
    tables = [turn([(tokens, 0)]) for tokens in spends]
    ran: list[int] = []

    async def one(number: int, limit_: asyncio.Semaphore) -> str:
        async with limit_:
            if budget.reached():
                budget.skip()
                return NOT_RUN
            for _ in range(number % 3):  # turns take different times
                await asyncio.sleep(0)
            budget.spend(tables[number])
            ran.append(number)
            return "finished"

    async def run() -> list[str]:
        limit_ = asyncio.Semaphore(jobs)
        return list(await asyncio.gather(*(one(n, limit_) for n in range(len(spends)))))

    outcomes = asyncio.run(run())
    assert budget.finished + budget.not_run == len(spends) == len(outcomes)
    assert budget.tokens == sum(spends[n] for n in ran)
    assert budget.tokens < limit + jobs * max(spends)  # what started below it, and in flight
    if jobs == 1:  # turns run in order, each started below the limit: a prefix, at most one over
        assert ran == list(range(len(ran)))
        assert sum(spends[: len(ran) - 1]) < limit if ran else True
        assert budget.not_run == 0 or budget.tokens >= limit


# -- live runs ---------------------------------------------------------------------------------


@pytest.fixture
def endpoint(monkeypatch: pytest.MonkeyPatch) -> ChatServer:
    server = ChatServer().start()
    monkeypatch.setenv("PLANGATE_OPENAI_BASE_URL", server.base_url)
    monkeypatch.setenv("PLANGATE_OPENAI_API_KEY", "sk-test-not-a-real-key")
    monkeypatch.setenv("PLANGATE_MODEL_RETRIES", "0")
    finish = [tool_call("finish", '{"summary": "done"}')]
    server.enqueue(*[completion(tool_calls=finish, usage=usage) for usage in USAGE])
    yield server  # type: ignore[misc]
    server.close()


def allowed(limit: int) -> int:
    """Turns a budget lets run one at a time: each starts while the spend is below the limit."""
    spent, turns = 0, 0
    for prompt, done in USAGE:
        if spent >= limit:
            break
        spent, turns = spent + prompt + done, turns + 1
    return turns


def write_gate(tmp_path: Path, settings: str = "") -> Path:
    path = tmp_path / "gate.toml"
    path.write_text(
        f"""
[gate]
repeats = 1
noise_floor = false
jobs = 1
{settings}
[[datasets]]
path = "{DATASET}"
sessions = {json.dumps(list(CASES))}
turns = [0]
[baseline]
variant = "alyx"
model = "openai:test-model"
tools = "live"
[candidate]
variant = "alyx"
model = "openai:test-model"
tools = "live"
[evaluators.task_completion]
[evaluators.tokens]
""",
        encoding="utf-8",
    )
    return path


def test_a_gate_over_its_budget_keeps_the_finished_turns_and_cannot_decide(
    tmp_path: Path, endpoint: ChatServer
) -> None:
    limit = 250
    run = allowed(limit)  # 120 + 60 + 240: the third turn crosses it
    assert 0 < run < 2 * len(CASES)
    out = tmp_path / "out"
    gate = write_gate(tmp_path, "budget_tokens = 100000")  # the flag wins over the file
    done = plangate("gate", str(gate), "-o", str(out), "--budget-tokens", str(limit))
    assert done.returncode == 2, done.stdout + done.stderr
    assert len(endpoint.requests) == run  # one model call a turn: the turns that ran
    spent = sum(p + c for p, c in USAGE[:run])
    reason = f"the run's budget of {limit} tokens was reached ({spent} tokens spent)"
    not_run = 2 * len(CASES) - run
    assert f"{reason}: {not_run} of {2 * len(CASES)} turns not run" in done.stdout
    verdict = json.loads((out / "verdict.json").read_text(encoding="utf-8"))
    assert verdict["verdict"] == "cannot decide" and verdict["exit_code"] == 2
    assert reason in verdict["undecided"] and "errored turn" not in verdict["undecided"]
    assert verdict["budget"]["tokens"] == spent and verdict["budget"]["not_run"] == not_run
    assert verdict["budget"]["finished"] == run
    assert reason in (out / "summary.md").read_text(encoding="utf-8")
    # Every finished turn is kept with its scores; the rest are errors naming the budget.
    baseline = pq.read_table(out / "scores" / "baseline.parquet").to_pylist()
    candidate = pq.read_table(out / "scores" / "candidate.parquet").to_pylist()
    tokens = [s for s in baseline if s["evaluator"] == "tokens" and s["outcome"] != "error"]
    assert [s["score"] for s in tokens] == [p + c for p, c in USAGE[:run]]
    errored = [s for s in baseline + candidate if s["outcome"] == "error"]
    assert len(errored) == 2 * not_run  # two evaluators a turn
    assert all(reason.split(" (")[0] in s["explanation"] for s in errored)


def test_a_turn_that_failed_is_told_apart_from_the_turns_the_budget_did_not_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first turn's model call fails (an infrastructure error, nothing spent); then the
    budget stops the run. The verdict names both, and counts only the failure as an error."""
    server = ChatServer().start()
    monkeypatch.setenv("PLANGATE_OPENAI_BASE_URL", server.base_url)
    monkeypatch.setenv("PLANGATE_OPENAI_API_KEY", "sk-test-not-a-real-key")
    monkeypatch.setenv("PLANGATE_MODEL_RETRIES", "0")
    finish = [tool_call("finish", '{"summary": "done"}')]
    server.enqueue(error(500), *[completion(tool_calls=finish, usage=u) for u in USAGE])
    try:
        out = tmp_path / "out"
        done = plangate("gate", str(write_gate(tmp_path)), "-o", str(out), "--budget-tokens", "250")
    finally:
        server.close()
    assert done.returncode == 2, done.stdout + done.stderr
    run = 1 + allowed(250)  # the failed turn spent nothing
    assert len(server.requests) == run
    verdict = json.loads((out / "verdict.json").read_text(encoding="utf-8"))
    assert verdict["budget"]["not_run"] == 2 * len(CASES) - run
    undecided = verdict["undecided"]
    assert "tokens was reached" in undecided
    assert "the baseline has 1 errored turn(s)" in undecided, undecided
    assert f"session {CASES[0]!r} turn 0" in undecided
    assert "candidate has" not in undecided  # its errors are all turns not run


def test_a_replay_over_its_budget_reports_the_rest_as_not_run(
    tmp_path: Path, endpoint: ChatServer
) -> None:
    limit = 400
    run = allowed(limit)
    sessions = [arg for case in CASES for arg in ("--session", case)]
    out = tmp_path / "replayed.parquet"
    done = plangate(
        "replay", str(DATASET), *sessions, "--model", "openai:test-model", "--tools", "live",
        "--jobs", "1", "--budget-tokens", str(limit), "-o", str(out),
    )  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    assert len(endpoint.requests) == run
    lines = done.stdout.splitlines()
    not_run = [line for line in lines if line.endswith(": not run (budget)")]
    total = int(next(line for line in lines if " turns identical " in line).split()[2])
    spent = sum(p + c for p, c in USAGE[:run])
    assert len(not_run) == total - run > 0
    assert f"run budget: {limit} tokens, {spent} tokens spent over {run} turn(s)" in done.stdout
    table = pq.read_table(out).to_pylist()
    stops = [r["stop_reason"] for r in table if r["span_kind"] == "AGENT"]
    assert stops.count(NOT_RUN) == len(not_run) and len(stops) == total


def test_the_rate_counts_the_turns_replayed_not_those_the_budget_left() -> None:
    ran, left = SimpleNamespace(stop_reason="finished"), SimpleNamespace(stop_reason=NOT_RUN)
    results = cast(list[ReplayResult], [ran, ran, *[left] * 52])
    assert turns_per_second(results, 4.0) == 0.5  # 2 turns in 4 s, not 54


def test_replay_json_counts_not_run_turns_and_keeps_one_document(endpoint: ChatServer) -> None:
    done = plangate(
        "replay", str(DATASET), "--session", "obs-008", "--model", "openai:test-model",
        "--tools", "live", "--jobs", "1", "--budget-tokens", "1", "--json",
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    results = json.loads(done.stdout)
    assert [r["stop_reason"] for r in results][1:] == [NOT_RUN] * (len(results) - 1)
    assert all("the run's budget of 1 tokens" in r["error"] for r in results[1:])
    assert "run budget: 1 tokens, 120 tokens spent over 1 turn(s)" in done.stderr


# -- bad values --------------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["gate", "replay"])
@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("--budget-tokens", "0", "must be a whole number >= 1, not '0'"),
        ("--budget-tokens", "-5", "must be a whole number >= 1, not '-5'"),
        ("--budget-tokens", "lots", "must be a whole number >= 1, not 'lots'"),
        ("--budget-usd", "0", "must be a number of US dollars > 0, not '0'"),
        ("--budget-usd", "-1", "must be a number of US dollars > 0, not '-1'"),
        ("--budget-usd", "nan", "must be a number of US dollars > 0, not 'nan'"),
        ("--budget-usd", "five", "must be a number of US dollars > 0, not 'five'"),
    ],
)
def test_a_bad_budget_flag_is_exit_2_naming_it(
    command: str, flag: str, value: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    target = "ci/gate.toml" if command == "gate" else str(DATASET)
    with pytest.raises(SystemExit) as exited:
        main([command, target, flag, value])
    assert exited.value.code == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert f"argument {flag}: {message}" in error and "Traceback" not in error


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--budget-usd", "1"], "the simulated model 'sim:diligent' has none"),
        (["--price-as", "gpt-4o"], "--price-as prices model calls for --budget-usd"),
        (["--budget-usd", "1", "--price-as", "nope-model"], "--price-as 'nope-model'"),
    ],
)
def test_replay_refuses_a_dollar_budget_it_cannot_keep_before_running(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["replay", str(DATASET), "--model", "sim:diligent", *args])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and message in err[0], err


def test_a_cassette_replay_needs_a_price_for_what_the_recording_spent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The recording's model was simulated: refused before any turn, not after the first."""
    code = main(["replay", str(DATASET), "--budget-usd", "1"])
    out, err = capsys.readouterr()
    assert (code, out) == (2, "")
    assert err.startswith("plangate: error: --budget-usd: a dollar budget needs a price, and ")
    assert "the cassette's session 'obs-001' turn 0 has none (no price known for model 'sim:" in err
    assert main(["replay", str(DATASET), "--session", "obs-001", "--budget-usd", "1",
                 "--price-as", "gpt-4o-mini"]) == 0  # fmt: skip
    gate = (
        write_gate(tmp_path, "budget_usd = 1").read_text().replace("openai:test-model", "cassette")
    )
    (tmp_path / "cassette.toml").write_text(gate.replace('"live"', '"cassette"'))
    capsys.readouterr()
    assert main(["gate", str(tmp_path / "cassette.toml"), "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "baseline.model: a dollar budget needs a price, and the cassette's session" in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("budget_tokens = 0", "gate.budget_tokens must be a whole number >= 1, not 0"),
        ("budget_usd = -2", "gate.budget_usd must be a number of US dollars > 0, not -2"),
        ("price_as = 3", "gate.price_as must be a model name, not 3"),
        ("budget_usd = 1", "baseline.model: a dollar budget needs a model with a price"),
    ],
)
def test_a_bad_budget_in_the_gate_file_is_named(
    tmp_path: Path, setting: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["gate", str(write_gate(tmp_path, setting)), "-o", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and message in err[0], err


def test_the_gate_refuses_price_as_without_a_dollar_budget(tmp_path: Path) -> None:
    gate = write_gate(tmp_path, 'price_as = "gpt-4o-mini"\n')
    with pytest.raises(GateFileError, match="price_as prices model calls for a dollar budget"):
        gate_with_reports(gate, tmp_path / "out")
