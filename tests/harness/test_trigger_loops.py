"""The planning trigger (task clauses of a request) and the loop detector (runs of calls)."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from plangate.harness import canonical_json
from plangate.harness._call_runs import CallRun, call_key, identical_runs, trailing_run
from plangate.harness._trigger import needs_plan, split_tasks

# --- split_tasks / needs_plan --------------------------------------------------------------


@pytest.mark.parametrize(
    ("request_text", "tasks"),
    [
        # Three tasks, whatever joins them.
        (
            "Find the slow endpoints, group them by service and write a report.",
            ["Find the slow endpoints", "Group them by service", "Write a report"],
        ),
        (
            "Check the error rate; restart the collector. Then notify the on-call team!",
            ["Check the error rate", "Restart the collector", "Notify the on-call team"],
        ),
        (
            "List the open tickets\nprioritize them\nassign the top three",
            ["List the open tickets", "Prioritize them", "Assign the top three"],
        ),
        # Fillers before the verb are dropped.
        (
            "Please find the failing traces, then summarize them, and finally email the team.",
            ["Find the failing traces", "Summarize them", "Email the team"],
        ),
        (
            "First check the logs and then also restart the service. Lastly verify the fix.",
            ["Check the logs", "Restart the service", "Verify the fix"],
        ),
        ("Next, to refund the order.", ["Refund the order"]),
        # A noun that looks like a verb does not start a task.
        ("Write a report", ["Write a report"]),
        ("Write a report about the report queue.", ["Write a report about the report queue"]),
        # A clause without a verb stays with the task before it, joiner text and all.
        (
            "Compare the services by latency and cost, then write a report",
            ["Compare the services by latency and cost", "Write a report"],
        ),
        (
            "Check the logs, errors only, and restart the service",
            ["Check the logs, errors only", "Restart the service"],
        ),
        (
            "Find the errors in the logs: timeouts and 500s",
            ["Find the errors in the logs: timeouts and 500s"],
        ),
        ("Group the spans by service then by route", ["Group the spans by service then by route"]),
        # Questions and chatter: no task.
        ("What is the p95 latency of checkout?", []),
        ("Thanks, that looks great!", []),
        ("", []),
        ("  ,, and then ;  ", []),
        # Only clause-leading verbs count, in any case.
        (
            "REVIEW the alerts AND close the stale ones",
            ["REVIEW the alerts", "Close the stale ones"],
        ),
    ],
)
def test_split_tasks(request_text: str, tasks: list[str]) -> None:
    assert split_tasks(request_text) == tasks
    assert needs_plan(request_text) is (len(tasks) >= 2)


@pytest.mark.parametrize(
    ("request_text", "tasks"),
    [
        (
            "Find the slow traces. Finally, email the team.",
            ["Find the slow traces", "Email the team"],
        ),
        ("Check the logs. Also, restart the service", ["Check the logs", "Restart the service"]),
        (
            "Please, restart the collector and check the logs",
            ["Restart the collector", "Check the logs"],
        ),
    ],
)
def test_split_tasks_drops_a_filler_set_off_by_a_comma(request_text: str, tasks: list[str]) -> None:
    # "Finally," is a filler of the next task, not words of the previous one.
    assert split_tasks(request_text) == tasks


def test_split_tasks_keeps_a_decimal_number_whole() -> None:
    # A "." inside a number (or host name) is not a sentence end: the text must come back as given.
    assert split_tasks("Set the alert threshold to 0.5 and restart the collector") == [
        "Set the alert threshold to 0.5",
        "Restart the collector",
    ]


@pytest.mark.parametrize(
    ("request_text", "expected"),
    [
        ("Restart the collector and check the logs", True),
        ("Restart the collector", False),
        ("Why is checkout slow?", False),
        ("Write a report and send it to the team", True),
        ("Please write a report", False),
    ],
)
def test_needs_plan(request_text: str, expected: bool) -> None:
    assert needs_plan(request_text) is expected


# --- call_key ------------------------------------------------------------------------------


def test_call_key_is_name_plus_canonical_arguments() -> None:
    first = call_key("search", canonical_json({"q": "x", "limit": 3}))
    second = call_key("search", canonical_json({"limit": 3, "q": "x"}))
    assert first == second == 'search {"limit":3,"q":"x"}'
    assert call_key("search", "{}") != call_key("fetch", "{}")


# --- identical_runs / trailing_run on hand-made sequences ----------------------------------


def run(key: str, start: int, length: int) -> CallRun:
    return CallRun(key=key, start=start, length=length)


@pytest.mark.parametrize(
    ("keys", "min_length", "runs"),
    [
        ([], 2, []),
        (["a"], 2, []),
        (["a"], 1, [run("a", 0, 1)]),
        (["a", "b", "c"], 2, []),
        (["a", "a"], 2, [run("a", 0, 2)]),
        (["a", "a", "a", "b", "b", "a"], 2, [run("a", 0, 3), run("b", 3, 2)]),
        (["a", "a", "a", "b", "b", "a"], 3, [run("a", 0, 3)]),
        (["x", "a", "b", "a", "b", "c", "c"], 2, [run("c", 5, 2)]),
        (list("aabbbaaaa"), 2, [run("a", 0, 2), run("b", 2, 3), run("a", 5, 4)]),
        (list("aabbbaaaa"), 4, [run("a", 5, 4)]),
        (list("ab"), 1, [run("a", 0, 1), run("b", 1, 1)]),
    ],
)
def test_identical_runs(keys: list[str], min_length: int, runs: list[CallRun]) -> None:
    assert identical_runs(keys, min_length) == runs


def test_identical_runs_defaults_to_pairs() -> None:
    assert identical_runs(["a", "a", "b"]) == [run("a", 0, 2)]


@pytest.mark.parametrize(
    ("keys", "length"),
    [
        ([], 0),
        (["a"], 1),
        (["a", "b"], 1),
        (["b", "a", "a"], 2),
        (["a", "a", "a"], 3),
        (["a", "a", "b", "a", "a", "a"], 3),
    ],
)
def test_trailing_run(keys: list[str], length: int) -> None:
    assert trailing_run(keys) == length


# --- invariants ----------------------------------------------------------------------------

KEYS = st.lists(st.sampled_from(["a", "b", "c"]), max_size=30)


def maximal_runs(keys: list[str]) -> list[CallRun]:
    """Every maximal run, computed independently with `itertools.groupby`."""
    runs, start = [], 0
    for key, group in itertools.groupby(keys):
        length = len(list(group))
        runs.append(run(key, start, length))
        start += length
    return runs


@settings(deadline=None)
@given(keys=KEYS, min_length=st.integers(1, 6))
def test_identical_runs_invariants(keys: list[str], min_length: int) -> None:
    runs = identical_runs(keys, min_length)
    ends = [r.start + r.length for r in runs]
    # In order and not overlapping.
    assert all(end <= later.start for end, later in zip(ends, runs[1:], strict=False))
    assert sum(r.length for r in runs) <= len(keys)
    for r in runs:
        assert r.length >= min_length
        assert keys[r.start : r.start + r.length] == [r.key] * r.length
    # Every maximal run that is long enough is reported, and nothing else.
    assert runs == [r for r in maximal_runs(keys) if r.length >= min_length]


@settings(deadline=None)
@given(keys=KEYS)
def test_runs_of_length_one_partition_the_sequence(keys: list[str]) -> None:
    runs = identical_runs(keys, 1)
    assert sum(r.length for r in runs) == len(keys)
    assert [r.key for r in runs for _ in range(r.length)] == keys


@settings(deadline=None)
@given(keys=KEYS)
def test_trailing_run_is_the_last_maximal_run(keys: list[str]) -> None:
    runs = maximal_runs(keys)
    assert trailing_run(keys) == (runs[-1].length if runs else 0)
    assert trailing_run(keys) == (identical_runs(keys, 1)[-1].length if keys else 0)
