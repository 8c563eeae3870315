"""The observability demo domain: find where a recorded LLM agent spends its time.

The workspace holds a few hundred spans of a synthetic agent, generated from a fixed seed: one
AGENT root per trace, a CHAIN that retrieves context through `vector_search`, a `plan` and an
`answer` LLM call on three models, and one to three TOOL calls in between, of which `web_search`
is slow and `fetch_url` sometimes times out. The tools list, sort and aggregate the spans, open a
trace, find bottlenecks, suggest improvements, set alerts and write a report; alerts and reports
are the workspace's mutable state.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Literal

from plangate.harness._domain import CallSpec, Domain, TaskSpec, register_domain
from plangate.harness._tools import Tool, ToolRetry, tool

Kind = Literal["LLM", "TOOL", "CHAIN", "AGENT"]
Status = Literal["OK", "ERROR"]
SortField = Literal["latency_ms", "prompt_tokens", "completion_tokens", "total_tokens"]
GroupField = Literal["kind", "name", "model", "status"]
TokenGroup = Literal["model", "name"]

SEED = 20240611
TRACE_COUNT = 48
MAX_LIMIT = 50
MAX_FINDINGS = 10
SLOW_MS = 2_000
FETCH_TIMEOUT_MS = 10_000

_MS_PER_TOKEN = {"claude-3-5-sonnet": 10.0, "gpt-4o": 12.0, "gpt-4o-mini": 5.0}
_TOOL_PROFILES: dict[str, tuple[int, int, float, str]] = {
    # name: (fastest ms, slowest ms, error rate, error message)
    "fetch_url": (150, 2_500, 0.12, "TimeoutError: no response after 10000 ms"),
    "sql_query": (40, 450, 0.03, "OperationalError: database is locked"),
    "web_search": (700, 4_200, 0.05, "HTTPError: 429 Too Many Requests"),
}


@dataclass(frozen=True, slots=True, kw_only=True)
class Span:
    """One recorded span of the synthetic agent."""

    span_id: str
    """`sp-0001`, unique in the workspace."""
    trace_id: str
    """`tr-0001`: the trace (one agent run) the span belongs to."""
    parent_id: str | None
    """The enclosing span; None for the AGENT root."""
    kind: Kind
    """OpenInference span kind."""
    name: str
    """What ran: the agent, chain or tool name, or the LLM call's role (`plan`, `answer`)."""
    model: str | None
    """The model of an LLM span; None otherwise."""
    start_ms: int
    """Start, in milliseconds after the trace started."""
    latency_ms: int
    """Duration in milliseconds."""
    prompt_tokens: int
    """Prompt tokens (an AGENT span counts those of its LLM calls)."""
    completion_tokens: int
    """Completion tokens (an AGENT span counts those of its LLM calls)."""
    status: Status
    """`ERROR` when the span failed."""
    error: str | None
    """The status message of a failed span."""

    @property
    def total_tokens(self) -> int:
        """Prompt plus completion tokens."""
        return self.prompt_tokens + self.completion_tokens

    def summary(self) -> dict[str, Any]:
        """The span as the tools show it: JSON-able, fields that do not apply left out."""
        row: dict[str, Any] = {
            "span_id": self.span_id,
            "trace_id": self.trace_id,
            "kind": self.kind,
            "name": self.name,
            "latency_ms": self.latency_ms,
            "status": self.status,
        }
        if self.model is not None:
            row["model"] = self.model
        if self.kind in ("LLM", "AGENT"):
            row["prompt_tokens"] = self.prompt_tokens
            row["completion_tokens"] = self.completion_tokens
        if self.error is not None:
            row["error"] = self.error
        return row


