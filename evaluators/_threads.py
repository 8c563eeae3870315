"""The second core: work on a large table split over two threads.

NumPy and Arrow let go of Python's lock while they work on whole columns, so two threads
scoring one table take about two thirds of the time one takes (`make bench`). The threads are
daemons started for the call: nothing waits for them when the program ends (after Ctrl-C, say),
and a forked process (a Ray worker) inherits no pool.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import TypeVar

T = TypeVar("T")

BESIDE_ROWS = 20_000
"""Rows from which `prepare` and `evaluate` use a second thread: below, starting it costs more
than it saves."""


def two_threads(rows: int) -> bool:
    """Whether work on `rows` spans may take a second thread.

    It may on a large table, where the process may use two threads: `OMP_NUM_THREADS` unset or
    above 1 (Ray sets it to 1 in a one-CPU task; BLAS and OpenMP read it too, its first number
    where it gives one per nesting level).
    """
    try:
        allowed = int(os.environ.get("OMP_NUM_THREADS", "2").split(",")[0])
    except ValueError:
        allowed = 2
    return rows >= BESIDE_ROWS and allowed >= 2


def started(tasks: Sequence[Callable[[], T]]) -> list[Future[T]]:
    """Each task's future, the tasks run in order on two daemon threads (one for one task).

    A future cancelled before its task starts (`cancel`) is skipped.
    """
    futures: list[Future[T]] = [Future() for _ in tasks]
    jobs = iter(zip(tasks, futures, strict=True))
    taking = threading.Lock()

    def work() -> None:
        while True:
            with taking:
                job = next(jobs, None)
            if job is None:
                return
            task, future = job
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(task())
                except BaseException as error:  # the caller's to raise, in its thread
                    future.set_exception(error)
            del job, task, future  # nothing of a finished task kept while the thread waits

    for _ in range(min(2, len(tasks))):
        threading.Thread(target=work, name="plangate-evaluate", daemon=True).start()
    return futures
