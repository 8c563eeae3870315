"""The redaction policy on its own: each kind of secret, their escaped forms, and what stays."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.trace import SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from plangate.replay import Redactor, redacted_span
from tests.secrets import ENVIRONMENT_SECRET, SECRETS, cores

REDACTOR = Redactor(["ACME-\\d{6}"], environ={"MY_SERVICE_TOKEN": ENVIRONMENT_SECRET})


@pytest.mark.parametrize("kind", [*SECRETS, "environment"])
@pytest.mark.parametrize("wrap", ["plain", "json", "json twice"])
def test_every_kind_is_redacted_in_every_wrapping(kind: str, wrap: str) -> None:
    text = SECRETS.get(kind, ENVIRONMENT_SECRET)
    said = f"before {text} after"
    if wrap != "plain":
        said = json.dumps({"content": said})
    if wrap == "json twice":
        said = json.dumps([{"role": "user", "content": said}])
    redacted = REDACTOR.text(said)
    core = cores()[kind]
    assert core not in redacted and core not in redacted.replace("\\n", "\n"), redacted
    assert "[REDACTED]" in redacted
    if wrap != "plain":
        json.loads(redacted)  # still JSON: a redaction never breaks its escaping


@pytest.mark.parametrize(
    "text",
    [
        "List the slowest spans in the last hour and summarize them, please.",
        '{"tokens_prompt": 1200, "max_tokens": 400, "auth": "ok"}',
        "the token budget was 4000 tokens",
        "trace 4bf92f3577b34da6a3ce929d0e0e4736 span 00f067aa0ba902b7",
        "sk-short and AKIA123",
    ],
)
def test_what_is_not_a_secret_stays(text: str) -> None:
    assert Redactor(environ={}).text(text) == text


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=200))
def test_redaction_is_idempotent(text: str) -> None:
    once = REDACTOR.text(text)
    assert REDACTOR.text(once) == once


HEX_SECRET = "00f067aa0ba902b7c4"
"""An environment secret of hex digits only: it looks like a span id, and is still a secret."""
ID = "4bf92f3577b3deadbeef"
"""An id, which the user's own pattern `dead` finds."""
TEXTS = st.one_of(
    st.none(),
    st.sampled_from([*SECRETS.values(), ENVIRONMENT_SECRET, HEX_SECRET, f"id-{HEX_SECRET}", ID]),
    st.text(alphabet="0123456789abcdefABCDEF-", max_size=40),  # ids: read by none of the patterns
    st.text(alphabet=st.characters(codec="utf-8"), max_size=60),
)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.lists(TEXTS, max_size=12), min_size=1, max_size=3),
    st.booleans(),
    st.booleans(),
)
def test_a_table_is_redacted_as_each_of_its_texts_is(
    chunks: list[list[str | None]], large: bool, own_pattern: bool
) -> None:
    """Column-wise (each distinct text once, ids not read) is the same as text by text."""
    secrets = {"MY_SERVICE_TOKEN": ENVIRONMENT_SECRET, "HEX_TOKEN": HEX_SECRET}
    patterns = ["ACME-\\d{6}", "dead"] if own_pattern else []  # the second reads an id
    kind = pa.large_string() if large else pa.string()
    column = pa.chunked_array([pa.array(chunk, kind) for chunk in chunks], kind)
    table = pa.table({"text": column, "number": pa.array(range(len(column)))})
    redacted = Redactor(patterns, environ=secrets).table(table)
    one_by_one = Redactor(patterns, environ=secrets)
    expected = [None if v is None else one_by_one.text(v) for v in column.to_pylist()]
    assert redacted.schema == table.schema
    assert redacted.column("text").to_pylist() == expected
    assert redacted.column("number").equals(table.column("number"))


def test_an_id_that_is_an_environment_secret_is_redacted_in_a_table() -> None:
    spans = pa.table({"span_id": [HEX_SECRET, "00f067aa0ba902b7", None]})
    redacted = Redactor(environ={"HEX_TOKEN": HEX_SECRET}).table(spans)
    assert redacted.column("span_id").to_pylist() == ["[REDACTED]", "00f067aa0ba902b7", None]


def test_a_redacted_span_keeps_the_count_of_attributes_its_sdk_dropped() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(span_limits=SpanLimits(max_span_attributes=2))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with provider.get_tracer("t").start_as_current_span("llm") as span:
        for n in range(5):
            span.set_attribute(f"key.{n}", f"token {SECRETS['openai key']}")
    [original] = exporter.get_finished_spans()
    copy = redacted_span(original, Redactor())
    assert (original.dropped_attributes, copy.dropped_attributes) == (3, 3)
    assert SECRETS["openai key"] not in json.dumps(dict(copy.attributes or {}))
    assert len(copy.attributes or {}) == 2
