"""Scores as Phoenix annotations, and links to Phoenix's pages, against a real Phoenix server.

Three sessions of the observability golden dataset are run afresh by the naive variant on the
forgetful simulated model (two of their six turns fail `task_completion`), exported to Phoenix
over OTLP and kept as a trace table at the same time, then scored. Session ids are unique per
test run: Phoenix session ids are global.
"""

from __future__ import annotations

import asyncio
import json
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from plangate.ci import telemetry
from plangate.ci.cli import main
from plangate.ci.phoenix._annotations import AnnotationError, AnnotationReport, annotate
from plangate.ci.phoenix._client import (
    PhoenixRequestError,
    UnknownProjectError,
    client_url,
    project_id,
)
from plangate.ci.phoenix._server import PhoenixServer, free_port
from plangate.ci.phoenix.names import session_url, trace_url
from plangate.evaluators import RubricSet, agent_spans, evaluate, rubric_from_dict
from plangate.harness import Agent, get_domain, load_variant, model_from_spec
from plangate.replay import TraceTableError, TraceTableExporter, read_dataset

# The Phoenix client's dataframe readers (3.5) call `DataFrame.rename(inplace=True)`, which
# pandas 3.1 deprecates.
pytestmark = pytest.mark.filterwarnings("ignore::pandas.errors.Pandas4Warning")

GOLDEN = Path(__file__).resolve().parents[2] / "datasets" / "observability-core"
SESSIONS = ("obs-001", "obs-008", "obs-009")


@dataclass(frozen=True)
class Scored:
    project: str
    traces: pa.Table
    scores: pa.Table
    report: AnnotationReport


@pytest.fixture(scope="module")
def client(phoenix: PhoenixServer) -> Any:
    from phoenix.client import Client

    return Client(base_url=phoenix.url)


@pytest.fixture(scope="module")
def scored(phoenix: PhoenixServer, client: Any) -> Scored:
    """The sessions run, exported, scored and annotated once for the module."""
    token = secrets.token_hex(3)
    project = f"annotations-{token}"
    wiring = telemetry("otlp", endpoint=phoenix.traces_url, project=project)
    memory = TraceTableExporter()
    assert wiring.provider is not None
    wiring.provider.add_span_processor(SimpleSpanProcessor(memory))
    rubrics = asyncio.run(_run_sessions(wiring.provider, token))
    wiring.shutdown()
    traces = memory.table()
    scores = evaluate(traces, rubrics)
    report = annotate(client, scores, traces, project=project, timeout=120)
    return Scored(project, traces, scores, report)


async def _run_sessions(provider: Any, token: str) -> RubricSet:
    golden = read_dataset(GOLDEN)
    domain = get_domain("observability")
    rubrics = {}
    for session_id in SESSIONS:
        seed = golden.session(session_id)["seed"]
        agent = Agent(
            model=model_from_spec("sim:forgetful", domain=domain, seed=seed),
            variant=load_variant("naive"),
            tools=domain.make_tools,
            instructions=domain.instructions,
            tracer_provider=provider,
        )
        session = agent.session(f"{session_id}-{token}", user_id="analyst")
        for turn in golden.turns.to_pylist():
            if turn["session_id"] == session_id:
                key = (session.session_id, turn["turn_index"])
                rubrics[key] = rubric_from_dict(json.loads(turn["rubric"]))
                await session.run_turn(turn["request"])
    return RubricSet(turns=rubrics)


def _agents(traces: pa.Table) -> pa.Table:
    return traces.filter(pc.equal(traces["span_kind"], "AGENT"))


def _failing_spans(scored: Scored, evaluator: str) -> set[str]:
    failing = {
        (r["session_id"], r["turn_index"])
        for r in scored.scores.to_pylist()
        if r["evaluator"] == evaluator and not r["passed"]
    }
    return {
        r["span_id"]
        for r in _agents(scored.traces).to_pylist()
        if (r["session_id"], r["turn_index"]) in failing
    }


