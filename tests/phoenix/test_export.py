"""Spans to Phoenix: namespaced session ids, back-pressure met by retrying, every span accounted.

The first tests need no server (an in-memory exporter stands in for OTLP, a scripted one for
Phoenix's answers); the last ones use the real test server, whose queue is small enough that a
burst of 2,000 spans meets its 503s.
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
import requests
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from plangate.ci.cli import main
from plangate.ci.cli._gate import replays_to
from plangate.ci.gate._gate import run_gate
from plangate.ci.gate._gate_file import load_gate
from plangate.ci.phoenix._client import PhoenixError
from plangate.ci.phoenix._export import PhoenixExport
from plangate.ci.phoenix._server import PhoenixServer, free_port
from plangate.ci.phoenix._transport import HttpOutcomes, RetryingExporter
from plangate.ci.phoenix.names import URL_ENV, new_run_id
from plangate.harness.semconv import ORIGINAL_SESSION_ID, PROJECT_NAME, SESSION_ID
from plangate.replay import ReferenceAgent, SessionRequest, read_dataset, record, replay_turn
from tests.conftest import REPO

GOLDEN = REPO / "datasets" / "observability-core"
SESSION = "obs-008"
BURST = 2_000
"""Spans in the back-pressure burst: twice the test server's queue."""


@pytest.fixture(autouse=True)
def no_phoenix_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(URL_ENV, raising=False)


def memory_export(**options: Any) -> tuple[PhoenixExport, InMemorySpanExporter]:
    memory = InMemorySpanExporter()
    return PhoenixExport("http://127.0.0.1:9", exporter=memory, **options), memory


