"""The guards alone: pure functions from the turn's counts and the variant's settings to a decision.

The loop's tests show each guard at work in a turn; these pin down each decision at its edges.
"""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from plangate.harness import PlanItem, load_variant
from plangate.harness._guards import (
    ACCEPT,
    CONTINUATION,
    FORCED_FINISH,
    TEXT_REMINDER,
    Accept,
    Bounce,
    ForceFinish,
    Prompt,
    Repetition,
    finish_gate,
    iteration_guard,
    loop_guard,
    text_guard,
    written_tool_call,
)
from plangate.harness._turn import Stop
from plangate.harness._variant import GuardSettings, TurnSettings

TURN = TurnSettings(max_iterations=10, iteration_warning=3)
GUARDS = GuardSettings(loop_warn_after=3, loop_stop_after=5)


@pytest.mark.parametrize(
    ("made", "decision"),
    [
        (0, None),
        (6, None),
        (7, Prompt(kind="iteration_warning", text="Only 3 model calls remain")),
        (8, None),
        (9, ForceFinish(text=FORCED_FINISH)),
        (10, Stop(reason="max_iterations", detail="10 model calls")),
    ],
)
def test_the_iteration_guard_warns_forces_and_stops(made: int, decision: object) -> None:
    found = iteration_guard(made, TURN)
    if isinstance(decision, Prompt):
        assert isinstance(found, Prompt) and found.kind == decision.kind
        assert found.text.startswith(decision.text)
    else:
        assert found == decision


def test_no_forced_finish_when_text_ends_the_turn_or_it_is_off() -> None:
    assert iteration_guard(9, dataclasses.replace(TURN, ending="text")) is None
    assert iteration_guard(9, dataclasses.replace(TURN, forced_finish=False)) is None


@pytest.mark.parametrize(
    ("keys", "expected"),
    [
        (["a"], None),
        (["a", "a"], None),
        (["a", "a", "a"], Repetition(detail="3 identical calls in a row: a", stop=False)),
        (["b", "a", "a", "a", "a"], Repetition(detail="4 identical calls in a row: a", stop=False)),
        (["a"] * 5, Repetition(detail="5 identical calls in a row: a", stop=True)),
        (["a"] * 9, Repetition(detail="5 identical calls in a row: a", stop=True)),
        (["a", "a", "b"], None),
    ],
)
def test_the_loop_guard_counts_the_trailing_run(keys: list[str], expected: object) -> None:
    found = loop_guard(keys, GUARDS)
    if expected is None:
        assert found is None
    else:
        assert isinstance(found, Repetition) and isinstance(expected, Repetition)
        assert (found.detail, found.stop) == (expected.detail, expected.stop)
        assert bool(found.warning) == (not found.stop)


def test_the_loop_guard_off_sees_nothing() -> None:
    assert loop_guard(["a"] * 9, dataclasses.replace(GUARDS, loop_guard=False)) is None


@given(st.lists(st.sampled_from("ab"), min_size=1, max_size=12))
def test_the_loop_guard_stops_exactly_at_its_limit(keys: list[str]) -> None:
    run = next((i for i, k in enumerate(reversed(keys)) if k != keys[-1]), len(keys))
    found = loop_guard(keys, GUARDS)
    assert (found is not None and found.stop) == (run >= GUARDS.loop_stop_after)
    assert (found is None) == (run < GUARDS.loop_warn_after)


def test_text_guard() -> None:
    alyx, naive = load_variant("alyx"), load_variant("naive")
    nudged = text_guard("I will call add(1, 2) now", ["add"], alyx, plan_open=False)
    assert isinstance(nudged, Prompt) and nudged.kind == "nudge" and "'add'" in nudged.text
    assert text_guard("", [], alyx, plan_open=False) == Prompt(
        kind="continuation", text=CONTINUATION
    )
    assert text_guard("done", [], alyx, plan_open=False) == Prompt(
        kind="continuation", text=TEXT_REMINDER
    )
    assert text_guard("done", [], naive, plan_open=True) == Stop(reason="finished")
    texting = dataclasses.replace(
        alyx, turn=dataclasses.replace(alyx.turn, ending="text", forced_finish=False)
    )
    assert text_guard("", [], texting, plan_open=True) == Prompt(
        kind="continuation", text=CONTINUATION
    )
    assert text_guard("", [], texting, plan_open=False) == Stop(reason="finished")


def test_written_tool_calls_are_found_by_name_or_json() -> None:
    assert written_tool_call('{"name": "finish", "arguments": {}}', ["add", "finish"]) == "finish"
    assert written_tool_call("then addition", ["add"]) is None
    assert written_tool_call("", ["add"]) is None


OPEN = (PlanItem(id="1", text="Sort the spans", status="in_progress"),)


def test_the_finish_gate_bounces_then_gives_up() -> None:
    bounce = finish_gate(OPEN, bounces=0, settings=TURN)
    assert isinstance(bounce, Bounce)
    assert bounce.items == "[~] 1. Sort the spans (in_progress)"
    assert bounce.text.startswith("Cannot finish: 1 plan item is not completed:")
    assert finish_gate(OPEN, bounces=2, settings=TURN) == bounce
    assert finish_gate(OPEN, bounces=3, settings=TURN) == Accept(
        exhausted="finish accepted after 3 bounces"
    )


def test_the_finish_gate_accepts_a_closed_plan_or_when_off() -> None:
    assert finish_gate((), bounces=0, settings=TURN) is ACCEPT
    assert finish_gate(OPEN, bounces=0, settings=dataclasses.replace(TURN, finish_gate=False)) == (
        ACCEPT
    )
