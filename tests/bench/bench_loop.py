"""Harness overhead per model iteration on a scripted run: plangate, pydantic-ai and the OTel SDK.

A run is one turn of 20 tool calls (one per model response) and a final answer: 21 model calls.
The models answer from a script, so a run's time is the loop's own cost: on both sides a
function model hands out the next step (plangate's `FunctionModel`, pydantic-ai's
`FunctionModel`), with no recording of what it was sent (`ScriptedModel` keeps a copy of every
request for tests). Each run is timed whole with `perf_counter_ns` inside one coroutine on one
event loop (no event loop setup in the timing) and divided by the 21 model calls. The process's CPU time is taken alongside, to tell the loop's
cost from time lost to other processes. The cases take turns: the timed runs are spread over
`ROUNDS` rounds that each run every case, so that the machine slowing down for a while (other
processes, CPU frequency, a busy neighbour on the host) slows every case alike and the rows stay
comparable. Peak memory is measured in separate runs under `tracemalloc`, never while timing.

On a shared virtual machine the same code can take 1.5 times as long from one minute to the
next, and the process's CPU time slows with it (the guest cannot see the host taking the CPU).
So each row is also given in SDK spans: in every round, its median over the median time of one
OpenTelemetry SDK span measured in the same round, then the median over rounds. That ratio holds
still when the machine's speed does not, and times it by a reference machine's span time says
what the row would take there (the issue's reference: about 27 µs per span). It is not the
whole truth: a slow spell slows the span's tight loop more than the harness's run, so the ratio
of the best runs (each row's fastest over the span's fastest) is given too, and is higher.
"""

from __future__ import annotations

import gc
import statistics
import time
import tracemalloc
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any, Literal

from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from plangate.ci import telemetry
from plangate.harness import Agent, ToolCall, TurnResult, load_variant, tool
from plangate.harness.models import FunctionModel

TOOL_CALLS = 20
"""Work tool calls per run."""
MODEL_CALLS = TOOL_CALLS + 1
"""Model calls per run: one per tool call, then the final answer."""
REQUEST = "Look at the numbers."
"""One action verb: alyx's planning trigger skips planning, so no todo tools are needed."""
ANSWER = "The numbers add up."

# Run counts keep `make bench` well under two minutes: pydantic-ai takes milliseconds per call.
PLANGATE_RUNS = 400
PYDANTIC_AI_RUNS = 30
SPAN_BATCHES = 400
SPANS_PER_BATCH = 100
WARMUP_RUNS = 5
MEMORY_RUNS = 3
ROUNDS = 20
"""Rounds the timed runs are spread over; every case runs `runs / ROUNDS` times in each."""
REFERENCE_SPAN_US = 27.0
"""The OpenTelemetry SDK's time per span on the reference machine the target was set on."""

