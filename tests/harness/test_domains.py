"""The built-in demo domains: tools, task catalogs, requests, determinism, isolation."""

from __future__ import annotations

import re
from typing import Any

import pytest

from plangate.harness import Domain, Tool, ToolCall
from plangate.harness._schemas import validate
from plangate.harness._tools import ToolResult, run_tool
from plangate.harness.domains import CallSpec, TaskSpec
from plangate.harness.domains._domain import domain_names, get_domain
from plangate.harness.domains.observability import SEED, generate_spans, recorded_spans

DOMAINS = ["observability", "support"]


def tools_of(domain: Domain) -> dict[str, Tool]:
    return {t.name: t for t in domain.make_tools()}


def matching(text: str, tasks: tuple[TaskSpec, ...]) -> list[str]:
    lowered = text.lower()
    return [task.key for task in tasks if any(phrase in lowered for phrase in task.phrases)]


async def call(tools: dict[str, Tool], name: str, /, **arguments: Any) -> ToolResult:
    return await run_tool(ToolCall.of(name, **arguments), tools)


async def run_catalog(domain: Domain) -> list[str]:
    """Run every task's calls, in catalog order, on one fresh workspace; return the contents."""
    tools = tools_of(domain)
    contents = []
    for task in domain.tasks:
        for spec in task.calls:
            result = await call(tools, spec.name, **spec.arguments)
            assert result.status == "ok", (task.key, spec.name, result.content)
            contents.append(result.content)
    return contents


@pytest.fixture(params=DOMAINS)
def domain(request: pytest.FixtureRequest) -> Domain:
    return get_domain(request.param)


def test_built_in_domains_are_registered() -> None:
    assert set(DOMAINS) <= set(domain_names())
    for name in DOMAINS:
        assert get_domain(name).name == name


def test_domain_has_tools_with_object_schemas(domain: Domain) -> None:
    tools = domain.make_tools()
    assert len(tools) >= 5
    assert len({t.name for t in tools}) == len(tools)
    for t in tools:
        assert t.description, t.name
        assert t.parameters["type"] == "object"
        assert isinstance(t.parameters["properties"], dict)
        for prop, schema in t.parameters["properties"].items():
            assert schema.get("description"), f"{t.name}.{prop} has no description"


def test_catalog_shape(domain: Domain) -> None:
    assert len(domain.tasks) >= 6
    assert len({task.key for task in domain.tasks}) == len(domain.tasks)
    assert any(task.blocked_reason for task in domain.tasks)
    for task in domain.tasks:
        assert task.phrases, task.key
        assert all(phrase == phrase.lower() for phrase in task.phrases), task.key
        assert len(task.calls) <= 3, task.key
        assert task.calls or task.blocked_reason, task.key
    assert 2 <= len(re.findall(r"[.!?](?:\s|$)", domain.instructions)) <= 4


def test_task_calls_match_the_schemas(domain: Domain) -> None:
    tools = tools_of(domain)
    for task in domain.tasks:
        for spec in task.calls:
            assert spec.name in tools, (task.key, spec.name)
            assert validate(tools[spec.name].parameters, dict(spec.arguments)) == [], task.key


async def test_task_calls_succeed_in_catalog_order(domain: Domain) -> None:
    contents = await run_catalog(domain)
    assert len(contents) == sum(len(task.calls) for task in domain.tasks)


def test_no_two_tasks_share_a_call(domain: Domain) -> None:
    keys = [spec.key for task in domain.tasks for spec in task.calls]
    assert len(set(keys)) == len(keys)


def test_demo_request_names_three_tasks_and_the_first_takes_two_calls(domain: Domain) -> None:
    text = domain.demo_request.lower()
    named = [task for task in domain.tasks if task.key in matching(text, domain.tasks)]
    assert len(named) == 3
    in_order = sorted(named, key=lambda t: min(text.find(p) for p in t.phrases if p in text))
    assert len(in_order[0].calls) >= 2
    assert not any(task.blocked_reason for task in named)


def test_each_title_matches_its_own_task_only(domain: Domain) -> None:
    for task in domain.tasks:
        assert matching(task.title, domain.tasks) == [task.key], task.title


def test_example_requests_cover_simple_multi_and_blocked(domain: Domain) -> None:
    blocked = {task.key for task in domain.tasks if task.blocked_reason}
    counts = []
    for text in domain.requests:
        keys = matching(text, domain.tasks)
        assert keys, text
        counts.append(len(keys))
    assert 1 in counts
    assert max(counts) >= 3
    assert any(set(matching(text, domain.tasks)) & blocked for text in domain.requests)


async def test_fresh_workspaces_give_identical_results(domain: Domain) -> None:
    assert await run_catalog(domain) == await run_catalog(domain)


BAD_CALLS = [
    pytest.param(
        "observability",
        CallSpec(name="get_trace", arguments={"trace_id": "t-9"}),
        "tr-0001",
        id="observability-unknown-trace",
    ),
    pytest.param(
        "observability",
        CallSpec(name="query_spans", arguments={"name": "websearch"}),
        "web_search",
        id="observability-unknown-span-name",
    ),
    pytest.param(
        "observability",
        CallSpec(name="sort_spans", arguments={"by": "latency"}),
        '"latency_ms"',
        id="observability-unknown-field",
    ),
    pytest.param(
        "observability",
        CallSpec(name="write_report", arguments={"title": "x", "findings": []}),
        "1 to 10 non-empty findings",
        id="observability-empty-report",
    ),
    pytest.param(
        "support",
        CallSpec(name="get_order", arguments={"order_id": "7001"}),
        "O-7001",
        id="support-unknown-order",
    ),
    pytest.param(
        "support",
        CallSpec(name="find_customer", arguments={"email": "dana@x.org"}),
        "first.last@example.com",
        id="support-unknown-email",
    ),
    pytest.param(
        "support",
        CallSpec(
            name="refund_item",
            arguments={"order_id": "O-7001", "item_id": "blender", "reason": "damaged"},
        ),
        "BLN-200, MUG-012",
        id="support-unknown-item",
    ),
    pytest.param(
        "support",
        CallSpec(
            name="refund_item",
            arguments={"order_id": "O-7002", "item_id": "TV-55Q", "reason": "damaged"},
        ),
        "escalate(order_id, reason)",
        id="support-above-limit",
    ),
    pytest.param(
        "support",
        CallSpec(name="cancel_order", arguments={"order_id": "O-7001"}),
        "refund_item",
        id="support-cancel-delivered",
    ),
]


