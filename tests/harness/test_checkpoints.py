"""History checkpoints, end to end, and the offline token counter they rely on."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from plangate.harness import (
    Agent,
    AssistantMessage,
    ModelError,
    ScriptedModel,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
    load_variant,
)
from plangate.harness.features._checkpoints import CHECKPOINT_HEADER, CHECKPOINT_PROMPT, Checkpoints
from plangate.harness.models._tokens import MESSAGE_OVERHEAD, count_message_tokens, count_tokens
from tests.harness.test_references import feature, run_turns, session_of
from tests.helpers import call

# -- checkpoints --------------------------------------------------------------------------------

LONG = "The quarterly report lists revenue, costs and churn for every region. " * 8  # ~100 tokens


def chatty_turn(tag: str, text: str = LONG) -> list[Any]:
    """One turn's script: an echo of a text (about 260 tokens in all with the long one), then finish."""
    return [
        call("echo", f"e{tag}", text=f"{tag}: {text}"),
        call("finish", f"f{tag}", summary=f"done {tag}"),
    ]


async def test_past_the_budget_a_checkpoint_replaces_earlier_turns_in_the_context() -> None:
    model = ScriptedModel(
        [
            *chatty_turn("one"),
            "CHECKPOINT-1: the user asked twice; both echoes done.",  # the checkpoint call
            *chatty_turn("two", "short"),
            *chatty_turn("three", "short"),  # the context since the checkpoint is under the budget
        ]
    )
    session = session_of(model, history_token_budget=250)
    first, second, third = await run_turns(
        session, model, "Request one", "Request two", "Request three"
    )

    asked = model.requests[2]
    assert asked.tools == ()
    assert asked.messages[0] == SystemMessage(content=CHECKPOINT_PROMPT)
    assert "[user]\nRequest one" in asked.messages[1].content
    assert "[called echo(" in asked.messages[1].content
    assert "[tool result of echo]\none: The quarterly report" in asked.messages[1].content

    checkpoint = UserMessage(
        content=f"{CHECKPOINT_HEADER}\nCHECKPOINT-1: the user asked twice; both echoes done."
    )
    after = model.requests[3].messages
    assert after[1:] == (checkpoint, UserMessage(content="Request two"))  # the turn is intact
    assert all("one: The quarterly" not in m.content for m in after)
    later = model.requests[4].messages
    assert later[1] == checkpoint and later[2] == UserMessage(content="Request two")
    assert isinstance(later[3], AssistantMessage) and later[4].role == "tool"

    assert [e.kind for e in first.events if e.kind == "checkpoint"] == []
    [event] = [e for e in second.events if e.kind == "checkpoint"]
    assert event.iteration == 0
    assert event.detail.startswith("replaced 5 messages of earlier turns (")
    assert "(budget 250)" in event.detail
    assert session.history == [*first.messages, *second.messages, *third.messages]
    assert model.requests[5].messages[1] == checkpoint  # turn three: no new checkpoint yet
    assert second.usage.prompt_tokens == 30  # two turn calls and the checkpoint call
    assert feature(session, Checkpoints).state() == {
        "text": "CHECKPOINT-1: the user asked twice; both echoes done.",
        "covered": 5,
    }


async def test_a_later_checkpoint_rewrites_the_earlier_one_with_what_came_after() -> None:
    model = ScriptedModel(
        [*chatty_turn("one"), "CP-1", *chatty_turn("two"), "CP-2", *chatty_turn("three")]
    )
    session = session_of(model, history_token_budget=150)
    await run_turns(session, model, "Request one", "Request two", "Request three")

    second_ask = model.requests[5]
    assert second_ask.messages[0] == SystemMessage(content=CHECKPOINT_PROMPT)
    transcript = second_ask.messages[1].content
    assert f"[user]\n{CHECKPOINT_HEADER}\nCP-1" in transcript
    assert "[user]\nRequest two" in transcript and "Request one" not in transcript
    assert model.requests[6].messages[1:] == (
        UserMessage(content=f"{CHECKPOINT_HEADER}\nCP-2"),
        UserMessage(content="Request three"),
    )
    assert feature(session, Checkpoints).covered == 10


