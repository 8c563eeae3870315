"""Importers for tau-bench and tau2-bench results.

Both judge a whole conversation with one reward, so each record (tau-bench) or simulation (tau2)
is one turn, built by `rows_from_messages`. Nothing the files lack is filled in: tau-bench has no
timestamps, no token counts and no model name, and those stay null.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa

from plangate.replay.importers._messages import rows_from_messages
from plangate.replay.importers._reading import Row, load_json, located, optional, require
from plangate.replay.importers._registry import importer
from plangate.replay.schema import TraceTableError, build_table

SOURCE_TAU_BENCH = "tau-bench"
SOURCE_TAU2 = "tau2"

_NUMBER = (int, float)
_TAU_BENCH_EXPECTED = "a JSON list of tau-bench records {task_id, trial, reward, info, traj}"
_TAU2_EXPECTED = "a tau2 Results object {timestamp, info, tasks, simulations: [...]}"


@importer(SOURCE_TAU_BENCH)
def import_tau_bench(path: Path) -> pa.Table:
    """Read tau-bench results (`historical_trajectories/*.json`): one turn per record.

    The session is `tau-bench/<task_id>/<trial>`; the AGENT row has the record's reward, task
    and trial, and the gold tool calls (`info.task.actions`) under `gold_actions` in its
    attributes.

    Args:
        path: The JSON file.

    Returns:
        The trace table.

    Raises:
        TraceTableError: The file is not JSON, not a list, or a record lacks a field; the
            message names the file, the record index and the field.
    """
    data = load_json(path, _TAU_BENCH_EXPECTED)
    if not isinstance(data, list):
        raise TraceTableError(
            f"{path}: the top level is {type(data).__name__}; expected {_TAU_BENCH_EXPECTED}"
        )
    rows: list[Row] = []
    for index, record in enumerate(data):
        with located(f"{path}: record {index}"):
            rows.extend(_tau_bench_rows(record))
    return build_table(rows)


def _tau_bench_rows(record: Any) -> list[Row]:
    task_id = require(record, "task_id", (int, str), "the task's id (an integer or text)")
    trial = require(record, "trial", int, "the trial number (an integer)")
    reward = require(record, "reward", _NUMBER, "the task's reward (a number)")
    traj = require(record, "traj", list, "the conversation (a list of messages)")
    info = optional(record, "info", dict) or {}
    task = info.get("task")
    gold = task.get("actions") if isinstance(task, Mapping) else None
    model = info.get("model")
    with located("traj"):
        return rows_from_messages(
            traj,
            session_id=f"{SOURCE_TAU_BENCH}/{task_id}/{trial}",
            turn_index=0,
            source=SOURCE_TAU_BENCH,
            task_id=str(task_id),
            trial=trial,
            reward=float(reward),
            model_name=model if isinstance(model, str) else None,
            attributes=None if gold is None else {"gold_actions": gold},
        )


@importer(SOURCE_TAU2)
def import_tau2(path: Path) -> pa.Table:
    """Read a tau2-bench Results file: one turn per simulation.

    The session is `tau2/<simulation id>`; the AGENT row has the task id, trial, reward
    (`reward_info.reward`), stop reason (`termination_reason`) and the simulation's start and
    end; messages keep their timestamps (naive times are UTC), assistant messages their token
    usage (the user simulator's usage is not the agent's and is left out). The model is
    `info.agent_info.llm`. Attributes: `gold_actions` (the task's
    `evaluation_criteria.actions`) and `agent_cost` where the file has them.

    Args:
        path: The JSON file.

    Returns:
        The trace table.

    Raises:
        TraceTableError: The file is not JSON, not a Results object, or a simulation lacks a
            field; the message names the file, the simulation index and the field.
    """
    data = load_json(path, _TAU2_EXPECTED)
    if not isinstance(data, Mapping):
        raise TraceTableError(
            f"{path}: the top level is {type(data).__name__}; expected {_TAU2_EXPECTED}"
        )
    with located(str(path)):
        simulations = require(data, "simulations", list, "a list of simulations")
    model = _agent_model(data.get("info"))
    gold = _gold_actions(data.get("tasks"))
    rows: list[Row] = []
    for index, simulation in enumerate(simulations):
        with located(f"{path}: simulations[{index}]"):
            rows.extend(_tau2_rows(simulation, model, gold))
    return build_table(rows)


def _agent_model(info: Any) -> str | None:
    agent = info.get("agent_info") if isinstance(info, Mapping) else None
    model = agent.get("llm") if isinstance(agent, Mapping) else None
    return model if isinstance(model, str) else None


def _gold_actions(tasks: Any) -> dict[str, Any]:
    """Task id → the task's gold actions, for the tasks that list them."""
    gold: dict[str, Any] = {}
    for task in tasks if isinstance(tasks, list) else []:
        criteria = task.get("evaluation_criteria") if isinstance(task, Mapping) else None
        if isinstance(criteria, Mapping) and criteria.get("actions") is not None:
            gold[str(task.get("id"))] = criteria["actions"]
    return gold


def _tau2_rows(simulation: Any, model: str | None, gold: dict[str, Any]) -> list[Row]:
    simulation_id = require(simulation, "id", str, "the simulation's id (text)")
    task_id = str(require(simulation, "task_id", (str, int), "the task's id (text)"))
    messages = require(simulation, "messages", list, "the conversation (a list of messages)")
    reward_info = optional(simulation, "reward_info", dict) or {}
    with located("reward_info"):
        reward = optional(reward_info, "reward", _NUMBER)
    attributes: dict[str, Any] = {}
    if task_id in gold:
        attributes["gold_actions"] = gold[task_id]
    if simulation.get("agent_cost") is not None:
        attributes["agent_cost"] = simulation["agent_cost"]
    return rows_from_messages(
        messages,
        session_id=f"{SOURCE_TAU2}/{simulation_id}",
        turn_index=0,
        source=SOURCE_TAU2,
        task_id=task_id,
        trial=optional(simulation, "trial", int),
        reward=None if reward is None else float(reward),
        stop_reason=optional(simulation, "termination_reason", str),
        model_name=model,
        timestamps=[_field(message, "timestamp") for message in messages],
        usage=[_field(message, "usage") for message in messages],
        start_time=simulation.get("start_time"),
        end_time=simulation.get("end_time"),
        attributes=attributes,
    )


def _field(message: Any, name: str) -> Any:
    return message.get(name) if isinstance(message, Mapping) else None
