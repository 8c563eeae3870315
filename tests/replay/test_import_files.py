"""Spans spread over several files, imported together as if one file held them all.

An OpenTelemetry collector's file exporter starts a new file every so often, whatever is in
flight: a trace's spans, and a session's turns, land in two files or more. Importing the files
must give the table that importing all their spans as one file gives: the same sessions (a
child span carries no `session.id`, its trace's root does), turns numbered across the files,
model calls numbered within whole turns.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from plangate.replay import TraceTableError, import_traces
from tests.replay.test_import_spans import parsed, phoenix_frame

BASE_NS = 1_700_000_000_000_000_000


def text(key: str, value: str) -> dict[str, Any]:
    return {"key": key, "value": {"stringValue": value}}


def otlp_span(
    trace: str, span: str, parent: str | None, start: int, attributes: list[dict[str, Any]]
) -> dict[str, Any]:
    return {
        "traceId": trace,
        "spanId": span,
        **({"parentSpanId": parent} if parent else {}),
        "name": attributes[0]["value"]["stringValue"].lower(),
        "startTimeUnixNano": str(BASE_NS + start),
        "endTimeUnixNano": str(BASE_NS + start + 500),
        "attributes": attributes,
    }


def agent_spans(sessions: list[list[int]]) -> list[dict[str, Any]]:
    """OpenInference turns of another team's agent: no turn index, `session.id` on the root.

    `sessions[s][t]` is how many model calls (each followed by a tool call) turn t of session s
    makes. Spans come children first, as an exporter sends them: each when it ends.
    """
    spans = []
    for s, turns in enumerate(sessions):
        for t, calls in enumerate(turns):
            trace, root = f"{s + 1:016x}{t + 1:016x}", f"a{s + 1:07x}{t + 1:08x}"
            start = (s * 100 + t) * 1_000_000  # a session's turns one after another
            for c in range(calls):
                at = start + 1_000 * (c + 1)
                spans.append(otlp_span(trace, f"c{t + 1:07x}{2 * c:08x}", root, at, [
                    text("openinference.span.kind", "LLM")]))  # fmt: skip
                spans.append(otlp_span(trace, f"c{t + 1:07x}{2 * c + 1:08x}", root, at + 600, [
                    text("openinference.span.kind", "TOOL"), text("tool.name", f"t{c % 2}")]))  # fmt: skip
            spans.append(otlp_span(trace, root, None, start, [
                text("openinference.span.kind", "AGENT"), text("session.id", f"s{s}"),
                text("input.value", f"request {t}")]))  # fmt: skip
    return spans


def write_request(path: Path, spans: list[dict[str, Any]]) -> Path:
    path.write_text(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}))
    return path


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    sessions=st.lists(st.lists(st.integers(0, 3), min_size=1, max_size=3), min_size=1, max_size=3),
    order=st.randoms(use_true_random=False),
    cuts=st.lists(st.integers(1, 200), max_size=4),
)
def test_spans_cut_into_files_import_as_one_file_does(
    tmp_path_factory: pytest.TempPathFactory,
    sessions: list[list[int]],
    order: Any,
    cuts: list[int],
) -> None:
    folder = tmp_path_factory.mktemp("cut")
    spans = agent_spans(sessions)
    order.shuffle(spans)  # sessions interleaved, as concurrent ones are
    bounds = [0, *sorted({c for c in cuts if c < len(spans)}), len(spans)]
    files = [
        write_request(folder / f"part-{i}.json", spans[start:end])
        for i, (start, end) in enumerate(zip(bounds, bounds[1:], strict=False))
    ]
    whole = import_traces("otlp-json", [write_request(folder / "all.json", spans)])

    assert import_traces("otlp-json", files).equals(whole)
    turns = {(r["session_id"], r["turn_index"]) for r in whole.to_pylist()}
    assert turns == {(f"s{s}", t) for s, counts in enumerate(sessions) for t in range(len(counts))}


def test_a_bad_value_names_the_file_its_span_is_in(tmp_path: Path) -> None:
    spans = agent_spans([[1, 1]])
    spans[-1]["attributes"].append({"key": "plangate.turn_index", "value": {"stringValue": "x"}})
    first = write_request(tmp_path / "a.json", spans[:3])
    second = write_request(tmp_path / "b.json", spans[3:])
    with pytest.raises(TraceTableError) as raised:
        import_traces("otlp-json", [first, second])
    message = str(raised.value)
    assert message.startswith(f"{second}: span ")
    assert "plangate.turn_index is 'x', expected a whole number" in message


def test_a_span_in_two_files_or_twice_in_one_is_named(tmp_path: Path) -> None:
    spans = agent_spans([[2]])
    first = write_request(tmp_path / "a.json", spans[:3])
    second = write_request(tmp_path / "b.json", spans[2:])  # span 2 in both
    key = f"{spans[2]['traceId']}/{spans[2]['spanId']}"
    with pytest.raises(TraceTableError) as raised:
        import_traces("otlp-json", [first, second])
    assert str(raised.value).startswith(f"{first} and {second} both hold span {key!r} ")
    twice = write_request(tmp_path / "c.json", [*spans, spans[2]])
    with pytest.raises(TraceTableError) as raised:
        import_traces("otlp-json", [twice])
    assert str(raised.value).startswith(f"{twice}: span {key!r} (trace_id/span_id) is in it twice")
    with pytest.raises(TraceTableError, match=rf"^{first}: given twice"):
        import_traces("otlp-json", [first, second, first])


def test_files_of_no_agent_spans_are_read_with_the_others(tmp_path: Path) -> None:
    """A file of only a web server's spans, say: their agent spans may be in the next file."""
    spans = agent_spans([[1]])
    web = [otlp_span("e" * 32, "f" * 16, None, 0, [text("http.method", "GET")])]
    files = [write_request(tmp_path / "web.json", web), write_request(tmp_path / "a.json", spans)]
    assert import_traces("otlp-json", files).num_rows == len(spans) + 1
    with pytest.raises(TraceTableError, match=r"web\.json: none of the 1 spans is in OpenInf"):
        import_traces("otlp-json", files[:1])


def test_a_phoenix_frame_saved_in_two_files_imports_as_one(tmp_path: Path) -> None:
    frame = phoenix_frame()
    frame.to_parquet(tmp_path / "all.parquet")
    frame.iloc[:1].to_parquet(tmp_path / "a.parquet")
    frame.iloc[1:].to_parquet(tmp_path / "b.parquet")
    whole = import_traces("phoenix", [tmp_path / "all.parquet"])
    cut = import_traces("phoenix", [tmp_path / "a.parquet", tmp_path / "b.parquet"])
    assert parsed(cut) == parsed(whole)
    assert {r["session_id"] for r in cut.to_pylist()} == {"ph-1"}