async def test_a_checkpoint_survives_saving_and_restoring_the_session() -> None:
    model = ScriptedModel([*chatty_turn("one"), "CP-1", *chatty_turn("two", "short")])
    session = session_of(model, history_token_budget=250)
    await run_turns(session, model, "Request one", "Request two")
    saved = json.loads(json.dumps(session.state()))

    again = ScriptedModel(chatty_turn("three", "short"))
    restored = session_of(again, history_token_budget=250)
    restored.restore(saved)
    await run_turns(restored, again, "Request three")

    assert again.requests[0].messages[1] == UserMessage(content=f"{CHECKPOINT_HEADER}\nCP-1")
    assert again.requests[0].messages[2] == UserMessage(content="Request two")


async def test_a_failed_checkpoint_call_keeps_the_history_and_the_run_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    model = ScriptedModel([*chatty_turn("one"), ModelError("overloaded"), *chatty_turn("two")])
    session = session_of(model, history_token_budget=250)
    first, second = await run_turns(session, model, "Request one", "Request two")

    [event] = [e for e in second.events if e.kind == "checkpoint"]
    assert event.detail == (
        "failed: the model call failed (overloaded); the history is kept as it was"
    )
    assert second.stop_reason == "finished"
    assert list(model.requests[3].messages[1:]) == [
        *first.messages,
        UserMessage(content="Request two"),
    ]
    assert "checkpoint of session context-test failed" in caplog.text
    assert feature(session, Checkpoints).state() == {"text": "", "covered": 0}


async def test_an_empty_checkpoint_is_a_failure_and_is_not_retried_within_the_turn() -> None:
    model = ScriptedModel(
        [
            *chatty_turn("one"),
            AssistantMessage(tool_calls=(ToolCall.of("echo"),)),
            *chatty_turn("two"),
        ]
    )
    session = session_of(model, history_token_budget=250)
    _, second = await run_turns(session, model, "Request one", "Request two")

    [event] = [e for e in second.events if e.kind == "checkpoint"]
    assert event.detail.startswith("failed: the model wrote no text")


async def test_the_checkpoint_call_is_traced_as_an_llm_span_with_an_event() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    model = ScriptedModel([*chatty_turn("one"), "CP-1", *chatty_turn("two")])
    session = session_of(model, provider, history_token_budget=250)
    await run_turns(session, model, "Request one", "Request two")

    spans = exporter.get_finished_spans()
    llm = [s for s in spans if (s.attributes or {}).get("openinference.span.kind") == "LLM"]
    asks = [
        s for s in llm if CHECKPOINT_PROMPT[:40] in str((s.attributes or {}).get("input.value"))
    ]
    assert len(asks) == 1 and len(llm) == 5
    assert (asks[0].attributes or {})["output.value"] == "CP-1"
    assert (asks[0].attributes or {})["plangate.iteration"] == 0
    agents = [s for s in spans if s.name == "agent.turn"]
    assert asks[0].parent is not None and asks[0].parent.span_id == agents[1].context.span_id
    assert [e.name for e in agents[1].events].count("checkpoint") == 1


async def test_the_current_turn_alone_over_the_budget_is_never_replaced() -> None:
    model = ScriptedModel(chatty_turn("one"))
    session = session_of(model, history_token_budget=10)
    [result] = await run_turns(session, model, "Request one")

    assert [e for e in result.events if e.kind == "checkpoint"] == []
    assert model.requests[1].messages[1] == UserMessage(content="Request one")


# -- token counting ---------------------------------------------------------------------------

