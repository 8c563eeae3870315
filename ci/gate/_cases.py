"""Which golden turns a gate compares (its cases), and their rubrics, from its datasets.

A case is (dataset folder name, session, turn): every selected turn of every dataset, each once.
What a selection names must be in its dataset, and a per-case minimum must name a case.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from plangate.ci._rubrics import turn_rubrics
from plangate.ci.gate._gate_file import GateFile, GateFileError
from plangate.ci.gate._scores import Case
from plangate.evaluators import RubricSet
from plangate.replay import read_dataset
from plangate.replay.schema import SESSION_ID, TURN_INDEX


def gate_rubrics(gate: GateFile, datasets: dict[str, Any]) -> RubricSet:
    """The rubrics of every golden turn in the gate's datasets (read once, by the caller)."""
    return RubricSet(
        turns={
            key: rubric
            for s in gate.datasets
            for key, rubric in turn_rubrics(datasets[s.path.name], str(s.path)).turns.items()
        }
    )


def gate_cases(gate: GateFile, datasets: dict[str, Any] | None = None) -> list[Case]:
    """The golden turns the gate compares, in dataset order; (session, turn) must be unique."""
    if datasets is None:
        datasets = {s.path.name: read_dataset(s.path) for s in gate.datasets}
    cases: list[Case] = []
    seen: dict[tuple[str, int], str] = {}
    for index, selection in enumerate(gate.datasets):
        dataset = datasets[selection.path.name]
        _check_selection(gate, index, selection, dataset.turns)
        for row in dataset.turns.to_pylist():
            if selection.sessions and row[SESSION_ID] not in selection.sessions:
                continue
            if selection.turns and row[TURN_INDEX] not in selection.turns:
                continue
            key = (row[SESSION_ID], row[TURN_INDEX])
            if key in seen:
                raise GateFileError(
                    f"{gate.path}: session {key[0]!r} turn {key[1]} is in both {seen[key]} and "
                    f"{selection.path.name}; a gate needs every case once: select one of them"
                )
            seen[key] = selection.path.name
            cases.append((selection.path.name, *key))
    if not cases:
        raise GateFileError(
            f"{gate.path}: the dataset selections hold no turns; check [[datasets]] sessions "
            "and turns against `plangate dataset validate`"
        )
    _check_case_keys(gate, cases)
    return cases


def _check_selection(gate: GateFile, index: int, selection: Any, turns: Any) -> None:
    """Refuse sessions and turns a selection names that its dataset does not have."""
    rows = turns.select([SESSION_ID, TURN_INDEX]).to_pylist()
    known = sorted({row[SESSION_ID] for row in rows})
    listed = ", ".join(known[:5]) + (f", … ({len(known)})" if len(known) > 5 else "")
    chosen = {row[TURN_INDEX] for row in rows if row[SESSION_ID] in (selection.sessions or known)}
    for missing in (s for s in selection.sessions if s not in known):
        raise GateFileError(
            f"{gate.path}: datasets[{index}].sessions names {missing!r}, which is not a session "
            f"of {selection.path} (its sessions: {listed})"
        )
    for missing in (t for t in selection.turns if t not in chosen):
        raise GateFileError(
            f"{gate.path}: datasets[{index}].turns names {missing}, which no selected session of "
            f"{selection.path} has"
        )


def _check_case_keys(gate: GateFile, cases: Sequence[Case]) -> None:
    """Per-case minimums must name cases the gate has."""
    known = {c[1] for c in cases} | {f"{c[1]}:{c[2]}" for c in cases}
    for name, rule in gate.evaluators.items():
        for key in rule.cases:
            if key not in known:
                raise GateFileError(
                    f"{gate.path}: evaluators.{name}.cases names {key!r}, which is not a case of "
                    "the selected datasets (use SESSION or SESSION:TURN of a selected turn)"
                )
