"""On a large table, `prepare` and `evaluate` use a second thread: the same scores, the same errors.

The tables here are small: `BESIDE_ROWS` is set to 0 so that every table takes the threaded
path, and `OMP_NUM_THREADS=1` to 1 for the path of one thread, compared with it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from unittest import mock

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings

from plangate.evaluators import EvaluatorError, RubricSet, _frame, _registry, evaluate, prepare
from plangate.evaluators._frame import TraceFrame
from tests.bench.bench_evaluators import synthetic_table
from tests.evaluators.tables import trace_tables

TABLE, _ = synthetic_table(turns=40)
"""Turns that loop, alternate and plan, with every evaluator's evidence."""
SETTINGS = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.fixture
def every_table_large() -> Iterator[None]:
    with mock.patch.object(_frame, "BESIDE_ROWS", 0), mock.patch.dict("os.environ"):
        _frame.os.environ.pop("OMP_NUM_THREADS", None)
        yield


def one_thread(table: pa.Table, **kwargs: object) -> pa.Table:
    with mock.patch.dict("os.environ", {"OMP_NUM_THREADS": "1"}):
        return evaluate(table, **kwargs)  # type: ignore[arg-type]


def test_the_switch_follows_the_size_and_omp_num_threads(every_table_large: None) -> None:
    assert _frame.two_threads(1)
    for allowed, two in (("1", False), ("0", False), ("2", True), ("8", True), ("x", True)):
        with mock.patch.dict("os.environ", {"OMP_NUM_THREADS": allowed}):
            assert _frame.two_threads(1) is two, allowed
    with mock.patch.object(_frame, "BESIDE_ROWS", 20_000):
        assert not _frame.two_threads(19_999) and _frame.two_threads(20_000)


@SETTINGS
@given(trace_tables(max_sessions=4, max_turns=4))
def test_every_evaluator_gives_the_same_scores_on_two_threads(table: pa.Table) -> None:
    with mock.patch.object(_frame, "BESIDE_ROWS", 0), mock.patch.dict("os.environ"):
        _frame.os.environ.pop("OMP_NUM_THREADS", None)
        threaded = evaluate(table)
    assert threaded.to_pylist() == one_thread(table).to_pylist()


def test_the_first_error_in_the_evaluators_order_is_raised(every_table_large: None) -> None:
    table = TABLE
    assert one_thread(TABLE).to_pylist() == evaluate(TABLE).to_pylist()
    names = ["tool_call_loops", "latency", "trajectory_match"]
    params = {"tool_call_loops": {"max_repeats": -1}, "trajectory_match": {"ignore_tools": 3}}
    with pytest.raises(EvaluatorError) as raised:
        evaluate(table, names=names, params=params)
    with pytest.raises(EvaluatorError) as alone:
        one_thread(table, names=names, params=params)
    assert "'max_repeats'" in str(raised.value)
    assert str(raised.value) == str(alone.value)


def test_an_evaluator_that_asks_a_model_runs_in_the_calling_thread(
    every_table_large: None,
) -> None:
    ran: dict[str, threading.Thread] = {}
    registry = dict(_registry._EVALUATORS)
    for name in ("judge", "tool_call_loops"):
        spec = registry[name]

        def recorded(frame: TraceFrame, rubrics: RubricSet, _spec=spec, **params: object) -> object:
            ran[_spec.name] = threading.current_thread()
            return _spec.function(frame, rubrics, **params)

        registry[name] = replace(spec, function=recorded)
    with mock.patch.object(_registry, "_EVALUATORS", registry):
        evaluate(TABLE, names=["tool_call_loops", "judge"])
    assert ran["judge"] is threading.main_thread()
    assert ran["tool_call_loops"] is not threading.main_thread()


def test_what_evaluators_share_is_computed_once_when_they_ask_at_once() -> None:
    frame = prepare(TABLE)
    calls: list[int] = []

    def slow() -> list[int]:
        calls.append(1)
        time.sleep(0.05)  # long enough for the other thread to ask meanwhile
        return calls

    got: list[object] = []
    threads = [threading.Thread(target=lambda: got.append(frame.kept("k", slow))) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert calls == [1] and all(g is calls for g in got)
