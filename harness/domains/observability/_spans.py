"""The observability domain's data: a few hundred spans of a synthetic agent, from a fixed seed."""

from __future__ import annotations

import math
import random
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Literal

Kind = Literal["LLM", "TOOL", "CHAIN", "AGENT"]
Status = Literal["OK", "ERROR"]

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
