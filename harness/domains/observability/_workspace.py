"""The observability domain's workspace.

Tools that list, sort and aggregate the spans, open a trace, find bottlenecks, suggest
improvements, set alerts and write reports; alerts and reports are its mutable state.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from plangate.harness._tools import Tool, ToolRetry, tool
from plangate.harness.domains.observability._spans import (
    MAX_FINDINGS,
    MAX_LIMIT,
    SLOW_MS,
    TRACE_COUNT,
    Kind,
    Span,
    Status,
    nearest_rank,
    recorded_spans,
)

SortField = Literal["latency_ms", "prompt_tokens", "completion_tokens", "total_tokens"]
GroupField = Literal["kind", "name", "model", "status"]
TokenGroup = Literal["model", "name"]


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