@pytest.mark.parametrize(("name", "spec", "hint"), BAD_CALLS)
async def test_bad_argument_says_what_to_do(name: str, spec: CallSpec, hint: str) -> None:
    result = await call(tools_of(get_domain(name)), spec.name, **spec.arguments)
    assert result.status == "error"
    assert hint in result.content


STATEFUL = [
    pytest.param(
        "observability",
        CallSpec(name="write_report", arguments={"title": "t", "findings": ["f"]}),
        id="observability",
    ),
    pytest.param(
        "support",
        CallSpec(
            name="refund_item",
            arguments={"order_id": "O-7001", "item_id": "BLN-200", "reason": "damaged"},
        ),
        id="support",
    ),
]


@pytest.mark.parametrize(("name", "spec"), STATEFUL)
async def test_workspaces_do_not_share_state(name: str, spec: CallSpec) -> None:
    domain = get_domain(name)
    first, second = tools_of(domain), tools_of(domain)
    before = await call(first, spec.name, **spec.arguments)
    again = await call(first, spec.name, **spec.arguments)
    elsewhere = await call(second, spec.name, **spec.arguments)
    assert again.content != before.content  # the call changes its workspace...
    assert elsewhere.content == before.content  # ...and only its own


async def test_refunded_item_shows_as_refunded_and_is_not_refunded_twice() -> None:
    tools = tools_of(get_domain("support"))
    refund = await call(
        tools, "refund_item", order_id="o-7001", item_id="bln-200", reason="damaged"
    )
    assert refund.value["amount"] == "$89.00"
    order = await call(tools, "get_order", order_id="O-7001")
    assert [item["refunded"] for item in order.value["items"]] == [True, False]
    twice = await call(tools, "refund_item", order_id="O-7001", item_id="BLN-200", reason="damaged")
    assert twice.status == "error"
    assert "already refunded" in twice.content


async def test_sorted_llm_spans_are_in_latency_order() -> None:
    tools = tools_of(get_domain("observability"))
    result = await call(tools, "sort_spans", by="latency_ms", kind="LLM", limit=50)
    latencies = [span["latency_ms"] for span in result.value["spans"]]
    assert latencies == sorted(latencies, reverse=True)
    assert {span["kind"] for span in result.value["spans"]} == {"LLM"}
    assert len(latencies) == 50 < result.value["matched"]


async def test_the_slowest_trace_task_opens_the_slowest_trace() -> None:
    domain = get_domain("observability")
    task = next(task for task in domain.tasks if task.key == "inspect-slowest-trace")
    tools = tools_of(domain)
    slowest = await call(tools, task.calls[0].name, **task.calls[0].arguments)
    assert slowest.value["spans"][0]["trace_id"] == task.calls[1].arguments["trace_id"]
    trace = await call(tools, task.calls[1].name, **task.calls[1].arguments)
    assert trace.value["latency_ms"] == slowest.value["spans"][0]["latency_ms"]
    assert trace.value["spans"][0]["depth"] == 0


def test_span_generation_depends_on_the_seed_only() -> None:
    assert generate_spans(SEED) == generate_spans(SEED) == recorded_spans()
    assert generate_spans(SEED + 1) != generate_spans(SEED)
    assert 200 <= len(recorded_spans()) <= 500
    assert {span.kind for span in recorded_spans()} == {"AGENT", "CHAIN", "LLM", "TOOL"}


async def test_report_findings_quote_the_data() -> None:
    domain = get_domain("observability")
    tools = tools_of(domain)
    task = next(task for task in domain.tasks if task.key == "write-report")
    findings = " ".join(task.calls[-1].arguments["findings"])
    answer = (await call(tools, "find_bottlenecks", threshold_ms=2000)).value["bottlenecks"][0]
    by_model = await call(tools, "aggregate_latency", group_by="model", kind="LLM")
    p95 = {row["model"]: row["p95_ms"] for row in by_model.value}
    web = (await call(tools, "suggest_improvements", span_name="web_search")).value
    fetch = (await call(tools, "suggest_improvements", span_name="fetch_url")).value
    timeouts = await call(tools, "query_spans", name="fetch_url", status="ERROR")
    web_errors = round(web["error_rate"] * web["spans"])
    for quoted in [
        f"LLM {answer['name']} calls",
        f"{answer['slow_spans']} of {answer['spans']} take over 2 s (p95 {answer['p95_ms']} ms)",
        f"{round(answer['share_of_leaf_time'] * 100)}% of the leaf-span time",
        f"p95 {p95['gpt-4o']} ms against {p95['gpt-4o-mini']} ms",
        f"{timeouts.value['matched']} of {fetch['spans']} calls",
        f"p95 of {web['p95_ms']} ms and {web_errors} of {web['spans']} calls",
    ]:
        assert quoted in findings