def test_every_score_is_an_annotation_on_its_turns_span_trace_and_session(
    scored: Scored, client: Any
) -> None:
    rows = scored.scores.num_rows
    evaluators = set(scored.scores["evaluator"].to_pylist())
    assert scored.report.span_annotations == rows
    assert scored.report.trace_annotations == rows  # one turn per trace
    assert scored.report.session_annotations == len(SESSIONS) * len(evaluators)
    assert scored.report.unmatched == ()

    agents = _agents(scored.traces).to_pylist()
    stored = client.spans.get_span_annotations_dataframe(
        span_ids=[a["span_id"] for a in agents], project_identifier=scored.project
    )
    assert len(stored) == rows
    assert set(stored["annotator_kind"]) == {"CODE"}
    span_of = {(a["session_id"], a["turn_index"]): a["span_id"] for a in agents}
    expected = {
        (span_of[(r["session_id"], r["turn_index"])], r["evaluator"]): (r["label"], r["score"])
        for r in scored.scores.to_pylist()
    }
    got = {
        (span, row["annotation_name"]): (row["result.label"], row["result.score"])
        for span, row in stored.iterrows()
    }
    assert got.keys() == expected.keys()
    for key, (label, score) in expected.items():
        assert got[key][0] == label
        assert (score is None and got[key][1] != got[key][1]) or got[key][1] == pytest.approx(score)


def test_sessions_get_the_share_of_passing_turns(scored: Scored, client: Any) -> None:
    session_ids = sorted(set(scored.traces["session_id"].to_pylist()))
    response = client._client.get(
        f"v1/projects/{scored.project}/session_annotations",
        params={"session_ids": session_ids, "include_annotation_names": ["task_completion"]},
    )
    response.raise_for_status()
    by_session = {a["session_id"]: a for a in response.json()["data"]}
    assert by_session.keys() == set(session_ids)
    for session_id, annotation in by_session.items():
        rows = [
            r
            for r in scored.scores.to_pylist()
            if r["session_id"] == session_id and r["evaluator"] == "task_completion"
        ]
        passed = sum(r["passed"] for r in rows)
        assert annotation["result"]["score"] == pytest.approx(passed / len(rows))
        assert annotation["result"]["label"] == ("pass" if passed == len(rows) else "fail")
        assert annotation["metadata"]["failing_turns"] == sorted(
            r["turn_index"] for r in rows if not r["passed"]
        )

    traces = sorted(set(scored.traces["trace_id"].to_pylist()))
    response = client._client.get(
        f"v1/projects/{scored.project}/trace_annotations",
        params={"trace_ids": traces, "include_annotation_names": ["task_completion"]},
    )
    response.raise_for_status()
    assert {a["trace_id"] for a in response.json()["data"]} == set(traces)


def test_the_span_filter_returns_exactly_the_failing_turns(scored: Scored, client: Any) -> None:
    from phoenix.client.types.spans import SpanQuery

    failing = _failing_spans(scored, "task_completion")
    assert failing, "the forgetful model should fail some turns"
    assert len(failing) < _agents(scored.traces).num_rows, "and pass others"

    query = SpanQuery().where("annotations['task_completion'].score < 1")
    found = client.spans.get_spans_dataframe(
        query=query, project_identifier=scored.project, limit=1000, timeout=30
    )
    assert set(found["context.span_id"]) == failing
    assert set(found["span_kind"]) == {"AGENT"}


def test_annotating_again_replaces_rather_than_duplicates(scored: Scored, client: Any) -> None:
    again = annotate(client, scored.scores, scored.traces, project=scored.project)
    assert again.span_annotations == scored.report.span_annotations
    agents = _agents(scored.traces)["span_id"].to_pylist()
    stored = client.spans.get_span_annotations_dataframe(
        span_ids=agents, project_identifier=scored.project
    )
    assert len(stored) == scored.scores.num_rows


def test_a_turn_missing_from_the_traces_is_reported_not_logged(scored: Scored, client: Any) -> None:
    dropped = SESSIONS[0]
    traces = scored.traces.filter(pc.invert(pc.starts_with(scored.traces["session_id"], dropped)))
    report = annotate(client, scored.scores, traces, project=scored.project)
    missing = set(report.unmatched)
    assert missing and all(k.startswith(dropped) for k in missing)
    per_turn = len(set(scored.scores["evaluator"].to_pylist()))
    assert report.span_annotations == scored.scores.num_rows - per_turn * len(missing)


def test_trace_links_open_the_trace_in_its_project(
    scored: Scored, client: Any, phoenix: PhoenixServer
) -> None:
    import urllib.request

    pid = project_id(client, scored.project)
    assert scored.report.project_id == pid
    (session_id, turn), url = next(iter(sorted(scored.report.trace_urls.items())))
    agent = next(
        a
        for a in _agents(scored.traces).to_pylist()
        if (a["session_id"], a["turn_index"]) == (session_id, turn)
    )
    assert url == f"{phoenix.url}/projects/{pid}/traces/{agent['trace_id']}"
    assert url == trace_url(client_url(client), pid, agent["trace_id"])
    for page in (url, session_url(phoenix.url, session_id)):
        with urllib.request.urlopen(page, timeout=10) as response:
            assert response.status == 200
            assert "<title>Phoenix</title>" in response.read().decode()

    # Every path answers 200 with the app, so check that the link's ids name this trace.
    query = (
        "query($id: ID!, $trace: ID!) { node(id: $id) { ... on Project { name "
        "trace(traceId: $trace) { traceId } } } }"
    )
    answer = client._client.post(
        "graphql", json={"query": query, "variables": {"id": pid, "trace": agent["trace_id"]}}
    ).json()
    assert answer["data"]["node"] == {
        "name": scored.project,
        "trace": {"traceId": agent["trace_id"]},
    }


