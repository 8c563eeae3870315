"""`plangate dataset from-phoenix`: a session seen in Phoenix becomes a golden that replays.

Against the real server of `conftest.phoenix`: a turn of the reference agent goes to Phoenix
under a namespaced session id, comes back as a golden with the real command, validates, and
replays with the strict cassette to the same trajectory. The pager is checked against Phoenix's
silent truncation with more spans than the client's default limits and a small page size.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace

from plangate.ci import telemetry
from plangate.ci.phoenix._client import PhoenixError
from plangate.ci.phoenix._fetch import fetch_spans, golden_from_phoenix, with_original_sessions
from plangate.ci.phoenix._server import PhoenixServer
from plangate.replay import read_dataset, replay_turn
from tests.helpers import plangate
from tests.phoenix.sending import SentTurn, send_replayed_turn, tool_calls, wait_for_spans

PROJECT = "from-phoenix"
NAMESPACE = "observability-core:alyx:run-1"
PAGED = "paged"
BIG = 150
"""Spans of the big session: more than `get_spans`' default of 100."""
TIED = 50
"""Spans that start in the same microsecond: more than the small page size."""
TWIN = 30


@pytest.fixture(scope="module")
def sent(phoenix: PhoenixServer) -> SentTurn:
    """obs-008 turn 0, replayed, in Phoenix as `observability-core:alyx:run-1:obs-008`."""
    return send_replayed_turn(phoenix, PROJECT, "obs-008", 0, namespace=NAMESPACE)


