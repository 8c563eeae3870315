"""Secrets never leave the process: every exit, including a real Phoenix started by the tests.

Fifteen kinds of secret (`tests/secrets.py`) are planted in requests, model outputs, tool
arguments and results, and the environment; then `record` (exporting to Phoenix), `dataset
from-traces`, `dataset from-phoenix`, `import`, `eval -o` and `run --otlp` run, and no file
written, no span Phoenix stored and no span an OTLP collector received holds any of them. (The
crash log: `tests/ci/test_exit_codes.py`.)
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from plangate.ci.phoenix._server import PhoenixServer
from plangate.harness import Agent, ScriptedModel, load_variant, tool
from plangate.replay import build_table
from tests.chat_server import ChatServer, completion, tool_call
from tests.helpers import call, plangate, turn_rows
from tests.otlp_collector import OtlpCollector
from tests.phoenix.sending import wait_for_spans
from tests.secrets import ENVIRONMENT_SECRET, EVERYTHING, SECRETS, leaks


def leaks_in_files(folder: Path) -> dict[str, list[str]]:
    out = {}
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        data = path.read_bytes()
        text = data.decode("utf-8", errors="replace")
        if path.suffix == ".parquet":
            table = pq.read_table(path)
            text += json.dumps(table.to_pylist(), default=str)
        found = leaks(text)
        if found:
            out[str(path)] = found
    return out


def phoenix_leaks(server: PhoenixServer, project: str) -> list[str]:
    from phoenix.client import Client

    spans = Client(base_url=server.url).spans.get_spans(
        project_identifier=project, limit=sys.maxsize
    )
    assert spans, f"Phoenix has no spans in {project!r}"
    return leaks(json.dumps(spans, default=str))


@pytest.fixture
def planted_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("MY_SERVICE_TOKEN", ENVIRONMENT_SECRET)
    yield


def test_record_and_its_phoenix_export_hold_no_secret(
    phoenix: PhoenixServer, tmp_path: Path, planted_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    requests = tmp_path / "requests.json"
    requests.write_text(
        json.dumps([{"session_id": "leaky", "turns": [f"Check these: {EVERYTHING}"]}]),
        encoding="utf-8",
    )
    with ChatServer() as server:
        monkeypatch.setenv("PLANGATE_OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("PLANGATE_OPENAI_API_KEY", SECRETS["openai key"])
        server.enqueue(
            completion(
                content=f"Looking at {SECRETS['github token']}",
                tool_calls=[tool_call("query_spans", json.dumps({"kind": EVERYTHING}))],
            ),
            completion(content=f"Done. Your keys: {EVERYTHING}"),
        )
        out = tmp_path / "golden"
        done = plangate(
            "record", "--requests", str(requests), "--variant", "naive", "--model", "openai:m",
            "--redact", r"ACME-\d{6}", "-o", str(out),
            "--phoenix-url", phoenix.url, "--phoenix-project", "secrets-record",
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        server.assert_complete()
    assert leaks(done.stdout + done.stderr) == []
    assert leaks_in_files(out) == {}
    assert phoenix_leaks(phoenix, "secrets-record") == []


def raw_trace_table(path: Path) -> None:
    """A trace table from elsewhere (not written by plangate), with secrets in every field."""
    rows = turn_rows(
        "leaky", calls=[("lookup", {"q": EVERYTHING})] * 3, answer=f"Here: {EVERYTHING}"
    )
    for row in rows:
        if row["span_kind"] == "AGENT":
            row["input_value"] = f"Request with {EVERYTHING}"
        if row["span_kind"] == "TOOL":
            row["tool_output"] = row["output_value"] = f"result: {EVERYTHING}"
    pq.write_table(build_table(rows), path)  # plain pyarrow: nothing of ours redacted it


def test_goldens_and_tables_from_other_sources_hold_no_secret(
    tmp_path: Path, planted_env: None
) -> None:
    raw = tmp_path / "raw.parquet"
    raw_trace_table(raw)
    assert leaks_in_files(tmp_path)  # the source does hold them
    out = tmp_path / "out"
    golden = plangate(
        "dataset", "from-traces", str(raw), "-o", str(out / "golden"), "--redact", r"ACME-\d{6}"
    )
    assert golden.returncode == 0, golden.stderr
    scores = plangate("eval", str(raw), "-o", str(out / "scores.parquet"))
    assert scores.returncode == 0, scores.stderr
    messages = tmp_path / "messages.json"
    messages.write_text(
        json.dumps(
            [{"id": "m1", "messages": [
                {"role": "user", "content": EVERYTHING},
                {"role": "assistant", "content": f"Sure: {EVERYTHING}"},
            ]}]
        ),
        encoding="utf-8",
    )  # fmt: skip
    imported = plangate("import", "openai-messages", str(messages), "-o", str(out / "t.parquet"))
    assert imported.returncode == 0, imported.stderr
    found = leaks_in_files(out)
    # The user's own pattern is theirs to give: only `from-traces` was given it here.
    found = {
        path: [k for k in kinds if k != "user pattern" or Path(path).parent.name == "golden"]
        for path, kinds in found.items()
    }
    assert {path: kinds for path, kinds in found.items() if kinds} == {}


@tool
def lookup(q: str) -> str:
    """Look something up (echoes the query, secrets and all)."""
    return f"found for {q}"


def test_a_production_session_in_phoenix_becomes_a_golden_without_its_secrets(
    phoenix: PhoenixServer, tmp_path: Path, planted_env: None
) -> None:
    project = "secrets-production"
    provider = TracerProvider(resource=Resource({"openinference.project.name": project}))
    # A production agent's own exporter: nothing of plangate's redacts what it sends.
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=phoenix.traces_url)))
    sent = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(sent))
    model = ScriptedModel([call("lookup", "c1", q=EVERYTHING), f"Done: {EVERYTHING}"])
    agent = Agent(
        model=model, variant=load_variant("naive"), tools=lambda: [lookup], tracer_provider=provider
    )
    asyncio.run(agent.session("prod-1").run_turn(f"Please check {EVERYTHING}"))
    provider.shutdown()
    wait_for_spans(
        phoenix, project, [f"{s.context.span_id:016x}" for s in sent.get_finished_spans()]
    )
    assert phoenix_leaks(phoenix, project)  # Phoenix does hold them: the agent sent them
    out = tmp_path / "golden"
    done = plangate(
        "dataset", "from-phoenix", "--phoenix-url", phoenix.url, "--phoenix-project", project,
        "-o", str(out), "--redact", r"ACME-\d{6}",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert leaks_in_files(out) == {}


def test_run_over_otlp_holds_no_secret(tmp_path: Path, planted_env: None) -> None:
    with OtlpCollector() as collector:
        done = plangate("run", f"Look at {EVERYTHING}", "--otlp", collector.endpoint)
        assert done.returncode == 0, done.stderr
        received = json.dumps([str(s) for s in collector.spans])
    # `run` takes no --redact: only the user's own pattern may pass (it is theirs to give).
    assert collector.spans and leaks(received) == ["user pattern"]