def test_an_unknown_project_is_an_error_naming_it(scored: Scored, client: Any) -> None:
    with pytest.raises(UnknownProjectError, match=r"no-such-project.*http://127\.0\.0\.1"):
        annotate(client, scored.scores, scored.traces, project="no-such-project", timeout=1)
    with pytest.raises(UnknownProjectError, match="projects there: .*annotations-"):
        project_id(client, "no-such-project")


def test_a_server_that_is_down_is_an_error_naming_its_url(scored: Scored) -> None:
    from phoenix.client import Client

    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(PhoenixRequestError, match=f"cannot reach Phoenix at {url}"):
        annotate(Client(base_url=url), scored.scores, scored.traces, project="p", timeout=1)


def test_scores_of_several_repeats_are_refused(scored: Scored, client: Any) -> None:
    twice = pa.concat_tables([scored.scores, scored.scores])
    with pytest.raises(AnnotationError, match="several repeats"):
        annotate(client, twice, scored.traces, project=scored.project)


def test_a_turns_span_without_its_ids_is_named_by_file_and_row(tmp_path: Path) -> None:
    spans = pq.read_table(GOLDEN / "spans.parquet")
    (tmp_path / "lake").mkdir()
    pq.write_table(spans.slice(0, 0), tmp_path / "lake" / "empty.parquet")
    assert agent_spans(tmp_path / "lake").num_rows == 0  # no rows: no turns, no error
    kinds, ids = spans["span_kind"].to_pylist(), spans["trace_id"].to_pylist()
    holes = [None if kind == "AGENT" else id_ for kind, id_ in zip(kinds, ids, strict=True)]
    column = spans.schema.get_field_index("trace_id")
    pq.write_table(spans.set_column(column, "trace_id", pa.array(holes)), tmp_path / "lake" / "h")
    message = f"h: row {kinds.index('AGENT')}: the AGENT span's trace_id is null"
    with pytest.raises(TraceTableError, match=message):
        agent_spans(tmp_path / "lake")
    lower = pa.array([kind.lower() for kind in kinds])  # no AGENT row left: every turn unmatched
    column = spans.schema.get_field_index("span_kind")
    pq.write_table(spans.set_column(column, "span_kind", lower), tmp_path / "lake" / "h")
    with pytest.raises(TraceTableError, match=r"h: row 0, column 'span_kind' is '\w+'; allowed"):
        agent_spans(tmp_path / "lake")


def test_the_command_annotates_and_lists_failing_turns_with_links(
    scored: Scored, phoenix: PhoenixServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pq.write_table(scored.scores, tmp_path / "scores.parquet")
    pq.write_table(scored.traces, tmp_path / "traces.parquet")
    files = [str(tmp_path / "scores.parquet"), str(tmp_path / "traces.parquet")]
    for number, session in enumerate(sorted(set(scored.traces["session_id"].to_pylist()))):
        folder = tmp_path / "lake" / f"day={number}"  # production traces: a folder of parts
        folder.mkdir(parents=True)
        pq.write_table(
            scored.traces.filter(pc.equal(scored.traces["session_id"], session)),
            folder / "part-0.parquet",
        )

    for traces in (files[1], str(tmp_path / "lake"), f"{tmp_path}/lake/day=*/"):
        code = main(
            [
                "phoenix",
                "annotate",
                files[0],
                traces,
                "--phoenix-url",
                phoenix.url,
                "--phoenix-project",
                scored.project,
            ]
        )
        out = capsys.readouterr().out
        assert code == 0, traces
        assert f"{scored.scores.num_rows} span" in out
        assert "not in the traces" not in out
        assert "task_completion failed" in out and f"{phoenix.url}/projects/" in out

    down = f"http://127.0.0.1:{free_port()}"
    code = main(
        [
            "phoenix",
            "annotate",
            *files,
            "--phoenix-url",
            down,
            "--phoenix-project",
            "p",
            "--timeout",
            "1",
        ]
    )
    assert code == 2
    assert f"cannot reach Phoenix at {down}" in capsys.readouterr().err
