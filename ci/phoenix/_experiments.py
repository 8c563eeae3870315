"""Variant replays as Phoenix experiments, compared side by side in Phoenix.

An experiment runs one variant over a mirrored golden dataset (`_datasets`): the task
replays each example's golden turn, and plangate's evaluators score the replay's trace table.
Phoenix's experiment tasks are synchronous, and the client refuses an async one, so the task
runs the replay in an event loop of its own (`run_coroutine`).

While a task runs, the Phoenix client re-labels every span created (by any tracer provider)
with the experiment's project, under the run's root span "Task: replay_<variant>". So the
replay's spans go over OTLP to the same server and show up in the run's trace, their
`session.id` namespaced `DATASET:VARIANT:RUN:SESSION`; the trace table the evaluators read keeps
the golden ids.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable, Coroutine, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import pyarrow as pa
from opentelemetry.sdk.trace import ReadableSpan, SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)
from opentelemetry.trace import SpanContext

from plangate.ci._rubrics import turn_rubrics
from plangate.ci.phoenix._annotations import shorten
from plangate.ci.phoenix._client import client_url, phoenix_errors
from plangate.ci.phoenix._datasets import PhoenixDataset, PhoenixDatasetError
from plangate.ci.phoenix._export import namespaced_span
from plangate.ci.phoenix.names import TRACES_PATH, compare_url, namespace
from plangate.evaluators import EvaluatorError, RubricSet, evaluate
from plangate.evaluators import evaluators as registered
from plangate.evaluators.scores import (
    EVALUATOR,
    EXPLANATION,
    LABEL,
    OUTCOME,
    PASSED,
    SCORE,
    VERSION,
)
from plangate.harness import PlangateError, get_domain, load_variant, model_from_spec
from plangate.replay import (
    CASSETTE_MODELS,
    GoldenDataset,
    ReferenceAgent,
    ReplayResult,
    ToolSource,
    TraceTableExporter,
    read_dataset,
    replay_turn,
    spans_from_table,
)
from plangate.replay.agents import AgentDriver, AgentSpec

if TYPE_CHECKING:
    from phoenix.client import Client
    from phoenix.client.resources.datasets import Dataset

T = TypeVar("T")


@dataclass(frozen=True, slots=True, kw_only=True)
class PhoenixExperiment:
    """One variant's replay of a Phoenix dataset, as a Phoenix experiment."""

    id: str
    name: str
    variant: str
    model: str
    tools: str
    dataset_id: str
    dataset_version_id: str
    runs: int
    """Task runs stored (one per example)."""
    failed_runs: int
    """Runs whose task raised."""
    scores: Mapping[str, float | None]
    """Mean score per evaluator (None: no run had a score)."""
    passed: Mapping[str, int]
    """Runs that passed, per evaluator."""
    url: str
    """The experiment's page (Phoenix's compare view with this experiment)."""
    project: str | None = None
    """The hidden project of the runs' traces."""


class ReplayMissingError(PlangateError):
    """An evaluator found no replay for a run: the run's task failed."""


