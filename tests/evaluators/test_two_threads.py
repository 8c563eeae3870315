"""On a large table, `prepare` and `evaluate` use a second thread: the same scores, the same errors.

The tables here are small: `BESIDE_ROWS` is set to 0 so that every table takes the threaded
path, and `OMP_NUM_THREADS` to 1 for the path of one thread, compared with it.
"""

from __future__ import annotations

import os
import pickle
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any
from unittest import mock

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings

from plangate.evaluators import EvaluatorError, RubricSet, _registry, _threads, evaluate, prepare
from plangate.evaluators._frame import TraceFrame
from tests.bench.bench_evaluators import synthetic_table
from tests.evaluators.tables import trace_tables

TABLE, _ = synthetic_table(turns=40)
"""Turns that loop, alternate and plan, with every evaluator's evidence."""
SETTINGS = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@contextmanager
def large() -> Iterator[None]:
    """Every table large, and two threads allowed."""
    with mock.patch.object(_threads, "BESIDE_ROWS", 0), mock.patch.dict(os.environ):
        os.environ.pop("OMP_NUM_THREADS", None)
        yield


@pytest.fixture
def every_table_large() -> Iterator[None]:
    with large():
        yield


def one_thread(table: pa.Table, **kwargs: Any) -> pa.Table:
    with mock.patch.dict(os.environ, {"OMP_NUM_THREADS": "1"}):
        return evaluate(table, **kwargs)


@contextmanager
def wrapped(**wrappers: Callable[..., Any]) -> Iterator[None]:
    """The named evaluators' functions replaced by wrappers given the original."""
    registry = dict(_registry._EVALUATORS)
    for name, wrapper in wrappers.items():
        spec = registry[name]

        def function(frame: TraceFrame, rubrics: RubricSet, _f=spec.function, _w=wrapper, **p: Any):
            return _w(_f, frame, rubrics, **p)

        registry[name] = replace(spec, function=function)
    with mock.patch.object(_registry, "_EVALUATORS", registry):
        yield


def test_the_switch_follows_the_size_and_omp_num_threads(every_table_large: None) -> None:
    assert _threads.two_threads(1)
    cases = {"1": False, "0": False, " 1": False, "1,4": False, "2": True, "8,1": True, "x": True}
    for allowed, two in cases.items():
        with mock.patch.dict(os.environ, {"OMP_NUM_THREADS": allowed}):
            assert _threads.two_threads(1) is two, allowed
    with mock.patch.object(_threads, "BESIDE_ROWS", 20_000):
        assert not _threads.two_threads(19_999) and _threads.two_threads(20_000)


@SETTINGS
@given(trace_tables(max_sessions=4, max_turns=4))
def test_every_evaluator_gives_the_same_scores_on_two_threads(table: pa.Table) -> None:
    with large():
        threaded = evaluate(table)
    assert threaded.to_pylist() == one_thread(table).to_pylist()


def test_the_first_error_in_the_evaluators_order_is_raised(every_table_large: None) -> None:
    assert evaluate(TABLE).to_pylist() == one_thread(TABLE).to_pylist()

    def slowly(function: Callable[..., Any], *args: Any, **params: Any) -> Any:
        time.sleep(0.2)  # the later evaluator fails first
        return function(*args, **params)

    names = ["tool_call_loops", "latency", "trajectory_match"]
    params = {"tool_call_loops": {"max_repeats": -1}, "trajectory_match": {"ignore_tools": 3}}
    with wrapped(tool_call_loops=slowly), pytest.raises(EvaluatorError) as raised:
        evaluate(TABLE, names=names, params=params)
    assert "'max_repeats'" in str(raised.value)


def test_a_model_is_asked_in_the_calling_thread_and_only_after_the_others_succeed(
    every_table_large: None,
) -> None:
    ran: dict[str, threading.Thread] = {}

    def recorded(function: Callable[..., Any], frame: TraceFrame, *args: Any, **p: Any) -> Any:
        ran[function.__name__] = threading.current_thread()
        return function(frame, *args, **p)

    with wrapped(judge=recorded, tool_call_loops=recorded, latency=recorded):
        evaluate(TABLE, names=["tool_call_loops", "judge", "latency"])
        assert ran["judge"] is threading.main_thread()
        assert ran["tool_call_loops"].daemon and ran["latency"].daemon  # no wait at exit
        ran.clear()
        with pytest.raises(EvaluatorError, match="max_repeats"):
            evaluate(
                TABLE,
                names=["tool_call_loops", "judge"],
                params={"tool_call_loops": {"max_repeats": -1}},
            )
    assert "judge" not in ran


def test_what_evaluators_share_is_computed_once_when_they_ask_at_once() -> None:
    frame = prepare(TABLE)
    calls: list[int] = []

    def slow() -> list[int]:
        calls.append(1)
        time.sleep(0.05)  # long enough for the other threads to ask meanwhile
        return calls

    got: list[object] = []
    threads = [threading.Thread(target=lambda: got.append(frame.kept("k", slow))) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert calls == [1] and len(got) == 4 and all(g is calls for g in got)


def test_a_frame_still_pickles_and_a_value_that_asks_for_itself_still_fails() -> None:
    frame = prepare(TABLE)
    frame.codes("tool_name")
    copy = pickle.loads(pickle.dumps(frame))
    assert copy.codes("tool_name")[0].tolist() == frame.codes("tool_name")[0].tolist()
    assert copy.kept("new", lambda: 1) == 1

    def again() -> object:
        return copy.kept("loop", again)

    with pytest.raises(RecursionError):
        again()