def test_a_phoenix_session_becomes_a_golden_that_replays_the_same(
    phoenix: PhoenixServer, sent: SentTurn, tmp_path: Path
) -> None:
    out = tmp_path / "datasets" / "from-prod"
    done = plangate(
        "dataset", "from-phoenix", "--phoenix-url", phoenix.url, "--phoenix-project", PROJECT,
        "--session", "obs-008", "-o", str(out),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert f"1 sessions, 1 turns, {len(sent.span_ids)} spans" in done.stdout
    checked = plangate("dataset", "validate", str(out))
    assert checked.returncode == 0, checked.stdout
    assert "valid: 1 sessions, 1 turns" in checked.stdout

    golden = read_dataset(out)
    assert golden.sessions["session_id"].to_pylist() == ["obs-008"]  # the original id
    assert set(golden.spans["span_id"].to_pylist()) == sent.span_ids
    replayed = plangate(
        "replay", str(out), "--model", "cassette", "--tools", "cassette", "--json"
    )  # fmt: skip
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    [summary] = json.loads(replayed.stdout)
    assert summary["identical"] and summary["error"] is None and summary["drift"] == []

    again = asyncio.run(replay_turn(golden, "obs-008", 0, model="cassette", tools="cassette"))
    assert again.error is None and again.divergence is None
    assert tool_calls(again) == tool_calls(sent.result) and len(tool_calls(again)) > 5
    assert again.result is not None and sent.result.result is not None
    assert again.result.stop_reason == sent.result.result.stop_reason == "finished"
    assert again.replayed == sent.result.replayed


def test_the_phoenix_session_id_and_the_whole_project_give_the_same_golden(
    phoenix: PhoenixServer, sent: SentTurn, tmp_path: Path
) -> None:
    by_phoenix_id = golden_from_phoenix(
        phoenix.url, PROJECT, [f"{NAMESPACE}:obs-008"], tmp_path / "one"
    )
    whole = golden_from_phoenix(phoenix.url, PROJECT, None, tmp_path / "all", page_size=7)
    for folder in (by_phoenix_id, whole):
        dataset = read_dataset(folder)
        assert dataset.sessions["session_id"].to_pylist() == ["obs-008"]
        assert json.loads(dataset.turn("obs-008", 0)["steps"]) == sent.result.recorded


def test_unknown_sessions_and_projects_are_usage_errors(
    phoenix: PhoenixServer, sent: SentTurn, tmp_path: Path
) -> None:
    out = tmp_path / "nothing"
    done = plangate(
        "dataset", "from-phoenix", "--phoenix-url", phoenix.url, "--phoenix-project", PROJECT,
        "--session", "obs-404", "-o", str(out),
    )  # fmt: skip
    assert done.returncode == 2
    assert "plangate: error: no session 'obs-404'" in done.stderr
    assert f"{NAMESPACE}:obs-008" in done.stderr  # names the sessions there are
    done = plangate(
        "dataset", "from-phoenix", "--phoenix-url", phoenix.url, "--phoenix-project", "nope", "-o", str(out)
    )  # fmt: skip
    assert done.returncode == 2 and "no project 'nope'" in done.stderr
    assert not out.exists()


def _synthetic(phoenix: PhoenixServer) -> dict[str, set[str]]:
    """Sessions of made-up spans, many starting in the same microsecond; span ids per session.

    `paged:run-1:big` (original `big`): one root and BIG - 1 children, in groups of TIED that
    start together; `paged:run-1:twin` and `paged:run-2:twin`: two runs of one original.
    """
    wiring = telemetry("otlp", endpoint=phoenix.traces_url, project=PAGED)
    assert wiring.provider is not None
    tracer = wiring.provider.get_tracer("synthetic")
    start = 1_700_000_000_000_000_000
    sessions = {f"{PAGED}:run-1:big": ("big", BIG), f"{PAGED}:run-1:twin": ("twin", TWIN)}
    sessions[f"{PAGED}:run-2:twin"] = ("twin", TWIN)
    sent: dict[str, set[str]] = {}
    for offset, (session, (original, count)) in enumerate(sessions.items()):
        base = start + offset * 1_000_000_000
        stamp = {"session.id": session, "plangate.session_id": original}
        root = tracer.start_span("agent.turn", start_time=base, attributes=stamp)
        context = trace.set_span_in_context(root)
        ids = {f"{root.get_span_context().span_id:016x}"}
        for index in range(count - 1):
            moment = base + 1000 * (1 + index // TIED)  # TIED spans per microsecond
            child = tracer.start_span("tool.x", context, start_time=moment, attributes=stamp)
            child.end(end_time=moment + 1000)
            ids.add(f"{child.get_span_context().span_id:016x}")
        root.end(end_time=base + 10_000_000)
        sent[session] = ids
    wiring.shutdown()
    wait_for_spans(phoenix, PAGED, set().union(*sent.values()))
    return sent


@pytest.fixture(scope="module")
def synthetic(phoenix: PhoenixServer) -> dict[str, set[str]]:
    return _synthetic(phoenix)


def test_the_pager_fetches_past_the_clients_silent_limits(
    phoenix_client: Any, synthetic: dict[str, set[str]]
) -> None:
    everything = set().union(*synthetic.values())
    assert len(everything) == BIG + 2 * TWIN
    # What the client gives without paging: its default limit, silently.
    assert len(phoenix_client.spans.get_spans(project_identifier=PAGED)) == 100
    assert len(phoenix_client.spans.get_spans_dataframe(project_identifier=PAGED, limit=40)) == 40
    for page_size in (40, 1000):
        frame = fetch_spans(phoenix_client, PAGED, page_size=page_size)
        assert len(frame) == len(everything) and set(frame["context.span_id"]) == everything
    big = fetch_spans(phoenix_client, PAGED, ["big"], page_size=40)
    assert set(big["context.span_id"]) == synthetic[f"{PAGED}:run-1:big"]
    named = with_original_sessions(fetch_spans(phoenix_client, PAGED))
    assert set(named["attributes.session.id"]) == {
        "big", f"{PAGED}:run-1:twin", f"{PAGED}:run-2:twin"
    }  # fmt: skip


def test_an_original_id_of_two_runs_is_ambiguous(
    phoenix_client: Any, synthetic: dict[str, set[str]]
) -> None:
    with pytest.raises(PhoenixError, match="'twin' is the original of 2 Phoenix sessions"):
        fetch_spans(phoenix_client, PAGED, ["twin"])
    frame = fetch_spans(phoenix_client, PAGED, [f"{PAGED}:run-2:twin"])
    assert set(frame["context.span_id"]) == synthetic[f"{PAGED}:run-2:twin"]


class _Listing:
    """A client whose independent listing has one span more than the span query returns."""

    def __init__(self, client: Any) -> None:
        self.projects, self.sessions, self._spans = client.projects, client.sessions, client.spans
        self.spans = self

    def get_spans_dataframe(self, **options: Any) -> Any:
        return self._spans.get_spans_dataframe(**options)

    def get_spans(self, **options: Any) -> list[Any]:
        ghost = {"context": {"span_id": "00000000000000ff", "trace_id": "0" * 32}}
        return [*self._spans.get_spans(**options), ghost]


def test_a_fetch_that_disagrees_with_the_listing_fails_loudly(
    phoenix_client: Any, synthetic: dict[str, set[str]]
) -> None:
    total = BIG + 2 * TWIN
    with pytest.raises(PhoenixError, match=f"fetched {total} spans but Phoenix lists {total + 1}"):
        fetch_spans(_Listing(phoenix_client), PAGED)