@dataclass(slots=True)
class _Recorder:
    """Builds the spans of one trace, children before their parents, on a running clock."""

    trace_id: str
    last_number: int
    rng: random.Random
    clock: int = 0
    spans: list[Span] = field(default_factory=list)

    def new_id(self) -> str:
        self.last_number += 1
        return f"sp-{self.last_number:04d}"

    def leaf(
        self,
        parent_id: str,
        kind: Kind,
        name: str,
        latency_ms: int,
        *,
        model: str | None = None,
        tokens: tuple[int, int] = (0, 0),
        error: str | None = None,
    ) -> Span:
        self.clock += self.rng.randint(1, 12)
        span = Span(
            span_id=self.new_id(),
            trace_id=self.trace_id,
            parent_id=parent_id,
            kind=kind,
            name=name,
            model=model,
            start_ms=self.clock,
            latency_ms=latency_ms,
            prompt_tokens=tokens[0],
            completion_tokens=tokens[1],
            status="OK" if error is None else "ERROR",
            error=error,
        )
        self.clock += latency_ms
        self.spans.append(span)
        return span

    def parent(
        self, span_id: str, parent_id: str | None, kind: Kind, name: str, start_ms: int
    ) -> None:
        """Close a span around what was recorded since `start_ms`; it fails if its answer did."""
        self.clock += self.rng.randint(3, 15)
        calls = [s for s in self.spans if s.kind == "LLM" and s.start_ms >= start_ms]
        failed = any(s.name == "answer" and s.status == "ERROR" for s in calls)
        self.spans.append(
            Span(
                span_id=span_id,
                trace_id=self.trace_id,
                parent_id=parent_id,
                kind=kind,
                name=name,
                model=None,
                start_ms=start_ms,
                latency_ms=self.clock - start_ms,
                prompt_tokens=sum(s.prompt_tokens for s in calls),
                completion_tokens=sum(s.completion_tokens for s in calls),
                status="ERROR" if failed else "OK",
                error="the final answer failed" if failed else None,
            )
        )


def _llm(
    recorder: _Recorder, parent_id: str, name: str, model: str, tokens: tuple[int, int]
) -> Span:
    rng = recorder.rng
    prompt, completion = tokens
    latency = 250 + prompt * 0.05 + completion * _MS_PER_TOKEN[model] * rng.uniform(0.85, 1.3)
    error = "RateLimitError: 429 from the provider" if rng.random() < 0.02 else None
    return recorder.leaf(
        parent_id, "LLM", name, round(latency), model=model, tokens=tokens, error=error
    )


def _tool_call(recorder: _Recorder, parent_id: str, name: str) -> Span:
    rng = recorder.rng
    fastest, slowest, error_rate, message = _TOOL_PROFILES[name]
    latency = fastest + round((slowest - fastest) * rng.random() ** 2)
    if rng.random() >= error_rate:
        return recorder.leaf(parent_id, "TOOL", name, latency)
    if name == "fetch_url":
        latency = FETCH_TIMEOUT_MS
    return recorder.leaf(parent_id, "TOOL", name, latency, error=message)


def _trace(trace_id: str, last_number: int, rng: random.Random) -> list[Span]:
    recorder = _Recorder(trace_id=trace_id, last_number=last_number, rng=rng)
    research = rng.random() < 0.5
    agent_id, chain_id = recorder.new_id(), recorder.new_id()
    chain_start = recorder.clock = rng.randint(1, 4)
    recorder.leaf(chain_id, "TOOL", "vector_search", rng.randint(60, 240))
    recorder.parent(chain_id, agent_id, "CHAIN", "retrieve_context", chain_start)
    plan_model = rng.choice(["claude-3-5-sonnet", "gpt-4o-mini"])
    _llm(recorder, agent_id, "plan", plan_model, (rng.randint(800, 2500), rng.randint(60, 300)))
    tool_count = rng.randint(1, 3)
    for _ in range(tool_count):
        _tool_call(recorder, agent_id, rng.choice(sorted(_TOOL_PROFILES)))
    answer_model = "gpt-4o" if research else rng.choice(["gpt-4o", "gpt-4o-mini", "gpt-4o-mini"])
    prompt = rng.randint(1500, 4000) + 1200 * tool_count
    _llm(recorder, agent_id, "answer", answer_model, (prompt, rng.randint(120, 900)))
    name = "research_agent" if research else "support_agent"
    recorder.parent(agent_id, None, "AGENT", name, 0)
    return sorted(recorder.spans, key=lambda span: span.start_ms)


def generate_spans(seed: int) -> tuple[Span, ...]:
    """The spans of `TRACE_COUNT` synthetic agent runs, in recorded order; same seed, same spans."""
    rng = random.Random(seed)
    spans: list[Span] = []
    for index in range(1, TRACE_COUNT + 1):
        spans.extend(_trace(f"tr-{index:04d}", len(spans), rng))
    return tuple(spans)


@cache
def recorded_spans() -> tuple[Span, ...]:
    """The workspace's spans: generated once from `SEED` (they are immutable, so shared)."""
    return generate_spans(SEED)


