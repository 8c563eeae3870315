"""One exit-code contract: 0 ok, 1 regression or differences, 2 unusable input, 3 internal, 130.

The model endpoint here is a real local chat-completions server (the real `openai` client talks
to it over a socket) that answers HTTP 500: a dead endpoint is unusable input, never a success.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from plangate.ci.cli import _run
from plangate.ci.cli._main import main
from tests.chat_server import ChatServer, error
from tests.helpers import plangate


@pytest.fixture
def dead_endpoint(monkeypatch: pytest.MonkeyPatch) -> ChatServer:
    server = ChatServer().start()
    monkeypatch.setenv("PLANGATE_OPENAI_BASE_URL", server.base_url)
    monkeypatch.setenv("PLANGATE_OPENAI_API_KEY", "sk-test-not-a-real-key")
    yield server  # type: ignore[misc]
    server.close()


def test_run_exits_2_when_the_model_fails(dead_endpoint: ChatServer) -> None:
    dead_endpoint.enqueue(error(500, "upstream is down"))
    done = plangate("run", "List the slowest spans.", "--model", "openai:m", "--model-retries", "0")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "plangate: error: the model failed:" in done.stderr and "HTTP 500" in done.stderr
    assert "Traceback" not in done.stderr
    dead_endpoint.assert_complete()


def test_retries_are_shown_with_their_reason(dead_endpoint: ChatServer) -> None:
    dead_endpoint.enqueue(error(503, "busy"), error(503, "busy"))
    done = plangate(
        "run", "hello", "--model", "openai:m", "--model-retries", "1", "--variant", "naive"
    )
    assert done.returncode == 2
    assert "model 'm': HTTP 503" in done.stderr and "retry 1 of 1 in" in done.stderr
    dead_endpoint.assert_complete()


def test_record_refuses_errored_turns_unless_allowed(
    tmp_path: Path, dead_endpoint: ChatServer
) -> None:
    requests = tmp_path / "requests.json"
    requests.write_text(
        json.dumps([{"session_id": "s1", "turns": [{"request": "List the slowest spans."}]}]),
        encoding="utf-8",
    )
    out = tmp_path / "golden"
    args = ("record", "--requests", str(requests), "--variant", "alyx", "--model", "openai:m")
    dead_endpoint.enqueue(error(500))
    done = plangate(*args, "--model-retries", "0", "-o", str(out))
    assert done.returncode == 2, done.stdout + done.stderr
    assert "1 of 1 recorded turns ended in model_error" in done.stderr
    assert "--allow-errors" in done.stderr and not out.exists()

    dead_endpoint.enqueue(error(500))
    kept = plangate(*args, "--model-retries", "0", "-o", str(out), "--allow-errors")
    assert kept.returncode == 0, kept.stderr
    # Replayed against the dead endpoint again, the errored turn is an error, not "identical".
    dead_endpoint.enqueue(error(500))
    replayed = plangate("replay", str(out), "--model", "openai:m", "--model-retries", "0")
    assert replayed.returncode == 1, replayed.stdout + replayed.stderr
    assert "s1 turn 0: error: the model failed" in replayed.stdout
    assert "0 of 1 turns identical" in replayed.stdout
    dead_endpoint.assert_complete()


def test_run_reads_the_request_from_a_file_or_standard_input(tmp_path: Path) -> None:
    long = "List the slowest spans. " + "x" * 1_000_000
    path = tmp_path / "request.txt"
    path.write_text(long, encoding="utf-8")
    from_file = plangate("run", f"@{path}", "--json")
    assert from_file.returncode == 0, from_file.stderr
    assert json.loads(from_file.stdout)["request"] == long
    piped = subprocess.run(
        [sys.executable, "-m", "plangate", "run", "-", "--json"],
        input="What is the p95 latency?",
        capture_output=True,
        text=True,
        check=False,
    )
    assert piped.returncode == 0 and json.loads(piped.stdout)["request"] == (
        "What is the p95 latency?"
    )
    missing = plangate("run", f"@{tmp_path / 'nope.txt'}")
    assert missing.returncode == 2 and "nope.txt" in missing.stderr


@pytest.mark.parametrize("value", ["0", "-1", "two"])
def test_repeats_must_be_at_least_one(value: str) -> None:
    done = plangate("gate", "ci/gate.toml", "--repeats", value)
    assert done.returncode == 2
    assert f"argument --repeats: must be a whole number >= 1, not '{value}'" in done.stderr


def test_a_bug_exits_3_with_one_line_and_a_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def broken(args: object) -> int:
        raise RuntimeError("boom with sk-live-0123456789abcdefghij in it\nsecond line")

    monkeypatch.setattr(_run, "variants", broken)
    monkeypatch.setenv("PLANGATE_LOG_DIR", str(tmp_path))
    assert main(["variants"]) == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("plangate: internal error: RuntimeError: boom")
    assert "sk-live-0123456789abcdefghij" not in err
    (log,) = tmp_path.glob("crash-*.log")
    assert str(log) in err
    text = log.read_text(encoding="utf-8")
    assert "Traceback" in text and "in broken" in text
    assert "sk-live-0123456789abcdefghij" not in text and "[REDACTED]" in text


@pytest.mark.parametrize(
    "span",
    [
        {"attributes": [{"key": "llm.token_count.prompt", "value": {"intValue": "KEY"}}]},
        {"attributes": [{"key": "db.password", "value": {"intValue": "hunter2hunter2"}}]},
        {"traceId": "KEY"},
        {"attributes": [{"value": {"stringValue": "KEY"}}]},  # a pair with no key
    ],
    ids=["a value", "a password", "an id", "a keyless pair"],
)
def test_an_error_line_never_quotes_a_secret(
    tmp_path: Path, span: dict[str, object], capsys: pytest.CaptureFixture[str]
) -> None:
    # A bad value is quoted so the user can find it; an API key pasted in the wrong place too.
    key = "sk-proj-Abc123Def456Ghi789Jkl012Mno345Pqr678Stu901"
    base = {"traceId": "1" * 32, "spanId": "1" * 16, "name": "call"}
    request = {"resourceSpans": [{"scopeSpans": [{"spans": [{**base, **span}]}]}]}
    source = tmp_path / "spans.json"
    source.write_text(json.dumps(request).replace("KEY", key), encoding="utf-8")
    assert main(["import", "otlp-json", str(source), "-o", str(tmp_path / "t.parquet")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(source) in err and "[REDACTED]" in err
    assert key not in err and "sk-proj" not in err and "hunter2" not in err


def test_ctrl_c_exits_130_with_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def interrupted(args: object) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(_run, "variants", interrupted)
    assert main(["variants"]) == 130
    assert capsys.readouterr().err == "plangate: interrupted\n"


def test_a_bad_redact_pattern_is_named(tmp_path: Path) -> None:
    requests = tmp_path / "requests.json"
    requests.write_text(json.dumps([{"session_id": "s", "turns": ["hi"]}]), encoding="utf-8")
    done = plangate(
        "record", "--requests", str(requests), "--variant", "naive", "--model", "sim:diligent",
        "-o", str(tmp_path / "out"), "--redact", "(unclosed",
    )  # fmt: skip
    assert done.returncode == 2 and "redact pattern '(unclosed' is not a valid" in done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "out").exists()


def test_the_endpoint_flags_set_the_variables_the_model_reads() -> None:
    from plangate.ci.cli._flags import ENDPOINT_FLAGS
    from plangate.harness.models import _endpoint

    assert set(ENDPOINT_FLAGS.values()) == {
        _endpoint.TIMEOUT_VARIABLE,
        _endpoint.RETRIES_VARIABLE,
        _endpoint.DEADLINE_VARIABLE,
    }


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("PLANGATE_MODEL_TIMEOUT", "0"),
        ("PLANGATE_MODEL_RETRIES", "-1"),
        ("PLANGATE_MODEL_DEADLINE", "soon"),
    ],
)
def test_a_bad_endpoint_setting_is_named(
    variable: str, value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PLANGATE_OPENAI_API_KEY", "k")
    monkeypatch.setenv(variable, value)
    done = plangate("run", "hi", "--model", "openai:m")
    assert done.returncode == 2 and f"{variable}={value!r}: must be" in done.stderr


def test_an_unwritable_output_is_named(corpus: Path) -> None:
    """sysfs takes no new files, not even from root: the write fails as on a read-only disk."""
    tau = corpus / "tau-bench" / "gpt-4o-airline.json"
    done = plangate("import", "tau-bench", str(tau), "-o", "/sys/plangate-out.parquet")
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("plangate: error: cannot write /sys/plangate-out.parquet: ")
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr


def test_an_unreachable_phoenix_is_a_warning_unless_required() -> None:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{probe.getsockname()[1]}"  # nothing listens once it closes
    password = url.replace("http://", "http://admin:Tr0ub4dor-3xyz@")  # a URL may carry one
    done = plangate("run", "What is the p95 latency?", "--phoenix-url", password)
    assert done.returncode == 0, done.stderr
    assert (
        "plangate: warning:" in done.stderr and "going on without the Phoenix export" in done.stderr
    )
    assert "Tr0ub4dor" not in done.stderr
    required = plangate(
        "run", "What is the p95 latency?", "--phoenix-url", url, "--phoenix-required"
    )
    assert required.returncode == 2 and required.stderr.startswith("plangate: error:")
    assert url in required.stderr


def test_error_lines_take_the_users_redact_patterns_and_hide_passwords_in_urls(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    source = tmp_path / "c.json"
    source.write_text(json.dumps([{"session_id": "cust-48213977", "messages": messages}]))
    table = tmp_path / "t.parquet"
    assert main(["import", "openai-messages", str(source), "-o", str(table)]) == 0
    capsys.readouterr()
    wrong = ["dataset", "from-traces", str(table), "--session", "nope", "-o", str(tmp_path / "d")]
    assert main([*wrong, "--redact", "cust-[0-9]+"]) == 2
    err = capsys.readouterr().err  # the error lists the sessions there are
    assert "some: [REDACTED]" in err and "cust-48213977" not in err
    assert main(wrong) == 2  # the next command in this process has patterns of its own
    assert "some: cust-48213977" in capsys.readouterr().err

    url = "http://admin:Tr0ub4dor-3xyz@127.0.0.1:9"
    done = plangate("eval", str(table), "--phoenix-url", url)  # eval takes no --phoenix-url
    assert done.returncode == 2 and "unrecognized arguments" in done.stderr
    assert "Tr0ub4dor" not in done.stderr