def attributes(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


# --- no server -----------------------------------------------------------------------------------


def test_phoenix_sees_namespaced_copies_and_the_trace_table_the_original_ids() -> None:
    dataset = read_dataset(GOLDEN)
    export, memory = memory_export(project="golden-checks", batch_delay=3600)
    variant = dataset.session(SESSION)["variant"]
    result = asyncio.run(
        replay_turn(
            dataset,
            SESSION,
            0,
            agent=ReferenceAgent(
                span_processor=export.processor(dataset=dataset.name, variant=variant)
            ),
        )
    )
    # Not by the batch processor's timer (an hour): the turn's root span ended, so its trace
    # was flushed at once.
    sent = memory.get_finished_spans()
    assert result.table is not None
    assert set(result.table["session_id"].to_pylist()) == {SESSION}
    assert len(sent) == result.table.num_rows > 0
    namespaced = export.session_id(SESSION, dataset=dataset.name, variant=variant)
    assert namespaced == f"observability-core:{variant}:{export.run_id}:{SESSION}"
    assert {attributes(s)[SESSION_ID] for s in sent} == {namespaced}
    assert {attributes(s)[ORIGINAL_SESSION_ID] for s in sent} == {SESSION}
    assert {s.resource.attributes[PROJECT_NAME] for s in sent} == {"golden-checks"}
    assert {s.context.span_id for s in sent if s.context} == {
        int(span_id, 16) for span_id in result.table["span_id"].to_pylist()
    }
    report = export.close(verify=False)
    assert (report.sent, report.exported, report.dropped) == (len(sent), len(sent), 0)
    assert report.arrived is None


def test_a_recording_keeps_its_ids_and_phoenix_gets_them_namespaced() -> None:
    export, memory = memory_export()
    sessions = (SessionRequest(session_id="rec-1", requests=("show the error rate",)),)
    dataset = asyncio.run(
        record(
            sessions, name="golden", variant="alyx", model="sim:diligent",
            span_processor=export.processor(dataset="golden", variant="alyx"),
        )
    )  # fmt: skip
    assert set(dataset.spans["session_id"].to_pylist()) == {"rec-1"}
    sent = memory.get_finished_spans()
    assert len(sent) == dataset.spans.num_rows
    assert {attributes(s)[SESSION_ID] for s in sent} == {f"golden:alyx:{export.run_id}:rec-1"}


def test_the_gate_names_each_side_and_repeat_a_run_of_its_own(tmp_path: Path) -> None:
    path = tmp_path / "gate.toml"
    path.write_text(
        f'[gate]\nrepeats = 1\n[[datasets]]\npath = "{GOLDEN}"\nsessions = ["{SESSION}"]\n'
        '[baseline]\nvariant = "alyx"\n[candidate]\nvariant = "naive"\n'
        "[evaluators.task_completion]\n",
        encoding="utf-8",
    )
    export, memory = memory_export(run_id="gate-run")
    verdict = asyncio.run(run_gate(load_gate(path), span_processors=replays_to(export)))
    assert {c.session_id for c in verdict.cases} == {SESSION}  # the evaluators saw the original
    sessions = {attributes(s)[SESSION_ID] for s in memory.get_finished_spans()}
    assert sessions == {
        f"observability-core:alyx:gate-run-baseline-r0:{SESSION}",
        f"observability-core:alyx:gate-run-noise-r0:{SESSION}",
        f"observability-core:naive:gate-run-candidate-r0:{SESSION}",
    }


def test_run_ids_are_short_and_distinct() -> None:
    first, second = new_run_id(), new_run_id()
    assert first != second
    assert re.fullmatch(r"\d{8}T\d{6}-[0-9a-f]{4}", first)


class Scripted(SpanExporter):
    """Answers each export attempt with the next outcome: a status code or an error."""

    def __init__(self, outcomes: HttpOutcomes, answers: Sequence[int | Exception]) -> None:
        self.outcomes = outcomes
        self.answers = list(answers)
        self.attempts = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        answer = self.answers[min(self.attempts, len(self.answers) - 1)]
        self.attempts += 1
        self.outcomes.note(answer)
        return SpanExportResult.SUCCESS if answer == 200 else SpanExportResult.FAILURE

    def shutdown(self) -> None:
        pass


class Clock:
    def __init__(self, step: float) -> None:
        self.now, self.step = 0.0, step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


def retrying(answers: Sequence[int | Exception], **options: Any) -> tuple[RetryingExporter, Any]:
    outcomes = HttpOutcomes()
    inner = Scripted(outcomes, answers)
    exporter = RetryingExporter(inner, outcomes, first_delay=0.001, longest_delay=0.001, **options)
    return exporter, inner


BATCH = [ReadableSpan(name=f"s{i}") for i in range(5)]


@pytest.mark.parametrize(
    "answers",
    [[503, 503, 200], [429, 200], [requests.ConnectionError("refused"), 503, 200]],
    ids=["503", "429", "connection-refused"],
)
def test_a_batch_is_sent_again_while_phoenix_pushes_back(answers: list[Any]) -> None:
    exporter, inner = retrying(answers)
    assert exporter.export(BATCH) is SpanExportResult.SUCCESS
    assert (exporter.exported, exporter.given_up) == (5, 0)
    assert exporter.retries == inner.attempts - 1 == len(answers) - 1


def test_a_rejected_batch_is_given_up_at_once_and_counted() -> None:
    exporter, inner = retrying([400])
    assert exporter.export(BATCH) is SpanExportResult.FAILURE
    assert (exporter.exported, exporter.given_up, inner.attempts) == (0, 5, 1)


def test_after_the_deadline_phoenix_is_gone_and_later_batches_cost_nothing() -> None:
    exporter, inner = retrying([503], deadline=30.0, clock=Clock(step=4.0))
    assert exporter.export(BATCH) is SpanExportResult.FAILURE
    tried = inner.attempts
    assert tried > 2
    assert exporter.export(BATCH) is SpanExportResult.FAILURE
    assert inner.attempts == tried  # not even tried
    assert (exporter.exported, exporter.given_up) == (0, 10)


def test_a_phoenix_that_is_down_is_a_clear_error_and_the_run_goes_on(
    capsys: pytest.CaptureFixture[str],
) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(PhoenixError, match=re.escape(url) + ".*`plangate phoenix up`"):
        PhoenixExport(url)
    code = main(["run", "show the error rate", "--phoenix-url", url, "--json"])
    out, err = capsys.readouterr()
    assert code == 0
    assert '"stop_reason": "finished"' in out
    assert f"Phoenix is not reachable at {url}" in err
    assert "plangate phoenix up" in err
    assert "Traceback" not in err


# --- a real server -------------------------------------------------------------------------------


def spans_in(client: Any, project: str) -> Any:
    from phoenix.client.types.spans import SpanQuery

    query = SpanQuery().select("span_id", "session.id", "plangate.session_id")
    return client.spans.get_spans_dataframe(
        query=query, project_identifier=project, limit=100_000, timeout=60
    )


def test_a_replayed_session_arrives_complete_under_its_namespaced_id(
    phoenix: PhoenixServer, phoenix_client: Any, tmp_path: Path
) -> None:
    project = f"export-replay-{new_run_id()}"
    table = tmp_path / "replay.parquet"
    env = {k: v for k, v in os.environ.items() if k != URL_ENV}
    done = subprocess.run(
        [
            sys.executable, "-m", "plangate", "replay", str(GOLDEN), "--session", SESSION,
            "--phoenix-url", phoenix.url, "--phoenix-project", project, "-o", str(table),
        ],
        capture_output=True, text=True, timeout=600, check=False, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    replayed = pq.read_table(table)
    found = re.search(r"run (\S+)\), (\d+) exported.*?; (\d+) arrived", done.stderr)
    assert found, done.stderr
    run_id, exported, arrived = found[1], int(found[2]), int(found[3])
    assert exported == arrived == replayed.num_rows > 0
    variant = read_dataset(GOLDEN).session(SESSION)["variant"]
    namespaced = f"observability-core:{variant}:{run_id}:{SESSION}"

    spans = spans_in(phoenix_client, project)
    ours = spans[spans["session.id"] == namespaced]
    assert len(ours) == replayed.num_rows
    assert set(ours.index) == set(replayed["span_id"].to_pylist())
    assert set(ours["plangate.session_id"]) == {SESSION}
    session = phoenix_client.sessions.get(session_id=namespaced)
    assert len(session["traces"]) == len(set(replayed["trace_id"].to_pylist()))  # one per turn


def test_a_burst_meets_back_pressure_and_every_span_is_accounted_for(
    phoenix: PhoenixServer, phoenix_client: Any
) -> None:
    project = f"export-burst-{new_run_id()}"
    export = PhoenixExport(phoenix.url, project=project)
    tracer = export.provider.get_tracer("burst")
    for trace in range(BURST // 100):  # 100 spans a trace, flushed as each trace ends
        with tracer.start_as_current_span("turn", attributes={SESSION_ID: f"burst-{trace % 3}"}):
            for step in range(99):
                with tracer.start_as_current_span(f"step-{step}", attributes={"step": step}):
                    pass
    report = export.close(timeout=300)

    assert report.sent == BURST
    assert report.throttled > 0, "the burst never met Phoenix's back-pressure (503)"
    assert export.outcomes.statuses[503] == report.throttled
    assert report.dropped == 0
    assert report.arrived is not None
    assert report.arrived + report.missing == report.sent
    assert report.missing == 0, report.summary()
    assert len(spans_in(phoenix_client, project)) == report.arrived