# Counts by tiktoken's cl100k_base (computed offline once with the js-tiktoken package).
PINNED = [
    ("Hello, world!", 4),
    (
        "Planning as structured tool calls, not prompt text. The plan message is rebuilt from "
        "state on every model call and pinned right after the system prompt, with markers for "
        "done, in progress and pending items, and a line that says what to do next.",
        50,
    ),
    (
        '[{"active":false,"balance":1234.56,"email":"user0@example.com","id":0,"name":"customer 0",'
        '"tags":["vip","churn-risk"]},{"active":true,"balance":87.1,"email":"user1@example.com",'
        '"id":1,"name":"customer 1","tags":["new"]}]',
        71,
    ),
    (
        '{\n  "order_id": "#W2378156",\n  "status": "delivered",\n  "items": [\n    {\n      '
        '"name": "Mechanical Keyboard",\n      "price": 219.99,\n      "options": {"switch type": '
        '"tactile", "backlight": "RGB"}\n    }\n  ]\n}',
        70,
    ),
    (
        'def render_result(value: Any) -> str:\n    """Turn a tool\'s return value into the text '
        'the model sees."""\n    if isinstance(value, str):\n        return value\n    return '
        "canonical_json(value)\n",
        42,
    ),
]


@pytest.mark.parametrize(("text", "reference"), PINNED)
def test_token_counts_are_close_to_a_real_bpe_tokenizer(text: str, reference: int) -> None:
    assert abs(count_tokens(text) - reference) <= max(1, 0.15 * reference)


@given(st.text())
def test_token_counts_are_deterministic_positive_and_at_most_one_per_byte(text: str) -> None:
    count = count_tokens(text)
    assert count == count_tokens(text)
    assert (count == 0) == (text == "")
    assert count <= len(text.encode("utf-8", "surrogatepass"))


@given(st.text(), st.text())
def test_concatenation_changes_a_count_by_at_most_a_token(first: str, second: str) -> None:
    joined = count_tokens(first + second)
    assert max(count_tokens(first), count_tokens(second)) - 1 <= joined
    assert joined <= count_tokens(first) + count_tokens(second) + 1


@given(st.lists(st.text(), max_size=6))
def test_message_counts_add_up_with_an_overhead_per_message(texts: list[str]) -> None:
    messages = [UserMessage(content=t) for t in texts]
    total = count_message_tokens(messages)
    assert total == sum(count_message_tokens([m]) for m in messages)
    assert total == sum(count_tokens(t) for t in texts) + MESSAGE_OVERHEAD * len(texts)


def test_message_counts_include_tool_calls_and_tool_names() -> None:
    assert count_message_tokens([]) == 0
    asked = AssistantMessage(tool_calls=(ToolCall.of("customers", count=40),))
    answered = ToolMessage(tool_call_id="c", name="customers", content="[]")
    assert count_message_tokens([asked]) > MESSAGE_OVERHEAD + count_tokens('{"count":40}')
    assert count_message_tokens([answered]) == MESSAGE_OVERHEAD + count_tokens("[]") + 1


async def test_simulated_models_write_checkpoints_and_keep_working() -> None:
    from plangate.harness import SimulatedModel, get_domain

    domain = get_domain("observability")
    loaded = load_variant("alyx")
    budgeted = dataclasses.replace(
        loaded, context=dataclasses.replace(loaded.context, history_token_budget=1500)
    )
    agent = Agent(
        model=SimulatedModel("diligent", domain.tasks),
        variant=budgeted,
        tools=domain.make_tools,
        instructions=domain.instructions,
    )
    session = agent.session()
    await session.run_turn(domain.demo_request)
    second = await session.run_turn(
        "Compute the p95 latency per span kind, then list the failed tool spans."
    )
    checkpoints = [e for e in second.events if e.kind == "checkpoint"]
    assert checkpoints and checkpoints[0].detail.startswith("replaced ")
    assert second.stop_reason == "finished"
    assert [i.status for i in second.plan] == ["completed", "completed"]