def run_experiment(
    client: Client,
    phoenix_dataset: PhoenixDataset | str,
    dataset_path: str | Path,
    variant: str | AgentSpec,
    *,
    model: str,
    tools: ToolSource = "cassette",
    evaluators: Sequence[str] | None = None,
    name: str | None = None,
    timeout: int = 120,
) -> PhoenixExperiment:
    """Replay every example's golden turn with `variant` as a Phoenix experiment.

    The task replays the turn (`replay_turn` with `model` and `tools`; it runs its own
    event loop, since Phoenix's experiment tasks are synchronous) and returns the replay's
    summary: answer, stop reason, steps, divergence. The replay's spans go to the experiment's
    trace project under Phoenix's task span (their `session.id` namespaced): the reference
    agent's as they end, a team's agent's (`variant` an `AgentSpec`) from its replay's trace
    table, after the turn. Each evaluator is a
    plangate evaluator applied to the replay's trace table, with the golden turn's rubric; it
    gives Phoenix the score, label and explanation.

    Args:
        client: A Phoenix client.
        phoenix_dataset: The mirrored dataset (`mirror_dataset`), or a Phoenix dataset's name
            or id whose examples carry `session_id` and `turn_index` metadata.
        dataset_path: The golden dataset folder the examples came from.
        variant: The harness variant (name or .toml path), or a team's agent.
        model: `cassette`, `cassette-lenient`, `sim:NAME` or `openai:MODEL`.
        tools: Tool results from the cassette or live.
        evaluators: Plangate evaluators (default: all).
        name: The experiment's name (default: `variant · model`).
        timeout: Seconds one task may take.
    """
    golden = read_dataset(dataset_path)
    names = _evaluator_names(evaluators, sorted(registered()))
    _check_options(golden, variant, model)
    rubrics = turn_rubrics(golden, str(dataset_path))
    label = variant if isinstance(variant, str) else variant.label
    title = name or f"{label} · {model}"
    with phoenix_errors(client, f"running experiment {title!r}"):
        dataset = _phoenix_dataset(client, phoenix_dataset)
        _check_examples(dataset, golden)
        replays = _Replays(
            golden,
            rubrics,
            names,
            variant=variant,
            model=model,
            tools=tools,
            endpoint=f"{client_url(client)}{TRACES_PATH}",
        )
        ran = client.experiments.run_experiment(
            dataset=dataset,
            task=replays.task(),
            evaluators={n: replays.evaluator(n) for n in names},
            experiment_name=title,
            experiment_description=f"plangate replay of {golden.name!r} with {label!r}",
            experiment_metadata={
                "variant": label,
                "model": model,
                "tools": tools,
                "golden_dataset": golden.name,
                "evaluators": names,
            },
            print_summary=False,
            timeout=timeout,
        )
    return _experiment_record(client, ran, title, variant=label, model=model, tools=tools)


def check_experiment(
    dataset_path: str | Path,
    variants: Sequence[str | AgentSpec],
    *,
    model: str,
    evaluators: Sequence[str] | None = None,
) -> GoldenDataset:
    """Check an experiment's inputs before any work with Phoenix; returns the golden dataset.

    The dataset folder is read, and each variant, the model and the evaluators are looked up,
    so that a bad input is named before anything is uploaded (or a server is waited for).

    Raises:
        PlangateError: naming the dataset file, variant, model or evaluator that is wrong.
    """
    golden = read_dataset(dataset_path)
    _evaluator_names(evaluators, sorted(registered()))
    for variant in variants:
        _check_options(golden, variant, model)
    return golden


def _evaluator_names(chosen: Sequence[str] | None, known: list[str]) -> list[str]:
    names = list(chosen or known)
    unknown = [n for n in names if n not in known]
    if unknown:
        raise EvaluatorError(f"unknown evaluator {unknown[0]!r}; choose from: {', '.join(known)}")
    return names


def _check_options(golden: GoldenDataset, variant: str | AgentSpec, model: str) -> None:
    """Fail before the experiment on an unknown variant or model (the error names the choices)."""
    if isinstance(variant, str):
        load_variant(variant)
    if model not in CASSETTE_MODELS:
        for domain in sorted({str(d) for d in golden.sessions["domain"].to_pylist() if d}):
            model_from_spec(model, domain=get_domain(domain))


def _phoenix_dataset(client: Client, dataset: PhoenixDataset | str) -> Dataset:
    if isinstance(dataset, PhoenixDataset):
        return client.datasets.get_dataset(
            dataset=dataset.id, version_id=dataset.version_id, timeout=60
        )
    try:
        return client.datasets.get_dataset(dataset=dataset, timeout=60)
    except ValueError as exc:
        raise PhoenixDatasetError(
            f"no Phoenix dataset {dataset!r} at {client_url(client)}: mirror the golden dataset "
            "first (`plangate phoenix dataset DATASET`)"
        ) from exc