def nearest_rank(values: Iterable[int], pct: int) -> int:
    """The nearest-rank percentile `pct` (1 to 99) of `values`."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(pct / 100 * len(ordered)) - 1)]


def _check_range(argument: str, value: int, low: int, high: int) -> None:
    if not low <= value <= high:
        raise ToolRetry(f"{argument} must be between {low} and {high} (got {value}). Call again.")


class SpanWorkspace:
    """One session's view of the recorded spans, with the alerts and reports it has made."""

    def __init__(self, spans: tuple[Span, ...]) -> None:
        self.spans = spans
        self.names = sorted({span.name for span in spans})
        self.traces: dict[str, list[Span]] = {}
        for span in spans:
            self.traces.setdefault(span.trace_id, []).append(span)
        self.alerts: list[dict[str, Any]] = []
        self.reports: list[dict[str, Any]] = []

    def _named(self, name: str) -> list[Span]:
        found = [span for span in self.spans if span.name == name]
        if not found:
            raise ToolRetry(
                f"No span is named {name!r}. Span names are: {', '.join(self.names)}. "
                "Call again with one of them."
            )
        return found

    def _select(self, kind: Kind | None, name: str | None) -> list[Span]:
        spans = list(self.spans) if name is None else self._named(name)
        return [span for span in spans if kind is None or span.kind == kind]

    def query_spans(
        self,
        kind: Kind | None = None,
        name: str | None = None,
        status: Status | None = None,
        limit: int = 10,
    ) -> dict[str, Any]:
        """List recorded spans in trace order, filtered by kind, name and status.

        Args:
            kind: Only spans of this kind.
            name: Only spans with this exact name, e.g. `web_search` or `answer`.
            status: Only spans with this status.
            limit: How many spans to return, 1 to 50.
        """
        _check_range("limit", limit, 1, MAX_LIMIT)
        found = [s for s in self._select(kind, name) if status is None or s.status == status]
        return {"matched": len(found), "spans": [span.summary() for span in found[:limit]]}

    def sort_spans(
        self,
        by: SortField,
        kind: Kind | None = None,
        descending: bool = True,
        limit: int = 10,
    ) -> dict[str, Any]:
        """Sort spans by latency or token counts and return the top ones.

        Args:
            by: The field to sort on.
            kind: Only spans of this kind.
            descending: Largest first (the default) or smallest first.
            limit: How many spans to return, 1 to 50.
        """
        _check_range("limit", limit, 1, MAX_LIMIT)
        sign = -1 if descending else 1
        ordered = sorted(self._select(kind, None), key=lambda s: (sign * getattr(s, by), s.span_id))
        rows = [span.summary() | {by: getattr(span, by)} for span in ordered[:limit]]
        return {"by": by, "descending": descending, "matched": len(ordered), "spans": rows}

    def aggregate_latency(
        self, group_by: GroupField, kind: Kind | None = None, percentile: int = 95
    ) -> list[dict[str, Any]]:
        """Latency statistics per group: count, mean, p50, the chosen percentile and max.

        Args:
            group_by: The span field to group on (`model` groups the LLM spans only).
            kind: Only spans of this kind.
            percentile: The percentile to report besides p50, 1 to 99.
        """
        _check_range("percentile", percentile, 1, 99)
        groups: dict[str, list[int]] = {}
        for span in self._select(kind, None):
            key = getattr(span, group_by)
            if key is not None:
                groups.setdefault(key, []).append(span.latency_ms)
        rows = [_latency_row(group_by, key, values, percentile) for key, values in groups.items()]
        return sorted(rows, key=lambda row: (-row[f"p{percentile}_ms"], row[group_by]))

    def find_bottlenecks(self, threshold_ms: int = SLOW_MS, limit: int = 10) -> dict[str, Any]:
        """Find the LLM and TOOL span names that most often run longer than a threshold.

        Args:
            threshold_ms: A span slower than this many milliseconds counts as slow.
            limit: How many span names to return, 1 to 50.
        """
        _check_range("threshold_ms", threshold_ms, 1, 600_000)
        _check_range("limit", limit, 1, MAX_LIMIT)
        leaves = [span for span in self.spans if span.kind in ("LLM", "TOOL")]
        total = sum(span.latency_ms for span in leaves)
        groups: dict[str, list[Span]] = {}
        for span in leaves:
            groups.setdefault(span.name, []).append(span)
        rows = [_bottleneck_row(group, threshold_ms, total) for group in groups.values()]
        rows = [row for row in rows if row["slow_spans"]]
        rows.sort(key=lambda row: (-row["time_over_threshold_ms"], row["name"]))
        result: dict[str, Any] = {"threshold_ms": threshold_ms, "bottlenecks": rows[:limit]}
        if not rows:
            result["hint"] = "No LLM or TOOL span is that slow; try a lower threshold_ms."
        return result

    def get_trace(self, trace_id: str) -> dict[str, Any]:
        """Show one trace as a tree: each span with its parent, depth, start and latency.

        Args:
            trace_id: The trace, e.g. `tr-0007`.
        """
        spans = self.traces.get(trace_id.strip().lower())
        if spans is None:
            raise ToolRetry(
                f"Unknown trace id {trace_id!r}. Trace ids run from 'tr-0001' to "
                f"'tr-{TRACE_COUNT:04d}'; sort_spans(by='latency_ms', kind='AGENT') lists the "
                "slowest traces."
            )
        root = spans[0]
        depth: dict[str | None, int] = {None: -1}
        rows = []
        for span in spans:
            depth[span.span_id] = depth[span.parent_id] + 1
            rows.append(
                span.summary()
                | {
                    "parent_id": span.parent_id,
                    "depth": depth[span.span_id],
                    "start_ms": span.start_ms,
                }
            )
        return {
            "trace_id": root.trace_id,
            "agent": root.name,
            "latency_ms": root.latency_ms,
            "status": root.status,
            "spans": rows,
        }

    def token_usage(self, group_by: TokenGroup = "model") -> list[dict[str, Any]]:
        """Token counts of the LLM calls per model or per call name, largest first.

        Args:
            group_by: Group the LLM spans by `model` or by `name`.
        """
        groups: dict[str, list[Span]] = {}
        for span in self._select("LLM", None):
            groups.setdefault(getattr(span, group_by) or "", []).append(span)
        rows = [
            {
                group_by: key,
                "calls": len(group),
                "prompt_tokens": sum(s.prompt_tokens for s in group),
                "completion_tokens": sum(s.completion_tokens for s in group),
                "total_tokens": sum(s.total_tokens for s in group),
                "mean_completion_tokens": round(
                    sum(s.completion_tokens for s in group) / len(group)
                ),
            }
            for key, group in groups.items()
        ]
        return sorted(rows, key=lambda row: (-row["total_tokens"], row[group_by]))

    def suggest_improvements(self, span_name: str) -> dict[str, Any]:
        """Suggest how to make the spans of one name faster or more reliable, from their stats.

        Args:
            span_name: The span name, e.g. `web_search` or `answer`.
        """
        spans = self._named(span_name)
        return {
            "span_name": span_name,
            "kind": spans[0].kind,
            "spans": len(spans),
            "p95_ms": nearest_rank((s.latency_ms for s in spans), 95),
            "error_rate": round(sum(s.status == "ERROR" for s in spans) / len(spans), 3),
            "suggestions": _suggestions(spans),
        }

    def create_alert(
        self, span_name: str, threshold_ms: int, percentile: int = 95
    ) -> dict[str, Any]:
        """Create an alert that fires when a span name's latency percentile exceeds a threshold.

        Args:
            span_name: The span name to watch, e.g. `web_search`.
            threshold_ms: Fire when the percentile is above this many milliseconds.
            percentile: The latency percentile to watch, 1 to 99.
        """
        spans = self._named(span_name)
        _check_range("threshold_ms", threshold_ms, 1, 600_000)
        _check_range("percentile", percentile, 1, 99)
        for alert in self.alerts:
            if alert["span_name"] == span_name and alert["percentile"] == percentile:
                raise ToolRetry(
                    f"Alert {alert['alert_id']} already watches p{percentile} of {span_name!r}; "
                    "it does not need to be created again."
                )
        current = nearest_rank((s.latency_ms for s in spans), percentile)
        alert = {
            "alert_id": f"alert-{len(self.alerts) + 1}",
            "span_name": span_name,
            "percentile": percentile,
            "condition": f"p{percentile} latency > {threshold_ms} ms",
            "current_ms": current,
            "firing": current > threshold_ms,
        }
        self.alerts.append(alert)
        return alert

    def write_report(self, title: str, findings: list[str]) -> dict[str, Any]:
        """Write the analysis report; writing again saves a new revision.

        Args:
            title: The report title.
            findings: The findings and suggested improvements, one sentence each (1 to 10).
        """
        if not title.strip():
            raise ToolRetry("The report needs a title. Call again with a non-empty title.")
        kept = [finding.strip() for finding in findings if finding.strip()]
        if not 1 <= len(kept) <= MAX_FINDINGS:
            raise ToolRetry(
                f"A report holds 1 to {MAX_FINDINGS} non-empty findings (got {len(kept)}). "
                "Call again with the findings as a list of sentences."
            )
        report = {
            "report_id": f"report-{len(self.reports) + 1}",
            "title": title.strip(),
            "findings": kept,
        }
        self.reports.append(report)
        words = sum(len(finding.split()) for finding in kept)
        return {
            "report_id": report["report_id"],
            "title": report["title"],
            "findings": len(kept),
            "words": words,
        }

    def tools(self) -> list[Tool]:
        """This workspace's tools."""
        methods: list[Callable[..., Any]] = [
            self.query_spans,
            self.sort_spans,
            self.aggregate_latency,
            self.find_bottlenecks,
            self.get_trace,
            self.token_usage,
            self.suggest_improvements,
            self.create_alert,
            self.write_report,
        ]
        return [tool(method) for method in methods]


