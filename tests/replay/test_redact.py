"""The redaction policy on its own: each kind of secret, their escaped forms, and what stays."""

from __future__ import annotations

import json

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