def _check_examples(dataset: Dataset, golden: GoldenDataset) -> None:
    if not dataset.examples:
        raise PhoenixDatasetError(f"Phoenix dataset {dataset.name!r} has no examples")
    for example in dataset.examples:
        metadata = example.get("metadata") or {}
        if "session_id" not in metadata or "turn_index" not in metadata:
            raise PhoenixDatasetError(
                f"example {example['id']!r} of Phoenix dataset {dataset.name!r} has no "
                "session_id and turn_index metadata: is it a mirrored golden dataset?"
            )
        golden.turn(str(metadata["session_id"]), int(metadata["turn_index"]))


class _Replays:
    """The experiment's task and evaluators; the task keeps each run's scores by trace id."""

    def __init__(
        self,
        golden: GoldenDataset,
        rubrics: RubricSet,
        names: list[str],
        *,
        variant: str | AgentSpec,
        model: str,
        tools: ToolSource,
        endpoint: str,
    ) -> None:
        self.golden = golden
        self.rubrics = rubrics
        self.names = names
        self.variant = variant
        self.model = model
        self.tools: ToolSource = tools
        self.endpoint = endpoint
        stem = Path(variant).stem if isinstance(variant, str) else "agent"
        self.stem = stem
        self.namespace = namespace(golden.name, stem)
        self.scores: dict[str, dict[str, Any]] = {}

    def task(self) -> Callable[[Mapping[str, Any]], dict[str, Any]]:
        """The experiment task: replay the example's turn; its summary as JSON."""

        def task(metadata: Mapping[str, Any]) -> dict[str, Any]:
            from opentelemetry import trace

            context = trace.get_current_span().get_span_context()
            trace_id = format(context.trace_id, "032x")
            case = (str(metadata["session_id"]), int(metadata["turn_index"]))
            replay = (
                self._replay(*case)
                if isinstance(self.variant, str)
                else self._agent(*case, context)
            )
            result, table = run_coroutine(replay)
            scores = evaluate(table, self.rubrics, names=self.names)
            self.scores[trace_id] = {row[EVALUATOR]: row for row in scores.to_pylist()}
            return _replay_output(result)

        # Phoenix names the run's root span after the task: "Task: replay_<variant>".
        task.__name__ = task.__qualname__ = f"replay_{self.stem}"
        return task

    def evaluator(self, name: str) -> Callable[[str | None], dict[str, Any]]:
        """A Phoenix evaluator giving the plangate evaluator `name`'s result of a run."""

        def evaluate_run(trace_id: str | None) -> dict[str, Any]:
            row = self.scores.get(trace_id or "", {}).get(name)
            if row is None:
                raise ReplayMissingError(
                    f"no replay scores for run trace {trace_id!r}: the task failed for it"
                )
            result = {
                "label": row[LABEL],
                "explanation": shorten(row[EXPLANATION]),
                "metadata": {
                    "passed": row[PASSED],
                    "outcome": row[OUTCOME],
                    "evaluator_version": row[VERSION],
                },
            }
            if row[SCORE] is not None:
                result["score"] = row[SCORE]
            return result

        return evaluate_run

    async def _replay(self, session_id: str, turn_index: int) -> tuple[ReplayResult, pa.Table]:
        assert isinstance(self.variant, str)
        provider, memory = _replay_provider(self.endpoint, self.namespace)
        try:
            result = await replay_turn(
                self.golden,
                session_id,
                turn_index,
                agent=ReferenceAgent(self.variant, tracer_provider=provider),
                model=self.model,
                tools=self.tools,
            )
        finally:
            provider.shutdown()  # flushes this run's spans to Phoenix
        return result, memory.table()

    async def _agent(
        self, session_id: str, turn_index: int, under: SpanContext
    ) -> tuple[ReplayResult, pa.Table]:
        """A team's agent's replay (a driver of its own: each task has its own event loop)."""
        assert isinstance(self.variant, AgentSpec)
        async with AgentDriver(self.variant) as driver:
            result = await replay_turn(
                self.golden, session_id, turn_index, agent=driver, model=self.model,
                tools=self.tools,
            )  # fmt: skip
        assert result.table is not None
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        exporter = NamespacedSessions(OTLPSpanExporter(endpoint=self.endpoint), self.namespace)
        try:
            exporter.export(spans_from_table(result.table, under=under))
        finally:
            exporter.shutdown()
        return result, result.table


