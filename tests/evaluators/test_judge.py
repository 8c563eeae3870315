"""`judge`: an LLM judge through the real `openai` client against a local endpoint, recorded in
its cassette, then replayed with the endpoint gone; self-agreement over k samples."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

from plangate.ci._summary import summarize
from plangate.ci.cli import main
from plangate.ci.cli._flags import JUDGE_MODES
from plangate.evaluators import (
    EvaluatorError,
    JudgeQuestion,
    Rubric,
    RubricError,
    RubricSet,
    evaluate,
    rubric_from_dict,
)
from plangate.evaluators._judge import _combine, read_verdict
from plangate.evaluators._judge_cassette import JUDGE_MODES as judge_modes
from plangate.evaluators._judge_cassette import JudgeCall, JudgeCassette, JudgeReply
from plangate.replay import SCHEMA
from tests.chat_server import ChatServer, completion, error

START = datetime(2026, 3, 1, 12, tzinfo=UTC)
QUESTION = "Did the agent refund the damaged item and tell the customer the amount?"
SCORED = ["session_id", "turn_index", "outcome", "passed", "score", "label", "explanation"]


def turn(session: str, request: str, answer: str, *calls: str) -> list[dict[str, Any]]:
    """One turn's rows: its AGENT span and a TOOL span per call (`name` with no arguments)."""
    common = {"session_id": session, "turn_index": 0, "trace_id": session, "status_code": "OK",
              "source": "test"}  # fmt: skip
    rows = [{**common, "span_id": f"{session}-a", "span_kind": "AGENT", "name": "agent.turn",
             "start_time": START, "input_value": request, "output_value": answer}]  # fmt: skip
    rows += [
        {**common, "span_id": f"{session}-t{i}", "span_kind": "TOOL", "name": f"tool.{name}",
         "tool_name": name, "tool_args": '{"order_id": "O-7"}',
         "start_time": START + timedelta(seconds=i + 1)}
        for i, name in enumerate(calls)
    ]  # fmt: skip
    return rows


TABLE = pa.Table.from_pylist(
    turn("refund", "My mug arrived broken, order O-7.", "Refunded $12.50 to your card.",
         "lookup_order", "refund_item")
    + turn("wrong", "My lamp arrived broken, order O-8.", "Sorry to hear that!", "lookup_order")
    + turn("chat", "Hi there", "Hello!"),
    schema=SCHEMA,
)  # fmt: skip
"""Two turns the rubric asks the judge about, and one it does not."""


def rubrics(**judge: Any) -> RubricSet:
    asked = Rubric(judge=JudgeQuestion(question=QUESTION, model="openai:judge-1", **judge))
    return RubricSet(turns={("refund", 0): asked, ("wrong", 0): asked})


def verdict(word: str, reason: str = "because") -> Any:
    return completion(json.dumps({"verdict": word, "reason": reason}), usage=(300, 20))


def judged(mode: str, cassette: Path, given: RubricSet | None = None, **params: Any) -> pa.Table:
    scores = evaluate(
        TABLE, given or rubrics(), names=["judge"],
        params={"judge": {"mode": mode, "cassette": str(cassette), "jobs": 1, **params}},
    )  # fmt: skip
    return scores.sort_by("session_id")


