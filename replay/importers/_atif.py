"""ATIF trajectories (the Agent Trajectory Interchange Format) as trace-table rows: `atif`.

ATIF is the Harbor framework's trajectory format (its RFC 0001, versions 1.0 to 1.8): an agent,
and steps from `system`, `user` or `agent`; an agent step's tool calls, the observed results
(each naming its call by `source_call_id`) and its metrics. A file holds one trajectory object,
a JSON list of them, or JSON Lines (one per line); embedded `subagent_trajectories` are read too.
Each trajectory is one session (its `session_id`; by default `atif/<file stem>`, and
`<parent session>/<trajectory_id>` for an embedded one that has none of its own):

- a `user` step starts a turn (steps before the first belong to turn 0): an AGENT row whose
  `input_value` is the user's message and `output_value` the turn's last agent message;
- an `agent` step is an LLM row (iteration 1, 2, … within the turn): its message, the model
  (the step's, else the agent's), prompt and completion tokens, and cached tokens and cost as
  OpenInference's `llm.token_count.prompt_details.cache_read` and `llm.cost.total`; a step with
  `llm_call_count` 0 (a deterministic dispatch) has no LLM row, only its calls;
- each tool call is a TOOL row with the step's iteration: call id, name, canonical arguments,
  and as output the content of the step's first unclaimed result that names the call;
- `system` steps, and agent steps with neither a model call nor a tool call, are `atif.step`
  events on the AGENT row, with their position in the turn;
- what has no column stays in `attributes`: the agent (`atif.agent`) and the trajectory's own
  fields (`atif.trajectory`: notes, final_metrics, extra, …) on the session's first AGENT row,
  and the rest of a step, call, result and metrics under `atif.step`, `atif.tool_call`,
  `atif.result` and `atif.metrics`;
- a result's `subagent_trajectory_ref` stays in its `atif.result`; when the reference names a
  trajectory of the same file (by `trajectory_id`, else by a `session_id` that only one has),
  that trajectory's rows join the referring span's trace and its AGENT rows become children of
  the referring span, as plangate's own subagents are;
- `extra.plangate`, which `trajectories_from_table` writes for what ATIF has no field for (span
  times, status, stop reason, …), fills those columns back.

Times come only from the source: a step's `timestamp` ends its LLM span, which starts at the
previous step's, and starts its TOOL spans, whose end ATIF does not record. Ids are hashed
from the session, turn and position, so importing a file twice gives the same table. What is
inside a trajectory is read by `_atif_steps`; `write_trajectories` writes ATIF files.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import pyarrow as pa

from plangate.harness import json_problem, write_text_atomic
from plangate.harness.semconv import AGENT_NAME
from plangate.replay._redact import redactor_for
from plangate.replay.importers._atif_steps import (
    AGENT_FIELDS,
    AGENT_KEY,
    FINAL_FIELDS,
    ROOT_FIELDS,
    SOURCE_ATIF,
    TRAJECTORY_KEY,
    Turn,
    check,
    read_step,
    remainder,
    show,
)
from plangate.replay.importers._reading import Row, located, require, timestamp
from plangate.replay.importers._registry import importer
from plangate.replay.schema import (
    PARENT_SPAN_ID,
    SPAN_ID,
    SPAN_KIND,
    TRACE_ID,
    TraceTableError,
    build_table,
)

VERSION = re.compile(r"ATIF-v1\.\d+")
"""The schema versions read: every 1.x (1.0 to 1.8 are published)."""
EXPECTED = (
    "an ATIF trajectory (an object with 'schema_version', 'agent' and 'steps'), a list of "
    "them, or one per line (JSON Lines)"
)


@importer(SOURCE_ATIF)
def import_atif(path: Path) -> pa.Table:
    """Read ATIF trajectories: one object, a JSON list of them, or JSON Lines.

    Args:
        path: The file.

    Returns:
        The trace table: per turn an AGENT row, then its LLM and TOOL rows.

    Raises:
        TraceTableError: The file is not ATIF; the message names the file, the trajectory, the
            step and the field.
    """
    try:
        trajectories = _flatten(_documents(path), path)
        sessions = _session_ids(trajectories, path)
        for trajectory, session_id in zip(trajectories, sessions, strict=True):
            trajectory.session_id = session_id
            with located(trajectory.where):
                _read_steps(trajectory)
    except RecursionError as exc:
        raise TraceTableError(f"{path}: nested too deeply to read; expected {EXPECTED}") from exc
    _link(trajectories)
    with located(str(path)):
        return build_table(row for trajectory in trajectories for row in trajectory.rows)


def write_trajectories(
    trajectories: Sequence[dict[str, Any]], path: str | Path, *, redact: Iterable[str] = ()
) -> Path:
    """Write trajectories as ATIF JSON, secrets redacted, atomically; returns the path.

    A `.jsonl` path gets one trajectory per line; any other, the trajectory itself when there is
    one (what Harbor's validator reads) and a JSON list when there are several.
    """
    data = redactor_for(redact).data(list(trajectories))
    if Path(path).suffix == ".jsonl":
        text = "".join(json.dumps(item, ensure_ascii=False) + "\n" for item in data)
    else:
        text = json.dumps(data[0] if len(data) == 1 else data, ensure_ascii=False, indent=2)
        text += "\n"
    return write_text_atomic(path, text)


@dataclass(slots=True)
class _Trajectory:
    """One trajectory being read: the object, where it is, and the rows it becomes."""

    data: dict[str, Any]
    where: str
    parent: int | None
    """The trajectory it is embedded in (its position in the file's list), if any."""
    session_id: str = ""
    rows: list[Row] = field(default_factory=list)
    refs: list[tuple[Row, dict[str, Any]]] = field(default_factory=list)
    """Each subagent reference, with the row of the call (or step) whose result holds it."""


# -- the file -----------------------------------------------------------------------------------


def _documents(path: Path) -> list[tuple[str, Any]]:
    """(where, value) of each trajectory in the file: one object, a list, or JSON Lines."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise TraceTableError(f"{path}: not UTF-8 text; expected {EXPECTED}") from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        return _lines(path, text, exc)
    if isinstance(data, dict):
        return [("", data)]
    if isinstance(data, list) and data:
        return [(f"trajectory {index}", item) for index, item in enumerate(data)]
    shown = "an empty list" if data == [] else show(data)
    raise TraceTableError(f"{path}: the top level is {shown}; expected {EXPECTED}")


def _lines(path: Path, text: str, problem: json.JSONDecodeError) -> list[tuple[str, Any]]:
    """JSON Lines: what follows a first complete value is read one value per line."""
    lines = [(number, line) for number, line in enumerate(text.split("\n"), 1) if line.strip()]
    if problem.msg != "Extra data" or len(lines) < 2:
        raise TraceTableError(f"{path}: not JSON ({json_problem(problem)}); expected {EXPECTED}")
    documents = []
    for number, line in lines:
        try:
            documents.append((f"line {number}", json.loads(line)))
        except json.JSONDecodeError as exc:
            raise TraceTableError(
                f"{path}: line {number}: not JSON ({json_problem(exc)}); expected one "
                "trajectory per line"
            ) from exc
    return documents


def _flatten(documents: list[tuple[str, Any]], path: Path) -> list[_Trajectory]:
    """Every trajectory, each followed by its embedded subagents (depth first)."""
    found: list[_Trajectory] = []
    for where, data in documents:
        _add(found, data, f"{path}: {where}" if where else str(path), None)
    return found


def _add(found: list[_Trajectory], data: Any, where: str, parent: int | None) -> None:
    with located(where):
        if not isinstance(data, dict):
            raise TraceTableError(f"is {show(data)}; expected an ATIF trajectory object")
        _check_root(data)
    found.append(_Trajectory(data=data, where=where, parent=parent))
    index = len(found) - 1
    for number, sub in enumerate(data.get("subagent_trajectories") or []):
        _add(found, sub, f"{where}: subagent_trajectories[{number}]", index)


def _check_root(data: dict[str, Any]) -> None:
    check(data, ROOT_FIELDS)
    version = require(data, "schema_version", str, "an ATIF version such as 'ATIF-v1.8'")
    if not VERSION.fullmatch(version):
        raise TraceTableError(
            f"field 'schema_version' is {show(version)}; expected ATIF-v1.0 to ATIF-v1.8 "
            "(any ATIF-v1.x is read)"
        )
    agent = require(data, "agent", dict, "an object with the agent's 'name' and 'version'")
    with located("agent"):
        check(agent, AGENT_FIELDS)
        require(agent, "name", str, "the agent's name")
    if not require(data, "steps", list, "a list of steps"):
        raise TraceTableError("field 'steps' is empty; expected at least one step")
    with located("final_metrics"):
        check(data.get("final_metrics") or {}, FINAL_FIELDS)


def _session_ids(trajectories: list[_Trajectory], path: Path) -> list[str]:
    """Each trajectory's session in the table: its own, or one made up; never one taken."""
    used: set[str] = set()
    chosen: list[str] = []
    several = sum(trajectory.parent is None for trajectory in trajectories) > 1
    for index, trajectory in enumerate(trajectories):
        own = trajectory.data.get("session_id")
        if trajectory.parent is not None and own in (None, chosen[trajectory.parent]):
            name = trajectory.data.get("trajectory_id") or f"subagent-{index}"
            own = f"{chosen[trajectory.parent]}/{name}"
        elif own is None:
            own = f"{SOURCE_ATIF}/{path.stem}" + (f"/{index}" if several else "")
        while own in used:
            own = f"{own}/{index}"
        used.add(own)
        chosen.append(own)
    return chosen


# -- steps ---------------------------------------------------------------------------------


def _read_steps(trajectory: _Trajectory) -> None:
    data = trajectory.data
    agent, steps = data["agent"], data["steps"]
    before: datetime | None = None
    for turn_index, indices in enumerate(_turns(steps)):
        turn = Turn(trajectory.session_id, turn_index, agent.get("model_name"), trajectory.refs)
        for position, index in enumerate(indices):
            with located(f"step {index}"):
                step = read_step(steps[index])
                time = timestamp(step.get("timestamp"), "timestamp")
                turn.add(position, step, time, before)
            before = time if time is not None else before
        if turn_index == 0:
            turn.attributes[AGENT_KEY] = agent
            turn.attributes[TRAJECTORY_KEY] = remainder(
                data, {"agent", "steps", "subagent_trajectories"}
            )
        turn.attributes[AGENT_NAME] = agent["name"]
        trajectory.rows.extend(turn.finish())


def _turns(steps: list[Any]) -> Iterator[list[int]]:
    """The step indices of each turn: a user step starts one, except the first user step."""
    current: list[int] = []
    seen_user = False
    for index, step in enumerate(steps):
        if isinstance(step, dict) and step.get("source") == "user":
            if seen_user:
                yield current
                current = []
            seen_user = True
        current.append(index)
    yield current


# -- subagents ----------------------------------------------------------------------------------


def _link(trajectories: list[_Trajectory]) -> None:
    """Put each referenced trajectory of the file under the span whose result references it."""
    by_id: dict[Any, int] = {}  # keyed by the trajectory's id, by its session: None for none
    by_session: dict[Any, list[int]] = {}
    for index, trajectory in enumerate(trajectories):
        by_id.setdefault(trajectory.data.get("trajectory_id"), index)
        by_session.setdefault(trajectory.data.get("session_id"), []).append(index)
    by_id.pop(None, None)
    by_session.pop(None, None)
    parents: dict[int, tuple[int, Row]] = {}
    for source, trajectory in enumerate(trajectories):
        for owner, ref in trajectory.refs:
            target = by_id.get(ref.get("trajectory_id"))
            sessions = by_session.get(ref.get("session_id"), [])
            if target is None and len(sessions) == 1:
                target = sessions[0]
            if target is not None and target not in parents and not _above(target, source, parents):
                parents[target] = (source, owner)
    for child in sorted(parents, key=lambda index: _depth(index, parents)):
        owner = parents[child][1]
        for row in trajectories[child].rows:
            row[TRACE_ID] = owner[TRACE_ID]
            if row[SPAN_KIND] == "AGENT":
                row[PARENT_SPAN_ID] = owner[SPAN_ID]


def _above(target: int, source: int, parents: dict[int, tuple[int, Row]]) -> bool:
    """Whether `target` is `source` or one of its linked ancestors (a link would make a cycle)."""
    while source != target and source in parents:
        source = parents[source][0]
    return source == target


def _depth(index: int, parents: dict[int, tuple[int, Row]]) -> int:
    depth = 0
    while index in parents:
        index, depth = parents[index][0], depth + 1
    return depth