Unit = Literal["iteration", "span"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Result:
    """One row of the benchmark table."""

    name: str
    """What was measured."""
    unit: Unit
    """What the times are per: a model iteration, or one span."""
    median_us: float
    """Median µs per unit over the timed runs."""
    min_us: float
    """Fastest run's µs per unit: the least disturbed by other processes."""
    p90_us: float
    """90th percentile µs per unit."""
    cpu_median_us: float
    """Median CPU µs per unit (all threads of the process: pydantic-ai runs tools in a thread)."""
    spans: float | None
    """Median over rounds of the round's median time over that round's median SDK span time;
    None without the span case."""
    best_spans: float | None
    """The fastest run's time over the fastest SDK span batch's time per span; None without
    the span case."""
    peak_kib: float
    """Peak traced memory of one run (per span for the span row), KiB, median of a few runs."""
    runs: int
    """Timed runs."""

    @property
    def at_reference(self) -> float:
        """µs per unit on the reference machine: `spans` times its span time."""
        return (self.spans or 0.0) * REFERENCE_SPAN_US

    @property
    def best_at_reference(self) -> float:
        """µs per unit on the reference machine from the best runs: `best_spans` times it."""
        return (self.best_spans or 0.0) * REFERENCE_SPAN_US

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "unit": self.unit,
            "median_us": round(self.median_us, 1),
            "min_us": round(self.min_us, 1),
            "p90_us": round(self.p90_us, 1),
            "cpu_median_us": round(self.cpu_median_us, 1),
            "sdk_spans": None if self.spans is None else round(self.spans, 2),
            "us_at_reference_span": None if self.spans is None else round(self.at_reference, 1),
            "best_sdk_spans": None if self.best_spans is None else round(self.best_spans, 2),
            "best_us_at_reference_span": (
                None if self.best_spans is None else round(self.best_at_reference, 1)
            ),
            "peak_kib": round(self.peak_kib, 1),
            "runs": self.runs,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class Case:
    """A benchmark: how to prepare a run and how to run it."""

    name: str
    """The table row."""
    run: Callable[[], Awaitable[Any]]
    """One whole scripted run; returns what `check` looks at."""
    check: Callable[[Any], None] = lambda _: None
    """Raises if a run did not go as scripted; called once, outside the timing."""
    prepare: Callable[[], None] = lambda: None
    """Called before every run, outside the timing (clears the span exporter)."""
    runs: int = PLANGATE_RUNS
    """Timed runs."""
    per: int = MODEL_CALLS
    """Units per run (model calls, or spans)."""
    unit: Unit = "iteration"
    """What a time is per."""


async def measure(case: Case) -> Result:
    """Check one run, warm up, time `case.runs` runs, then measure peak memory separately."""
    (result,) = await measure_all([case])
    return result


async def measure_all(cases: Sequence[Case], rounds: int = ROUNDS) -> list[Result]:
    """Check and warm up every case, then time them in turns over `rounds` rounds."""
    for case in cases:
        case.prepare()
        case.check(await case.run())
        for _ in range(WARMUP_RUNS):
            case.prepare()
            await case.run()
    gc.collect()
    times: dict[str, Timings] = {case.name: Timings() for case in cases}
    for round_index in range(rounds):
        for case in cases:
            share = case.runs // rounds + (round_index < case.runs % rounds)
            await time_runs(case, share, times[case.name])
            timings = times[case.name]
            timings.rounds.append(statistics.median(timings.wall[-share:]))
    span = next((times[case.name] for case in cases if case.unit == "span"), None)
    return [
        Result(
            name=case.name,
            unit=case.unit,
            median_us=statistics.median(times[case.name].wall),
            min_us=min(times[case.name].wall),
            p90_us=statistics.quantiles(times[case.name].wall, n=10)[-1],
            cpu_median_us=statistics.median(times[case.name].cpu),
            spans=None if span is None else in_spans(times[case.name].rounds, span.rounds),
            best_spans=None if span is None else min(times[case.name].wall) / min(span.wall),
            peak_kib=await peak_kib(case),
            runs=case.runs,
        )
        for case in cases
    ]


def in_spans(rounds: Sequence[float], span_rounds: Sequence[float]) -> float:
    """Median over rounds of a case's round median over the same round's span median."""
    return statistics.median([t / s for t, s in zip(rounds, span_rounds, strict=True)])


@dataclass(frozen=True, slots=True)
class Timings:
    """The µs per unit of a case's timed runs so far."""

    wall: list[float] = field(default_factory=list)
    """Wall clock."""
    cpu: list[float] = field(default_factory=list)
    """Process CPU time."""
    rounds: list[float] = field(default_factory=list)
    """The median wall clock of each round."""


async def time_runs(case: Case, count: int, times: Timings) -> None:
    """Time `count` runs of `case`, each prepared outside the timing, into `times`."""
    for _ in range(count):
        case.prepare()
        start, start_cpu = time.perf_counter_ns(), time.process_time_ns()
        await case.run()
        end_cpu, end = time.process_time_ns(), time.perf_counter_ns()
        times.wall.append((end - start) / case.per / 1000)
        times.cpu.append((end_cpu - start_cpu) / case.per / 1000)


async def peak_kib(case: Case) -> float:
    """Median over a few runs of the peak memory a run allocates above what was live before it."""
    peaks: list[float] = []
    tracemalloc.start()
    try:
        for _ in range(MEMORY_RUNS):
            case.prepare()
            gc.collect()
            tracemalloc.reset_peak()
            before, _ = tracemalloc.get_traced_memory()
            await case.run()
            _, peak = tracemalloc.get_traced_memory()
            peaks.append((peak - before) / 1024 / (case.per if case.unit == "span" else 1))
    finally:
        tracemalloc.stop()
    return statistics.median(peaks)


# -- plangate -------------------------------------------------------------------------------


@tool
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: The first number.
        b: The second number.
    """
    return a + b


WORK = tuple(ToolCall.of("add", f"call_{i}", a=i, b=1) for i in range(TOOL_CALLS))
"""Distinct arguments on every call, so the loop guard stays quiet."""
ENDINGS = {
    "naive": ANSWER,
    "alyx": ToolCall.of("finish", f"call_{TOOL_CALLS}", summary=ANSWER),
}
"""The last scripted step: text ends a naive turn, only `finish` ends an alyx turn."""


def plangate_case(variant_name: str, *, traced: bool) -> Case:
    """A plangate run: a fresh scripted model, agent and session per run, as a caller would."""
    variant = load_variant(variant_name)
    script = (*WORK, ENDINGS[variant_name])
    wired = telemetry("memory" if traced else "none")
    memory = wired.memory

    async def run() -> TurnResult:
        steps = iter(script)  # the next step whatever was sent, as pydantic-ai's model below
        agent = Agent(
            model=FunctionModel(lambda messages, tools: next(steps), name="scripted"),
            variant=variant,
            tools=lambda: (add,),
            tracer_provider=wired.provider,
        )
        return await agent.session("bench").run_turn(REQUEST)

    def check(result: TurnResult) -> None:
        added = sum(call.name == "add" and call.status == "ok" for call in result.tool_calls)
        finished = result.stop_reason == "finished" and result.answer == ANSWER
        if not finished or added != TOOL_CALLS or result.iterations != MODEL_CALLS:
            raise AssertionError(f"{variant_name}: the scripted run went wrong: {result.to_dict()}")
        # One AGENT span, one LLM span per model call, one TOOL span per call (and finish's).
        spans = 1 + MODEL_CALLS + len(result.tool_calls)
        if memory is not None and len(memory.get_finished_spans()) != spans:
            found = len(memory.get_finished_spans())
            raise AssertionError(f"{variant_name}: {found} spans, expected {spans}")

    tracing = "tracing on, in-memory" if traced else "tracing off"
    return Case(
        name=f"plangate {variant_name} ({tracing})",
        run=run,
        check=check,
        prepare=memory.clear if memory is not None else lambda: None,
    )


# -- pydantic-ai ----------------------------------------------------------------------------


def pydantic_ai_version() -> str | None:
    """The installed pydantic-ai version, or None when it is not installed."""
    try:
        return metadata.version("pydantic-ai-slim")
    except metadata.PackageNotFoundError:
        return None


def pydantic_ai_case(*, traced: bool) -> Case:
    """pydantic-ai's agent loop on the same script: a `FunctionModel` and a `tool_plain` tool."""
    from pydantic_ai import Agent as PydanticAgent
    from pydantic_ai import AgentRunResult
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel
    from pydantic_ai.models.instrumented import InstrumentationSettings

    # Async: FunctionModel runs a sync function in a worker thread, which is not the loop's cost.
    async def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        # Requests and responses alternate, starting with the user's request.
        index = len(messages) // 2
        if index < TOOL_CALLS:
            call = WORK[index]
            part = ToolCallPart(tool_name=call.name, args=call.arguments, tool_call_id=call.id)
            return ModelResponse(parts=[part])
        return ModelResponse(parts=[TextPart(content=ANSWER)])

    agent = PydanticAgent(FunctionModel(respond))

    # Sync, as plangate's: pydantic-ai runs it in a worker thread, which is part of its cost.
    @agent.tool_plain
    def add(a: int, b: int) -> int:
        """Add two integers.

        Args:
            a: The first number.
            b: The second number.
        """
        return a + b

    wired = telemetry("memory" if traced else "none")
    memory = wired.memory
    if traced:
        agent.instrument = InstrumentationSettings(tracer_provider=wired.provider)

    async def run() -> AgentRunResult[str]:
        return await agent.run(REQUEST)

    def check(result: AgentRunResult[str]) -> None:
        returns = [
            part.content
            for message in result.all_messages()
            for part in message.parts
            if part.part_kind == "tool-return"
        ]
        if result.output != ANSWER or returns != [i + 1 for i in range(TOOL_CALLS)]:
            raise AssertionError(f"pydantic-ai: the scripted run went wrong: {result.output!r}")
        if memory is not None and not memory.get_finished_spans():
            raise AssertionError("pydantic-ai: instrumented, but no spans were exported")

    name = "pydantic-ai (FunctionModel, instrumented)" if traced else "pydantic-ai (FunctionModel)"
    return Case(
        name=name,
        run=run,
        check=check,
        prepare=memory.clear if memory is not None else lambda: None,
        runs=PYDANTIC_AI_RUNS,
    )


# -- the OpenTelemetry SDK --------------------------------------------------------------------

SPAN_ATTRIBUTES: dict[str, Any] = {
    "openinference.span.kind": "TOOL",
    "session.id": "bench",
    "user.id": "user",
    "metadata": '{"variant": "naive"}',
    "tool.name": "add",
    "tool.id": "call_0",
    "input.value": '{"a":0,"b":1}',
    "input.mime_type": "application/json",
    "output.value": "1",
    "plangate.iteration": 1,
}


def span_case() -> Case:
    """The SDK's own cost: start a span with ten attributes and end it, nothing else."""
    wired = telemetry("memory")
    assert wired.provider is not None and isinstance(wired.memory, InMemorySpanExporter)
    tracer = wired.provider.get_tracer("plangate.bench")

    async def run() -> None:
        for _ in range(SPANS_PER_BATCH):
            tracer.start_span("tool.add", attributes=SPAN_ATTRIBUTES).end()

    return Case(
        name="OpenTelemetry SDK per span",
        run=run,
        prepare=wired.memory.clear,
        runs=SPAN_BATCHES,
        per=SPANS_PER_BATCH,
        unit="span",
    )


# -- all of it --------------------------------------------------------------------------------


def cases() -> list[Case]:
    """Every case, in table order; pydantic-ai's only when it is installed."""
    plangate = [
        plangate_case(variant, traced=traced)
        for traced in (False, True)
        for variant in ("naive", "alyx")
    ]
    third_party = (
        [pydantic_ai_case(traced=False), pydantic_ai_case(traced=True)]
        if pydantic_ai_version()
        else []
    )
    return [*plangate, *third_party, span_case()]


async def run_all() -> list[Result]:
    """Measure every case, in turns, on the running event loop."""
    return await measure_all(cases())
