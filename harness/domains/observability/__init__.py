"""The observability demo domain: find where a recorded LLM agent spends its time.

The workspace holds a few hundred spans of a synthetic agent, generated from a fixed seed: one
AGENT root per trace, a CHAIN that retrieves context through `vector_search`, a `plan` and an
`answer` LLM call on three models, and one to three TOOL calls in between, of which `web_search`
is slow and `fetch_url` sometimes times out. The tools list, sort and aggregate the spans, open a
trace, find bottlenecks, suggest improvements, set alerts and write a report; alerts and reports
are the workspace's mutable state.
"""

from __future__ import annotations

from plangate.harness.domains._domain import CallSpec, Domain, TaskSpec, register_domain
from plangate.harness.domains.observability._spans import (
    SEED,
    TRACE_COUNT,
    Span,
    generate_spans,
    nearest_rank,
    recorded_spans,
)
from plangate.harness.domains.observability._workspace import SpanWorkspace, make_tools

INSTRUCTIONS = (
    "You are an observability analyst for an LLM agent. The workspace holds the recorded spans "
    f"of {TRACE_COUNT} agent runs (kinds AGENT, CHAIN, LLM and TOOL; latencies in milliseconds). "
    "Back every claim with numbers from the tools, never with guesses. Changes to production "
    "need the user's approval: mark such work blocked and say why."
)

DEMO_REQUEST = (
    "Sort the LLM spans by latency, identify the bottlenecks, and write a report with "
    "suggested improvements."
)

TASKS = (
    TaskSpec(
        key="sort-llm-latency",
        title="Sort the LLM spans by latency",
        phrases=("sort the llm spans", "llm spans by latency", "slowest llm calls"),
        calls=(
            CallSpec(name="sort_spans", arguments={"by": "latency_ms", "kind": "LLM", "limit": 10}),
            CallSpec(
                name="aggregate_latency",
                arguments={"group_by": "model", "kind": "LLM", "percentile": 95},
            ),
        ),
    ),
    TaskSpec(
        key="find-bottlenecks",
        title="Identify the latency bottlenecks",
        phrases=("bottleneck",),
        calls=(
            CallSpec(name="find_bottlenecks", arguments={"threshold_ms": 2000, "limit": 5}),
            CallSpec(name="aggregate_latency", arguments={"group_by": "name", "percentile": 95}),
        ),
    ),
    TaskSpec(
        key="write-report",
        title="Write a latency report with suggested improvements",
        phrases=("write a report", "latency report", "report with suggested"),
        calls=(
            CallSpec(name="suggest_improvements", arguments={"span_name": "answer"}),
            CallSpec(name="suggest_improvements", arguments={"span_name": "web_search"}),
            CallSpec(
                name="write_report",
                arguments={
                    "title": "Agent latency review",
                    "findings": [
                        "LLM answer calls are the main bottleneck: 46 of 48 take over 2 s "
                        "(p95 11658 ms) and they hold 55% of the leaf-span time.",
                        "gpt-4o answers are the slowest (p95 12475 ms against 4471 ms on "
                        "gpt-4o-mini): cap max_tokens, stream, and route short answers to "
                        "gpt-4o-mini.",
                        "fetch_url times out at 10 s in 4 of 36 calls: retry with backoff and "
                        "fail fast with a shorter timeout.",
                        "web_search has a p95 of 3847 ms and 5 of 29 calls were rate limited: "
                        "cache repeated queries and run independent searches in parallel.",
                    ],
                },
            ),
        ),
    ),
    TaskSpec(
        key="inspect-slowest-trace",
        title="Inspect the slowest trace",
        phrases=("slowest trace", "slowest agent run"),
        calls=(
            CallSpec(
                name="sort_spans", arguments={"by": "latency_ms", "kind": "AGENT", "limit": 1}
            ),
            CallSpec(name="get_trace", arguments={"trace_id": "tr-0032"}),
        ),
    ),
    TaskSpec(
        key="token-usage",
        title="Summarize the token usage by model",
        phrases=("token usage", "tokens per model", "most tokens"),
        calls=(CallSpec(name="token_usage", arguments={"group_by": "model"}),),
    ),
    TaskSpec(
        key="failed-tool-spans",
        title="List the failed tool spans",
        phrases=("failed tool", "tool errors", "tool failures"),
        calls=(
            CallSpec(
                name="query_spans", arguments={"kind": "TOOL", "status": "ERROR", "limit": 10}
            ),
        ),
    ),
    TaskSpec(
        key="p95-per-kind",
        title="Compute the p95 latency per span kind",
        phrases=("latency per span kind", "p95 latency per", "p95 per kind"),
        calls=(
            CallSpec(name="aggregate_latency", arguments={"group_by": "kind", "percentile": 95}),
        ),
    ),
    TaskSpec(
        key="web-search-alert",
        title="Create a latency alert for web_search",
        phrases=("latency alert", "alert for web_search", "alert on web_search"),
        calls=(
            CallSpec(
                name="create_alert",
                arguments={"span_name": "web_search", "threshold_ms": 3000, "percentile": 95},
            ),
        ),
    ),
    TaskSpec(
        key="deploy-search-cache",
        title="Deploy the search cache to production",
        phrases=("deploy", "to production"),
        calls=(),
        blocked_reason=(
            "Deploying to production needs the service owner's approval; the agent has no "
            "deploy tool. Ask the user to approve and deploy it."
        ),
    ),
)

REQUESTS = (
    "Which model uses the most tokens? Show me the token usage by model.",
    "What is the p95 latency per span kind?",
    "Show me the tool errors from the recorded runs.",
    "Inspect the slowest trace and tell me where its time went.",
    "Find the bottlenecks and create a latency alert for web_search at 3 seconds.",
    "List the failed tool spans, identify the bottlenecks, and write a report on them.",
    "Sort the LLM spans by latency, summarize the token usage by model, inspect the slowest "
    "trace, and write a latency report.",
    "Identify the bottlenecks, write a report with suggested improvements, and deploy the "
    "search cache to production.",
    "Compute the p95 latency per span kind, sort the LLM spans by latency, list the failed "
    "tool spans, create a latency alert for web_search, and write a latency report.",
)


@register_domain("observability")
def observability() -> Domain:
    """The observability domain: find where a recorded LLM agent spends its time."""
    return Domain(
        name="observability",
        description="Analyze the latency, tokens and errors of a recorded LLM agent's spans.",
        instructions=INSTRUCTIONS,
        make_tools=make_tools,
        tasks=TASKS,
        demo_request=DEMO_REQUEST,
        requests=REQUESTS,
    )


__all__ = [
    "SEED",
    "TRACE_COUNT",
    "Span",
    "SpanWorkspace",
    "generate_spans",
    "make_tools",
    "nearest_rank",
    "observability",
    "recorded_spans",
]
