"""Golden turns' rubrics: from a dataset, a dataset folder or a rubric file; and their checks.

Library code shared by the gate, the Phoenix experiments and `plangate eval`.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq

from plangate.evaluators import RubricError, RubricSet, load_rubrics, rubric_from_dict
from plangate.replay import GoldenDataset, TraceTableError, read_dataset, validate_dataset
from plangate.replay.schema import SESSION_ID, TURN_INDEX


def turn_rubrics(dataset: GoldenDataset, path: str) -> RubricSet:
    """The per-turn rubrics of a golden dataset already read (`path` names it in errors)."""
    turns = {
        (row[SESSION_ID], row[TURN_INDEX]): rubric_from_dict(
            json.loads(row["rubric"]),
            f"{path}/turns.parquet: session {row[SESSION_ID]!r}, turn {row[TURN_INDEX]}",
        )
        for row in dataset.turns.to_pylist()
        if row["rubric"] is not None
    }
    return RubricSet(turns=turns)


def dataset_rubrics(path: str) -> RubricSet:
    """The per-turn rubrics of a golden dataset folder (its turns' `rubric` column)."""
    return turn_rubrics(read_dataset(path), path)


def rubrics_at(path: str) -> RubricSet:
    """The rubrics a path gives: a rubric file (JSON or TOML), or a golden dataset folder.

    Raises:
        TraceTableError: A folder that is not a golden dataset.
    """
    if Path(path).is_dir():
        if (Path(path) / "manifest.json").is_file():
            return dataset_rubrics(path)
        raise TraceTableError(
            f"{path}: is a folder without manifest.json; --rubric takes a rubric file (JSON or "
            "TOML) or a golden dataset folder"
        )
    return load_rubrics(path)


def dataset_problems(path: str) -> list[str]:
    """What `validate_dataset` finds, plus each turn's rubric parsed by the evaluators."""
    problems = validate_dataset(path)
    if problems:
        return problems
    turns = pq.read_table(Path(path) / "turns.parquet").to_pylist()
    for row, turn in enumerate(turns):
        if turn["rubric"] is None:
            continue
        where = f"{Path(path) / 'turns.parquet'}: column 'rubric', row {row}"
        try:
            rubric_from_dict(json.loads(turn["rubric"]), where)
        except RubricError as exc:
            problems.append(str(exc))
    return problems