def _replay_provider(endpoint: str, prefix: str) -> tuple[TracerProvider, Any]:
    """A tracer provider keeping spans as a trace table and exporting them to Phoenix."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    memory = TraceTableExporter()
    provider = TracerProvider(span_limits=SpanLimits(max_span_attributes=10_000))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    exporter = NamespacedSessions(OTLPSpanExporter(endpoint=endpoint), prefix)
    provider.add_span_processor(BatchSpanProcessor(exporter))
    return provider, memory


class NamespacedSessions(SpanExporter):
    """Exports copies of spans whose `session.id` is namespaced (Phoenix session ids are global).

    Args:
        exporter: Where the copies go.
        prefix: The namespace (`names.namespace`); the span's own session id is kept in
            `plangate.session_id`.
    """

    def __init__(self, exporter: SpanExporter, prefix: str) -> None:
        self._exporter = exporter
        self._prefix = prefix

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        """Export renamed copies of the spans."""
        return self._exporter.export([self._renamed(span) for span in spans])

    def shutdown(self) -> None:
        """Shut the wrapped exporter down."""
        self._exporter.shutdown()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        """Flush the wrapped exporter."""
        return self._exporter.force_flush(timeout_millis)

    def _renamed(self, span: ReadableSpan) -> ReadableSpan:
        return namespaced_span(span, self._prefix, span.resource)


def run_coroutine(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to completion from synchronous code.

    Inside a running event loop it runs in a worker thread, with the caller's context (so the
    current span stays the parent of the coroutine's spans).
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    context = contextvars.copy_context()
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(context.run, asyncio.run, coroutine).result()


def _replay_output(result: ReplayResult) -> dict[str, Any]:
    summary = result.to_dict()
    summary["answer"] = result.answer
    summary["steps"] = result.replayed
    return summary


def _experiment_record(
    client: Client, ran: Any, title: str, *, variant: str, model: str, tools: str
) -> PhoenixExperiment:
    runs = list(ran["task_runs"])
    results: dict[str, list[tuple[float | None, bool]]] = {}
    for evaluation in ran["evaluation_runs"]:
        result = evaluation.result if isinstance(evaluation.result, Mapping) else {}
        # `passed` is in the result's metadata as run, in the run's metadata when read back
        metadata = {**(evaluation.metadata or {}), **(result.get("metadata") or {})}
        outcome = (result.get("score"), metadata.get("passed") is True)
        results.setdefault(evaluation.name, []).append(outcome)
    scores: dict[str, float | None] = {}
    passed: dict[str, int] = {}
    for evaluator, found in sorted(results.items()):
        values = [score for score, _ in found if score is not None]
        scores[evaluator] = sum(values) / len(values) if values else None
        passed[evaluator] = sum(ok for _, ok in found)
    return PhoenixExperiment(
        id=ran["experiment_id"],
        name=title,
        variant=variant,
        model=model,
        tools=tools,
        dataset_id=ran["dataset_id"],
        dataset_version_id=ran["dataset_version_id"],
        runs=len(runs),
        failed_runs=sum(1 for run in runs if run.get("error")),
        scores=scores,
        passed=passed,
        url=compare_url(client_url(client), ran["dataset_id"], [ran["experiment_id"]]),
        project=ran.get("project_name"),
    )