@pytest.fixture
def endpoint(monkeypatch: pytest.MonkeyPatch) -> Any:
    with ChatServer() as server:
        monkeypatch.setenv("PLANGATE_OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("PLANGATE_OPENAI_API_KEY", "test-key")
        yield server


def test_recorded_verdicts_replay_the_same_with_the_endpoint_gone(
    endpoint: ChatServer, tmp_path: Path
) -> None:
    cassette = tmp_path / "scores.judge.jsonl"
    endpoint.enqueue(verdict("pass", "refund made, amount given"), verdict("fail", "no refund"))
    recorded = judged("record", cassette)
    endpoint.assert_complete()
    assert [(r["session_id"], r["outcome"], r["label"]) for r in recorded.to_pylist()] == [
        ("chat", "n/a", "no question"), ("refund", "pass", "pass"), ("wrong", "fail", "fail"),
    ]  # fmt: skip
    asked = [body["messages"] for body in endpoint.bodies]
    assert [m["role"] for m in asked[0]] == ["system", "user"]
    assert asked[0][1]["content"].startswith("The user's request:\nMy mug arrived broken")
    assert "2. refund_item(" in asked[0][1]["content"]
    assert "Refunded $12.50" in asked[0][1]["content"]
    assert asked[0][1]["content"].endswith('"reason": "<one sentence>"}')
    assert [body["model"] for body in endpoint.bodies] == ["judge-1", "judge-1"]
    endpoint.close()

    replayed = judged("replay", cassette)
    assert replayed.select(SCORED).equals(recorded.select(SCORED))
    assert replayed["details"].to_pylist() == recorded["details"].to_pylist()
    lines = [json.loads(line) for line in cassette.read_text().splitlines()]
    assert [(e["session_id"], e["sample"], e["tokens_prompt"]) for e in lines] == [
        ("refund", 0, 300), ("wrong", 0, 300),
    ]  # fmt: skip


def test_record_asks_only_what_the_cassette_lacks_and_live_asks_again(
    endpoint: ChatServer, tmp_path: Path
) -> None:
    cassette = tmp_path / "judge.jsonl"
    endpoint.enqueue(verdict("pass"), verdict("fail"))
    judged("record", cassette)
    judged("record", cassette)  # everything recorded: no request
    assert len(endpoint.requests) == 2
    endpoint.enqueue(verdict("fail", "changed its mind"), verdict("fail"))
    live = judged("live", cassette)
    assert len(endpoint.requests) == 4
    assert live.filter(pa.compute.equal(live["session_id"], "refund"))["outcome"][0].as_py() == (
        "fail"
    )
    assert "changed its mind" in cassette.read_text()  # the new reply replaced the old


def test_a_replay_without_the_reply_says_which_turn_and_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(EvaluatorError) as caught:
        judged("replay", tmp_path / "empty.jsonl")
    message = str(caught.value)
    assert "no recorded reply in" in message and "session 'refund' turn 0" in message
    assert "2 missing in all" in message and "--judge record" in message


def test_a_changed_answer_is_a_new_question_not_an_old_verdict(
    endpoint: ChatServer, tmp_path: Path
) -> None:
    cassette = tmp_path / "judge.jsonl"
    endpoint.enqueue(verdict("pass"), verdict("fail"))
    judged("record", cassette)
    changed = rubrics()
    changed = RubricSet(turns={**changed.turns, ("chat", 0): changed.turns[("refund", 0)]})
    with pytest.raises(EvaluatorError, match="session 'chat' turn 0"):
        judged("replay", cassette, changed)


def test_k_samples_that_disagree_make_the_turn_unstable_not_averaged(
    endpoint: ChatServer, tmp_path: Path
) -> None:
    endpoint.enqueue(verdict("pass", "a"), verdict("fail", "b"), verdict("pass", "c"),
                     verdict("fail"), verdict("fail"), verdict("fail"))  # fmt: skip
    table = judged("record", tmp_path / "judge.jsonl", samples=3)
    refund, wrong = table.to_pylist()[1:]
    assert (refund["outcome"], refund["label"], refund["passed"]) == ("n/a", "unstable", None)
    assert refund["explanation"] == (
        "unstable: the judge passed the turn 2 times of 3 (pass, fail, pass); no verdict is given"
    )
    details = json.loads(refund["details"])
    assert details["agreement"] == pytest.approx(2 / 3)
    assert [v["reason"] for v in details["verdicts"]] == ["a", "b", "c"]
    assert (wrong["outcome"], json.loads(wrong["details"])["agreement"]) == ("fail", 1.0)
    assert wrong["explanation"].startswith("judge: fail; the same 3 times of 3")
    judge = summarize(table)["judge"]  # what `plangate eval` prints
    assert (judge["turns"], judge["repeated_turns"], judge["unstable_total"]) == (2, 2, 1)
    assert judge["mean_agreement"] == pytest.approx((2 / 3 + 1) / 2)
    assert [(u["session_id"], u["turn_index"]) for u in judge["unstable"]] == [("refund", 0)]


def test_a_score_on_both_sides_of_pass_at_is_unstable(endpoint: ChatServer, tmp_path: Path) -> None:
    def score(value: int) -> Any:
        return completion(json.dumps({"score": value, "reason": "r"}))

    endpoint.enqueue(score(4), score(3), score(5), score(5))
    scores = judged("record", tmp_path / "j.jsonl", rubrics(scale=(1, 5), pass_at=4), samples=2)
    refund, wrong = scores.to_pylist()[1:]
    assert (refund["label"], refund["score"]) == ("unstable", 3.5)
    assert refund["explanation"].endswith("(pass (4), fail (3)); no verdict is given")
    assert (wrong["outcome"], wrong["score"]) == ("pass", 5.0)
    assert wrong["explanation"] == "judge: pass (score 5, pass at 4); the same 2 times of 2: r"


def test_an_unreadable_reply_is_an_error_not_a_verdict(
    endpoint: ChatServer, tmp_path: Path
) -> None:
    endpoint.enqueue(completion("I think it passed."), verdict("maybe"))
    refund, wrong = judged("record", tmp_path / "j.jsonl").to_pylist()[1:]
    assert (refund["outcome"], refund["label"], refund["passed"]) == ("error", "error", None)
    assert refund["explanation"].endswith("the reply holds no JSON object")
    assert wrong["explanation"].endswith("verdict 'maybe' is not pass or fail")


def test_secrets_neither_reach_the_judge_nor_the_cassette_and_replay_equals_record(
    endpoint: ChatServer, tmp_path: Path
) -> None:
    secret = "sk-proj-" + "Ab3dEf6hIj9kLm2nOp5qRs8t"
    leaky = TABLE.set_column(
        TABLE.schema.get_field_index("output_value"), "output_value",
        pa.array([f"Refunded, key {secret}", None, None, "Sorry", None, "Hi"], pa.string()),
    )  # fmt: skip
    endpoint.enqueue(verdict("pass", f"it printed {secret}"), verdict("fail"))
    cassette = tmp_path / "j.jsonl"

    def run(mode: str) -> pa.Table:
        params = {"judge": {"mode": mode, "cassette": str(cassette), "jobs": 1}}
        return evaluate(leaky, rubrics(), names=["judge"], params=params).sort_by("session_id")

    recorded = run("record")
    assert secret not in json.dumps(endpoint.bodies)  # the endpoint is outside the process
    assert "Refunded, key [REDACTED]" in endpoint.bodies[0]["messages"][1]["content"]
    assert secret not in cassette.read_text() and "[REDACTED]" in cassette.read_text()
    assert secret not in json.dumps(recorded.to_pylist())
    replayed = run("replay")  # the recorded run saw the redacted reply, as the replay does
    assert replayed.select([*SCORED, "details"]).equals(recorded.select([*SCORED, "details"]))


def test_one_question_is_asked_once_however_many_turns_ask_it(
    endpoint: ChatServer, tmp_path: Path
) -> None:
    twice = pa.Table.from_pylist(
        turn("a", "Refund order O-7.", "Refunded.") + turn("b", "Refund order O-7.", "Refunded."),
        schema=SCHEMA,
    )
    asked = Rubric(judge=JudgeQuestion(question=QUESTION, model="openai:judge-1"))
    params = {"judge": {"mode": "record", "cassette": str(tmp_path / "j.jsonl")}}
    endpoint.enqueue(verdict("pass"))
    scores = evaluate(twice, RubricSet(default=asked), names=["judge"], params=params)
    assert len(endpoint.requests) == 1
    assert scores["outcome"].to_pylist() == ["pass", "pass"]
    params["judge"]["mode"] = "replay"
    again = evaluate(twice, RubricSet(default=asked), names=["judge"], params=params)
    assert again["outcome"].to_pylist() == ["pass", "pass"]


def test_recording_needs_a_cassette_before_anything_is_asked(endpoint: ChatServer) -> None:
    with pytest.raises(EvaluatorError, match="no cassette to record into: give --judge-cassette"):
        evaluate(TABLE, rubrics(), names=["judge"], params={"judge": {"mode": "record"}})
    assert endpoint.requests == []


def test_two_runs_recording_into_one_cassette_keep_both(tmp_path: Path) -> None:
    cassette = tmp_path / "j.jsonl"
    first, second = JudgeCassette(cassette), JudgeCassette(cassette)  # both read it empty
    call: dict[str, Any] = {"model": "openai:j", "turn_index": 0, "sample": 0, "system": "s"}
    first.record(JudgeCall(session_id="one", prompt="p", **call), JudgeReply(text="{}"))
    second.record(JudgeCall(session_id="two", prompt="q", **call), JudgeReply(text="{}"))
    first.save()
    second.save()
    assert len(JudgeCassette(cassette)) == 2


@pytest.mark.parametrize(
    ("text", "passed", "score"),
    [
        ('{"verdict": "PASS", "reason": "ok"}', True, 1.0),
        ('```json\n{"verdict": "fail", "reason": "no"}\n```', False, 0.0),
        ('Here it is: {"verdict": "pass"} hope that helps', True, 1.0),
        ('{"verdict": "yes"}', None, None),
        ("no json at all", None, None),
        ('{"verdict": "pass"} and then {"some": "braces"}', True, 1.0),
        ('{not json} then {"verdict": "fail"}', False, 0.0),
    ],
)
def test_a_reply_is_read_from_its_first_json_object(
    text: str, passed: bool | None, score: float | None
) -> None:
    found = read_verdict(JudgeQuestion(question="q"), text)
    assert (found.passed, found.score) == (passed, score)


@given(st.lists(st.booleans(), min_size=1, max_size=7))
def test_the_verdict_is_given_only_when_every_sample_agrees(said: list[bool]) -> None:
    replies = [JudgeReply(text=json.dumps({"verdict": "pass" if s else "fail"})) for s in said]
    passed, score, label, _, details = _combine(JudgeQuestion(question="q"), replies, "openai:j")
    agreement = json.loads(details)["agreement"]
    assert agreement == max(sum(said), len(said) - sum(said)) / len(said)
    assert score == pytest.approx(sum(said) / len(said))
    if all(said) or not any(said):
        assert (passed, label) == (float(all(said)), "pass" if all(said) else "fail")
    else:
        assert label == "unstable" and passed != passed  # NaN: no verdict


@pytest.mark.parametrize(
    ("judge", "message"),
    [
        ({"question": 3}, r"rubric\.judge: expected"),
        ({"question": "  "}, r"rubric\.judge\.question: is empty"),
        ({"question": "q", "scale": [5, 1], "pass_at": 3}, "LOW must be below HIGH"),
        ({"question": "q", "scale": [1, 5]}, "needs the lowest passing score"),
        ({"question": "q", "scale": [1, 5], "pass_at": 9}, "needs the lowest passing score"),
        ({"question": "q", "pass_at": 1}, "only a numeric scale has one"),
        ({"question": "q", "model": "gpt-4o"}, "use openai:NAME"),
        ({"question": "q", "temperature": 0}, "unknown key 'temperature'"),
    ],
)
def test_a_bad_judge_question_names_the_field(judge: dict[str, Any], message: str) -> None:
    with pytest.raises(RubricError, match=message):
        rubric_from_dict({"judge": judge})


def test_the_question_round_trips_through_the_rubric() -> None:
    data = {"judge": {"question": "q", "scale": [1, 5], "pass_at": 4, "model": "openai:m"}}
    rubric = rubric_from_dict(data)
    assert rubric.judge == JudgeQuestion(question="q", scale=(1, 5), pass_at=4, model="openai:m")
    assert rubric_from_dict(rubric.to_dict()) == rubric


def test_a_judge_endpoint_that_keeps_failing_is_an_error_and_not_recorded(
    endpoint: ChatServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PLANGATE_MODEL_RETRIES", "0")
    cassette = tmp_path / "j.jsonl"
    endpoint.enqueue(error(503, "overloaded"), verdict("fail"))
    refund, wrong = judged("record", cassette).to_pylist()[1:]
    assert (refund["outcome"], refund["label"], refund["passed"]) == ("error", "error", None)
    assert "the judge model failed: " in refund["explanation"] and "503" in refund["explanation"]
    assert wrong["outcome"] == "fail"
    assert [json.loads(line)["session_id"] for line in cassette.read_text().splitlines()] == [
        "wrong"
    ]


def test_plangate_eval_records_the_judge_beside_the_scores_and_replays_it(
    endpoint: ChatServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table, rubric = tmp_path / "traces.parquet", tmp_path / "rubric.json"
    pq.write_table(TABLE, table)
    asked = {"question": QUESTION, "model": "openai:judge-1"}
    rubric.write_text(json.dumps({"turns": [
        {"session_id": "refund", "turn_index": 0, "judge": asked},
        {"session_id": "wrong", "turn_index": 0, "judge": asked},
    ]}))  # fmt: skip
    scores = tmp_path / "scores.parquet"
    endpoint.enqueue(verdict("pass"), verdict("fail"))
    command = [
        "eval",
        str(table),
        "--rubric",
        str(rubric),
        "--evaluator",
        "judge",
        "--param",
        "judge.jobs=1",  # one request at a time: the queued verdicts reach the turns in order
        "-o",
        str(scores),
    ]
    assert main([*command, "--judge", "record", "--json"]) == 0
    recorded = pq.read_table(scores).sort_by("session_id")
    assert (tmp_path / "scores.judge.jsonl").is_file()
    endpoint.close()
    assert main([*command, "--force", "--json"]) == 0  # replay: the default, no model
    replayed = pq.read_table(scores).sort_by("session_id")
    assert replayed.select(SCORED).equals(recorded.select(SCORED))
    assert recorded["outcome"].to_pylist() == ["n/a", "pass", "fail"]

    labels = tmp_path / "labels.csv"  # people agree on "refund" and not on "wrong"
    labels.write_text("session_id,turn_index,label\nrefund,0,pass\nwrong,0,pass\n")
    capsys.readouterr()
    assert main(["agreement", str(scores), str(labels), "--evaluator", "judge", "--json"]) == 0
    agreed = json.loads(capsys.readouterr().out)
    assert (agreed["pairs"], agreed["accuracy"]) == (2, 0.5)
    assert [(d["session_id"], d["evaluator"]) for d in agreed["disagreements"]] == [
        ("wrong", "fail")
    ]

    capsys.readouterr()
    empty = tmp_path / "other.judge.jsonl"
    assert main([*command, "--force", "--judge-cassette", str(empty)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--judge record" in err


def test_the_cli_offers_the_judges_modes() -> None:
    assert judge_modes == JUDGE_MODES