def _latency_row(group_by: str, key: str, values: list[int], pct: int) -> dict[str, Any]:
    return {
        group_by: key,
        "count": len(values),
        "mean_ms": round(sum(values) / len(values)),
        "p50_ms": nearest_rank(values, 50),
        f"p{pct}_ms": nearest_rank(values, pct),
        "max_ms": max(values),
    }


def _bottleneck_row(group: list[Span], threshold_ms: int, total_ms: int) -> dict[str, Any]:
    slow = [span for span in group if span.latency_ms > threshold_ms]
    slowest = max(group, key=lambda span: (span.latency_ms, span.span_id))
    return {
        "name": group[0].name,
        "kind": group[0].kind,
        "spans": len(group),
        "slow_spans": len(slow),
        "p95_ms": nearest_rank((span.latency_ms for span in group), 95),
        "time_over_threshold_ms": sum(span.latency_ms - threshold_ms for span in slow),
        "share_of_leaf_time": round(sum(span.latency_ms for span in group) / total_ms, 3),
        "slowest_trace_id": slowest.trace_id,
    }


def _suggestions(spans: list[Span]) -> list[str]:
    p95 = nearest_rank((span.latency_ms for span in spans), 95)
    errors = sum(span.status == "ERROR" for span in spans)
    tips = _llm_tips(spans, p95) if spans[0].kind == "LLM" else []
    if spans[0].kind == "TOOL" and p95 > SLOW_MS:
        tips.append(
            f"p95 is {p95} ms: cache repeated queries and run independent calls in parallel."
        )
    if errors / len(spans) > 0.05:
        tips.append(
            f"{errors} of {len(spans)} calls failed: retry with backoff and fail fast with a "
            "shorter timeout."
        )
    return tips or [f"No change needed: p95 is {p95} ms and {errors} of {len(spans)} calls failed."]


def _llm_tips(spans: list[Span], p95: int) -> list[str]:
    tips = []
    completion = round(sum(span.completion_tokens for span in spans) / len(spans))
    prompt = round(sum(span.prompt_tokens for span in spans) / len(spans))
    large = sum(span.model == "gpt-4o" for span in spans) / len(spans)
    if completion > 300:
        tips.append(f"Answers average {completion} completion tokens: cap max_tokens and stream.")
    if prompt > 3000:
        tips.append(f"Prompts average {prompt} tokens: trim the retrieved context or cache it.")
    if large > 0.5 and p95 > SLOW_MS:
        tips.append(f"{large:.0%} of the calls use gpt-4o: route short answers to gpt-4o-mini.")
    if not tips and p95 > SLOW_MS:
        tips.append(f"p95 is {p95} ms: shorten the prompt or move this call to a faster model.")
    return tips


def make_tools() -> list[Tool]:
    """Build a fresh workspace over the recorded spans and return its tools."""
    return SpanWorkspace(recorded_spans()).tools()


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
