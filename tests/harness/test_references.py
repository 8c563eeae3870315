"""Results by reference, end to end: long results stored and described, and jq queries
over them."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider

from plangate.harness import (
    Agent,
    Message,
    ScriptedModel,
    Session,
    ToolMessage,
    TurnResult,
    Variant,
    canonical_json,
    load_variant,
    tool,
)
from plangate.harness.features._references import ResultReferences
from tests.helpers import WORK_TOOLS, call

ONE_TASK = "What is 1 plus 2?"  # one action: no plan, so the scripts stay short


def customer_rows(count: int) -> list[dict[str, Any]]:
    return [
        {"id": i, "name": f"customer {i}", "email": f"user{i}@example.com", "balance": i * 10.5}
        for i in range(count)
    ]


@tool
def customers(count: int) -> dict[str, Any]:
    """List customers.

    Args:
        count: How many.
    """
    return {"customers": customer_rows(count), "total": count}


@tool
def read_log(lines: int) -> str:
    """Read the service log.

    Args:
        lines: How many lines.
    """
    return "\n".join(f"2026-01-01T00:00:{i % 60:02d} INFO request {i} served" for i in range(lines))


@tool
def echo(text: str) -> str:
    """Say the text back.

    Args:
        text: Anything.
    """
    return text


TOOLS = (*WORK_TOOLS, customers, read_log, echo)


def variant(**context: int) -> Variant:
    loaded = load_variant("alyx")
    return dataclasses.replace(loaded, context=dataclasses.replace(loaded.context, **context))


def session_of(
    model: ScriptedModel, provider: TracerProvider | None = None, **context: int
) -> Session:
    agent = Agent(
        model=model, variant=variant(**context), tools=lambda: TOOLS, tracer_provider=provider
    )
    return agent.session("context-test")


def feature(session: Session, kind: type[Any]) -> Any:
    return next(f for f in session.features if isinstance(f, kind))


def tool_message(messages: Sequence[Message], call_id: str) -> ToolMessage:
    return next(m for m in messages if isinstance(m, ToolMessage) and m.tool_call_id == call_id)


async def run_turns(session: Session, model: ScriptedModel, *requests: str) -> list[TurnResult]:
    results = [await session.run_turn(request) for request in requests]
    model.assert_complete()
    return results


# -- results by reference ---------------------------------------------------------------------


async def test_a_long_result_reaches_the_model_as_a_reference_with_its_shape() -> None:
    model = ScriptedModel(
        [
            call("customers", "c1", count=40),
            call("add", "a1", a=1, b=2),
            call("finish", "f", summary="3"),
        ]
    )
    session = session_of(model, result_reference_chars=500)
    [result] = await run_turns(session, model, ONE_TASK)

    assert result.stop_reason == "finished"
    seen = tool_message(model.requests[1].messages, "c1").content
    assert seen.startswith("[Stored as ref-1: the result has ")
    assert (
        'Shape: JSON object with 2 keys: "customers" (array of 40 objects with keys: balance, '
        'email, id, name), "total" (number)'
    ) in seen
    assert 'Starts with: {"customers":[{"balance":0.0,"email":"user0@example.com"' in seen
    assert 'query_result(ref="ref-1"' in seen and "`.customers[0:5]`" in seen
    assert len(seen) < 1_000
    assert tool_message(model.requests[2].messages, "a1").content.startswith("3")  # short: as is
    assert "query_result" not in model.requests[0].tools
    assert "query_result" in model.requests[1].tools
    stored = feature(session, ResultReferences).results["ref-1"]
    assert stored["content"] == canonical_json({"customers": customer_rows(40), "total": 40})
    assert stored["tool"] == "customers" and stored["call_id"] == "c1"


async def test_a_long_text_result_is_described_by_its_length_and_lines() -> None:
    model = ScriptedModel([call("read_log", "r", lines=30), call("finish", "f", summary="ok")])
    session = session_of(model, result_reference_chars=200)
    await run_turns(session, model, ONE_TASK)

    seen = tool_message(model.requests[1].messages, "r").content
    length = len(read_log.function(lines=30))
    assert f"Shape: plain text (not JSON), {length:,} characters in 30 lines" in seen
    assert "Starts with: 2026-01-01T00:00:00 INFO request 0 served\\n2026" in seen
    assert 'split("\\n")[0:20]' in seen


async def test_query_result_returns_the_slice_the_jq_expression_selects() -> None:
    expression = "[.customers[] | select(.id < 3) | .name]"
    model = ScriptedModel(
        [
            call("customers", "c1", count=40),
            call("query_result", "q1", ref="ref-1", expression=expression),
            call("read_log", "r", lines=30),
            call("query_result", "q2", ref="ref-2", expression='split("\\n") | .[1]'),
            call("finish", "f", summary="customer 0, 1 and 2"),
        ]
    )
    session = session_of(model, result_reference_chars=500)
    [result] = await run_turns(session, model, ONE_TASK)

    assert result.stop_reason == "finished"
    answer = tool_message(model.requests[2].messages, "q1")
    assert answer.content == '["customer 0","customer 1","customer 2"]'
    assert not answer.is_error
    assert (
        tool_message(result.messages, "q2").content == '"2026-01-01T00:00:01 INFO request 1 served"'
    )


@pytest.mark.parametrize(
    ("ref", "expression", "expected"),
    [
        pytest.param(
            "ref-9", ".total", ["Unknown reference 'ref-9'", "ref-1 (customers, "], id="unknown-ref"
        ),
        pytest.param(
            "ref-1",
            ".customers[",
            ["does not compile", "syntax error", "Fix the syntax"],
            id="syntax",
        ),
        pytest.param(
            "ref-1",
            ".customers.name",
            [
                "Cannot index array",
                'ref-1 is a JSON object with 2 keys: "customers"',
                "query again",
            ],
            id="wrong-shape",
        ),
        pytest.param(
            "ref-2", ".lines[0]", ["ref-2 is plain text, not JSON", "split("], id="json-on-text"
        ),
        pytest.param(
            "ref-1",
            'import "x" as $x {search: "/etc"}; $x',
            ["modules (import, include, modulemeta) are not available"],
            id="import",
        ),
    ],
)
async def test_a_bad_query_is_an_error_result_that_says_what_to_do(
    ref: str, expression: str, expected: list[str]
) -> None:
    model = ScriptedModel(
        [
            call("customers", "c1", count=40),
            call("read_log", "r", lines=30),
            call("query_result", "q", ref=ref, expression=expression),
            call("query_result", "q-ok", ref="ref-1", expression=".total"),
            call("finish", "f", summary="40 customers"),
        ]
    )
    session = session_of(model, result_reference_chars=500)
    [result] = await run_turns(session, model, ONE_TASK)

    bad = tool_message(result.messages, "q")
    assert bad.is_error
    for fragment in expected:
        assert fragment in bad.content
    assert tool_message(result.messages, "q-ok").content == "40"  # the run goes on
    assert result.stop_reason == "finished"


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        pytest.param(
            "last(range(1e15))", ["ran too long", "stopped after 1 s", "limit(10; …)"], id="loop"
        ),
        pytest.param("def f: f; f", ["ran too long", "stopped after 1 s"], id="recursion"),
    ],
)
async def test_a_runaway_expression_is_stopped_by_the_time_limit(
    expression: str, expected: list[str]
) -> None:
    model = ScriptedModel(
        [
            call("customers", "c1", count=40),
            call("query_result", "q", ref="ref-1", expression=expression),
            call("finish", "f", summary="gave up"),
        ]
    )
    session = session_of(model, result_reference_chars=500)
    feature(session, ResultReferences).time_limit = 1.0
    [result] = await run_turns(session, model, ONE_TASK)

    stopped = tool_message(result.messages, "q")
    assert stopped.is_error
    for fragment in expected:
        assert fragment in stopped.content
    assert result.stop_reason == "finished"


async def test_an_expression_that_exhausts_memory_is_an_error_not_a_crash(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(
        "plangate.harness.features._references.MEMORY_LIMIT", 64 << 20
    )  # reached in a moment
    model = ScriptedModel(
        [
            call("customers", "c1", count=40),
            call("query_result", "q", ref="ref-1", expression="[range(1e9)] | length"),
            call("query_result", "q-ok", ref="ref-1", expression=".total"),
            call("finish", "f", summary="gave up"),
        ]
    )
    session = session_of(model, result_reference_chars=500)
    feature(session, ResultReferences).time_limit = 30.0
    [result] = await run_turns(session, model, ONE_TASK)

    failed = tool_message(result.messages, "q")
    assert failed.is_error
    assert "the query process ended (exit code" in failed.content
    assert "probably out of memory. Select less" in failed.content
    assert tool_message(result.messages, "q-ok").content == "40"


async def test_query_output_is_cut_at_the_cap_and_never_stored_by_reference() -> None:
    model = ScriptedModel(
        [
            call("customers", "c1", count=200),
            call("query_result", "q", ref="ref-1", expression=".customers[]"),
            call("query_result", "q-one", ref="ref-1", expression=".customers"),
            call("query_result", "empty", ref="ref-1", expression=".customers[] | select(.id < 0)"),
            call("finish", "f", summary="200 customers"),
        ]
    )
    session = session_of(model, result_reference_chars=500)
    [result] = await run_turns(session, model, ONE_TASK)

    cut = tool_message(result.messages, "q").content
    first, note = cut.rsplit("\n…[", 1)
    assert len(first) == 4_000
    assert first.startswith(
        '{"balance":0,"email":"user0@example.com","id":0,"name":"customer 0"}\n'
    )
    assert note.startswith("output cut at 4,000 characters: select less")
    one = tool_message(result.messages, "q-one").content
    assert one.startswith('[{"balance":0,') and "\n…[output cut at 4,000 characters" in one
    assert len(one.split("\n…[")[0]) == 4_000
    assert list(feature(session, ResultReferences).results) == ["ref-1"]
    assert tool_message(result.messages, "empty").content.startswith("(no output")


async def test_references_survive_saving_and_restoring_the_session() -> None:
    first = ScriptedModel(
        [call("customers", "c1", count=40), call("finish", "f", summary="listed")]
    )
    session = session_of(first, result_reference_chars=500)
    await run_turns(session, first, ONE_TASK)
    saved = json.loads(json.dumps(session.state()))  # the state is plain JSON

    second = ScriptedModel(
        [
            call("query_result", "q", ref="ref-1", expression=".customers | length"),
            call("customers", "c2", count=41),
            call("finish", "f", summary="40"),
        ]
    )
    restored = session_of(second, result_reference_chars=500)
    restored.restore(saved)
    [result] = await run_turns(restored, second, ONE_TASK)

    assert "query_result" in second.requests[0].tools
    assert tool_message(result.messages, "q").content == "40"
    assert tool_message(result.messages, "c2").content.startswith("[Stored as ref-2:")


async def test_plan_and_finish_results_are_never_stored_by_reference() -> None:
    todos = [
        {"content": "x" * 300, "status": "completed"},
        {"content": "y" * 300, "status": "completed"},
    ]
    model = ScriptedModel(
        [
            call("todo_write", "w", todos=todos),
            call("todo_read", "r"),
            call("finish", "f", summary="z" * 600),
        ]
    )
    session = session_of(model, result_reference_chars=100)
    [result] = await run_turns(session, model, "Add 1 and 2, then add 3 and 4")

    assert len(tool_message(result.messages, "r").content) > 600
    assert feature(session, ResultReferences).results == {}
