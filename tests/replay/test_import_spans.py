"""OpenInference spans from files into the trace table: OTLP JSON files, Phoenix dataframes."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pytest
from google.protobuf.json_format import MessageToDict
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan

from plangate.replay import TraceTableError, import_formats, import_traces
from plangate.replay.importers._otlp import otlp_json_from_spans, read_otlp_json
from plangate.replay.importers._phoenix import from_phoenix_dataframe, read_phoenix
from tests.replay.test_exporter import HEX16, HEX32, traced_session

# -- OTLP JSON ------------------------------------------------------------------------------


def without(table: pa.Table, *columns: str) -> list[dict[str, Any]]:
    return table.drop_columns(list(columns)).to_pylist()


def resource_attributes(spans: Sequence[ReadableSpan]) -> dict[str, Any]:
    return dict(spans[0].resource.attributes)


async def test_otlp_json_file_round_trips_to_the_exporters_table(tmp_path: Path) -> None:
    table, spans, _ = await traced_session()
    request = otlp_json_from_spans(spans)
    first = request["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    assert HEX32.match(first["traceId"]) and HEX16.match(first["spanId"])  # hex, per OTLP/JSON
    path = tmp_path / "spans.json"
    path.write_text(json.dumps(request, indent=2))

    imported = read_otlp_json(path)

    assert without(imported, "source", "attributes") == without(table, "source", "attributes")
    assert set(imported.column("source").to_pylist()) == {"otlp"}
    resource = resource_attributes(spans)
    assert resource["telemetry.sdk.language"] == "python"
    for ours, theirs in zip(table.to_pylist(), imported.to_pylist(), strict=True):
        expected = {**resource, **json.loads(ours["attributes"])}
        assert json.loads(theirs["attributes"]) == expected


async def test_otlp_json_lines_one_request_per_line(tmp_path: Path) -> None:
    table, spans, _ = await traced_session()
    by_trace: dict[int, list[ReadableSpan]] = {}
    for span in spans:
        by_trace.setdefault(span.context.trace_id, []).append(span)
    path = tmp_path / "collector.jsonl"
    lines = [json.dumps(otlp_json_from_spans(group)) for group in by_trace.values()]
    path.write_text("\n".join(lines) + "\n\n")
    assert len(lines) == 2

    imported = import_traces("otlp-json", [path])

    assert without(imported, "attributes", "source") == without(table, "attributes", "source")


async def test_otlp_json_with_base64_ids_as_protobuf_writes_them(tmp_path: Path) -> None:
    table, spans, _ = await traced_session()
    request = MessageToDict(encode_spans(spans))  # ids in base64, status as enum names
    first = request["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    assert len(first["spanId"]) == 12 and not HEX16.match(first["spanId"])
    path = tmp_path / "protobuf.json"
    path.write_text(json.dumps(request))

    imported = read_otlp_json(path)

    assert without(imported, "attributes", "source") == without(table, "attributes", "source")
    assert "ERROR" in imported.column("status_code").to_pylist()


def span_json(**fields: Any) -> dict[str, Any]:
    span = {
        "traceId": "0af7651916cd43dd8448eb211c80319c",
        "spanId": "b7ad6b7169203331",
        "name": "s",
        "startTimeUnixNano": "1700000000123456789",
        "endTimeUnixNano": "1700000001000000000",
        "attributes": [
            {"key": "openinference.span.kind", "value": {"stringValue": "LLM"}},
            {"key": "llm.token_count.prompt", "value": {"intValue": "12"}},
            {"key": "llm.token_count.completion", "value": {"intValue": 3}},
            {"key": "temperature", "value": {"doubleValue": 0.5}},
            {"key": "streaming", "value": {"boolValue": False}},
            {
                "key": "tag.tags",
                "value": {"arrayValue": {"values": [{"stringValue": "a"}, {"stringValue": "b"}]}},
            },
        ],
        "status": {"code": 2, "message": "boom"},
    }
    span.update(fields)
    return {"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}


def test_otlp_values_times_and_status_by_the_spec(tmp_path: Path) -> None:
    path = tmp_path / "one.json"
    path.write_text(json.dumps(span_json()))
    (row,) = read_otlp_json(path).to_pylist()
    assert (row["tokens_prompt"], row["tokens_completion"]) == (12, 3)
    assert row["start_time"] == datetime(2023, 11, 14, 22, 13, 20, 123456, tzinfo=UTC)
    assert row["end_time"] - row["start_time"] == timedelta(microseconds=876544)
    assert (row["status_code"], row["status_message"]) == ("ERROR", "boom")
    assert row["session_id"] == row["trace_id"] == "0af7651916cd43dd8448eb211c80319c"
    assert json.loads(row["attributes"]) == {
        "streaming": False,
        "tag.tags": ["a", "b"],
        "temperature": 0.5,
    }


BAD_OTLP = [
    ("{not json", "not JSON"),
    ('{"resourceSpans": []}\n{"resourceSpans": [}\n', "line 2: not JSON"),
    ('{"spans": []}', "no 'resourceSpans'"),
    ("", "empty"),
    (json.dumps(span_json(spanId=None)), "resourceSpans[0].scopeSpans[0].spans[0]: no 'spanId'"),
    (json.dumps(span_json(spanId="xyz")), "spanId 'xyz' is neither 16 hex digits nor base64"),
    (json.dumps(span_json(status={"code": 7})), "status code 7"),
    (
        json.dumps(
            span_json(attributes=[{"key": "plangate.iteration", "value": {"intValue": "x"}}])
        ),
        "attribute 'plangate.iteration' = 'x' is not a valid intValue",
    ),
    (
        json.dumps(
            span_json(attributes=[{"key": "plangate.iteration", "value": {"stringValue": "third"}}])
        ),
        "plangate.iteration is 'third', expected a whole number",
    ),
    (json.dumps(span_json(status=[1])), "spans[0]: 'status' is not a JSON object"),
    (json.dumps(span_json(status=[])), "spans[0]: 'status' is not a JSON object"),
    (json.dumps(span_json(status={"code": True})), "status code True is not 0, 1, 2"),
    (  # JSON, read as infinity
        json.dumps(span_json(startTimeUnixNano="X")).replace('"X"', "1e400"),
        "startTimeUnixNano inf is not a time in nanoseconds",
    ),
    (
        json.dumps(span_json(attributes=[{"key": "n", "value": {"intValue": "X"}}])).replace(
            '"X"', "1e400"
        ),
        "attribute 'n' = inf is not a valid intValue",
    ),
    (json.dumps(span_json(status={"code": [1]})), "status code [1] is not 0, 1, 2"),
    (
        json.dumps({"resourceSpans": [{**span_json()["resourceSpans"][0], "resource": ["x"]}]}),
        "resourceSpans[0]: 'resource' is not a JSON object",
    ),
    (  # past the year 9999
        json.dumps(span_json(startTimeUnixNano="1" + "0" * 23)),
        "startTimeUnixNano '1" + "0" * 23 + "' is not a time in nanoseconds",
    ),
    (  # past a 64-bit count
        json.dumps(
            span_json(
                attributes=[{"key": "llm.token_count.prompt", "value": {"intValue": "9" * 20}}]
            )
        ),
        "(span 'b7ad6b7169203331'), column 'tokens_prompt': " + "9" * 20 + " is not int64",
    ),
    (  # a digit to str.isdigit, not to int
        json.dumps(
            span_json(attributes=[{"key": "plangate.iteration", "value": {"stringValue": "²"}}])
        ),
        "plangate.iteration is '²', expected a whole number",
    ),
]


@pytest.mark.parametrize(("text", "message"), BAD_OTLP)
def test_bad_otlp_files_name_the_file_and_the_problem(
    tmp_path: Path, text: str, message: str
) -> None:
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(TraceTableError) as raised:
        read_otlp_json(path)
    assert str(path) in str(raised.value)
    assert message in str(raised.value)


def test_both_formats_are_registered() -> None:
    assert {"otlp-json", "phoenix"} <= set(import_formats())


# -- Phoenix dataframes ---------------------------------------------------------------------

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
ROOT, LLM, TOOL = "00f067aa0ba902b7", "1111111111111111", "2222222222222222"
T0 = pd.Timestamp("2025-03-01T10:00:00.000Z")


def phoenix_frame() -> pd.DataFrame:
    """Three spans shaped as `Client().spans.get_spans_dataframe()` returns them."""
    nan = float("nan")
    frame = pd.DataFrame(
        {
            "name": ["agent.turn", "llm.call", "tool.add"],
            "span_kind": ["AGENT", "LLM", "TOOL"],
            "parent_id": [None, ROOT, ROOT],
            "start_time": [T0, T0 + pd.Timedelta("10ms"), T0 + pd.Timedelta("20ms")],
            "end_time": [
                T0 + pd.Timedelta("1s"),
                T0 + pd.Timedelta("15ms"),
                T0 + pd.Timedelta("25ms"),
            ],
            "status_code": ["OK", "UNSET", "ERROR"],
            "status_message": ["", "", "bad numbers"],
            "events": [
                [
                    {
                        "name": "gate_bounce",
                        "timestamp": "2025-03-01T10:00:00.500000+00:00",
                        "attributes": {"plangate.iteration": 2, "plangate.detail": "1 open"},
                    }
                ],
                [],
                [],
            ],
            "context.span_id": [ROOT, LLM, TOOL],
            "context.trace_id": [TRACE] * 3,
            "attributes.session.id": ["ph-1", None, None],
            # Phoenix parses metadata into a dict, and gathers custom attributes by first name
            "attributes.metadata": [
                {"variant": "v1", "task_id": "t9", "trial": 1, "reward": 0.5},
                None,
                None,
            ],
            "attributes.plangate": [
                {"turn_index": 0, "stop_reason": "finished"},
                {"iteration": 1},
                {"iteration": 1},
            ],
            "attributes.input.value": ["what is 1+2", '{"messages":[]}', '{"b": 2, "a": 1}'],
            "attributes.output.value": ["3", None, "3"],
            "attributes.llm.model_name": [None, "gpt-x", None],
            "attributes.llm.token_count.prompt": [nan, 12.0, nan],
            "attributes.llm.token_count.completion": [nan, 3.0, nan],
            # Phoenix turns flattened messages back into a list of dicts
            "attributes.llm.input_messages": [
                None,
                [
                    {"message.role": "system", "message.content": "be brief"},
                    {
                        "message.role": "assistant",
                        "message.tool_calls": [
                            {"tool_call.id": "c1", "tool_call.function.name": "add"}
                        ],
                    },
                ],
                None,
            ],
            "attributes.tool.name": [None, None, "add"],
            "attributes.tool.parameters": [
                None,
                None,
                {"type": "object", "required": ["a", "b"]},
            ],
            # no attributes.tool.id column: no span had one
        }
    )
    return frame.set_index("context.span_id", drop=False)


def test_phoenix_frame_becomes_rows() -> None:
    table = from_phoenix_dataframe(phoenix_frame())
    agent_row, llm_row, tool_row = table.to_pylist()

    assert [r["span_kind"] for r in (agent_row, llm_row, tool_row)] == ["AGENT", "LLM", "TOOL"]
    assert {r["session_id"] for r in table.to_pylist()} == {"ph-1"}
    assert {r["turn_index"] for r in table.to_pylist()} == {0}
    assert {r["source"] for r in table.to_pylist()} == {"phoenix"}
    assert (llm_row["parent_span_id"], agent_row["parent_span_id"]) == (ROOT, None)
    assert agent_row["start_time"] == datetime(2025, 3, 1, 10, tzinfo=UTC)

    assert (agent_row["variant"], agent_row["task_id"], agent_row["trial"]) == ("v1", "t9", 1)
    assert agent_row["reward"] == 0.5 and agent_row["stop_reason"] == "finished"
    assert (agent_row["status_code"], agent_row["status_message"]) == ("OK", None)
    (bounce,) = json.loads(agent_row["events"])
    assert bounce == {
        "name": "gate_bounce",
        "time": "2025-03-01T10:00:00.500000+00:00",
        "attributes": {"plangate.detail": "1 open", "plangate.iteration": 2},
    }

    assert (llm_row["model_name"], llm_row["tokens_prompt"], llm_row["tokens_completion"]) == (
        "gpt-x",
        12,
        3,
    )
    assert llm_row["iteration"] == 1
    assert json.loads(llm_row["attributes"]) == {
        "llm.input_messages.0.message.role": "system",
        "llm.input_messages.0.message.content": "be brief",
        "llm.input_messages.1.message.role": "assistant",
        "llm.input_messages.1.message.tool_calls.0.tool_call.id": "c1",
        "llm.input_messages.1.message.tool_calls.0.tool_call.function.name": "add",
    }

    assert (tool_row["tool_name"], tool_row["tool_call_id"]) == ("add", None)
    assert tool_row["tool_args"] == '{"a":1,"b":2}'
    assert tool_row["tool_output"] == "3"
    assert (tool_row["tokens_prompt"], tool_row["variant"]) == (None, None)
    assert (tool_row["status_code"], tool_row["status_message"]) == ("ERROR", "bad numbers")
    assert json.loads(tool_row["attributes"]) == {
        "tool.parameters": {"required": ["a", "b"], "type": "object"}
    }


def parsed(table: pa.Table) -> list[dict[str, Any]]:
    """Rows with the attributes JSON parsed (Parquet may turn a dict's 1 into 1.0)."""
    return [{**r, "attributes": json.loads(r["attributes"] or "null")} for r in table.to_pylist()]


def test_phoenix_frame_saved_as_parquet_reads_back_the_same(tmp_path: Path) -> None:
    frame = phoenix_frame()
    frame.to_parquet(tmp_path / "spans.parquet")
    table = read_phoenix(tmp_path / "spans.parquet")
    assert parsed(table) == parsed(from_phoenix_dataframe(frame))


# pandas 3 deprecates epoch dates in to_json, but it is still the default: files exist both ways
EPOCH = pytest.param(
    "epoch", marks=pytest.mark.filterwarnings("ignore::pandas.errors.Pandas4Warning")
)


@pytest.mark.parametrize("date_format", [EPOCH, "iso"])
def test_phoenix_frame_saved_as_json_lines_reads_back_the_same(
    tmp_path: Path, date_format: str
) -> None:
    frame = phoenix_frame()
    frame.to_json(tmp_path / "spans.jsonl", orient="records", lines=True, date_format=date_format)
    table = read_phoenix(tmp_path / "spans.jsonl")
    assert parsed(table) == parsed(from_phoenix_dataframe(frame))


def test_phoenix_frame_with_span_id_only_in_the_index() -> None:
    frame = phoenix_frame().drop(columns=["context.span_id"])
    assert from_phoenix_dataframe(frame).column("span_id").to_pylist() == [ROOT, LLM, TOOL]


def test_phoenix_frame_without_span_ids_is_refused() -> None:
    frame = phoenix_frame().reset_index(drop=True).drop(columns=["context.span_id"])
    with pytest.raises(TraceTableError, match=r"Phoenix spans dataframe: no 'context.span_id'"):
        from_phoenix_dataframe(frame)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"context.trace_id": [TRACE, None, TRACE]}, "row 1: no 'context.trace_id'"),
        ({"status_code": ["OK", "FINE", "OK"]}, "row 1: status_code 'FINE'"),
        ({"attributes.plangate": [{}, {"iteration": 1.5}, {}]}, "plangate.iteration is 1.5"),
        ({"start_time": [1e30, 1e30, 1e30]}, "row 0, start_time: 1e+30 is not a time"),
        ({"end_time": [float("inf")] * 3}, "row 0, end_time: inf is not a time"),
        (
            {"attributes.llm": [{"token_count": {"prompt": 10**25}}, {}, {}]},
            "column 'tokens_prompt': 10000000000000000000000000 is not int64",
        ),
    ],
)
def test_bad_phoenix_values_name_the_row_or_span(
    change: dict[str, list[Any]], message: str
) -> None:
    frame = phoenix_frame().assign(**change)
    with pytest.raises(TraceTableError, match=re.escape(message)):
        from_phoenix_dataframe(frame)


def test_bad_phoenix_file_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "spans.jsonl"
    path.write_text('{"context.span_id": "a"}\nnot json\n')
    with pytest.raises(TraceTableError, match=rf"{re.escape(str(path))}, line 2: not JSON"):
        read_phoenix(path)
