"""The gate file (TOML): what to replay, what to compare, and when to fail.

    [gate]
    repeats = 3                 # k: replays of each case per side
    seed = 0                    # seeds are seed, seed+1, ... per repeat
    alpha = 0.05                # significance of a regression on pass/fail flips
    jobs = 4                    # turns replayed at once

    [[datasets]]
    path = "datasets/observability-core"
    sessions = []               # optional: only these sessions
    turns = []                  # optional: only these turn indices

    [baseline]
    variant = "alyx"            # replay with this variant ...
    model = "sim:diligent"      # ... and this model: cassette, cassette-lenient, sim:X, openai:X
    tools = "cassette"          # or "live"

    [candidate]
    variant = "todo-basic"
    model = "sim:diligent"

    [evaluators.task_completion]
    min_pass_rate = 0.9         # the candidate's pass rate must stay at or above this
    [evaluators.tool_call_loops]
    min_pass_rate = 0.95

Every mistake is a `GateFileError` naming the file, the key and the allowed values.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness import PlangateError

EVALUATOR_KEYS = frozenset({"min_pass_rate", "params"})
SIDE_KEYS = frozenset({"variant", "model", "tools"})
MODELS = ("cassette", "cassette-lenient")
TOOLS = ("cassette", "live")


class GateFileError(PlangateError):
    """The gate file is unusable; the message names the file and the key."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DatasetSelection:
    """A dataset and, optionally, which of its sessions and turns to replay."""

    path: Path
    sessions: tuple[str, ...] = ()
    turns: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Side:
    """How one side of the comparison replays the cases."""

    variant: str
    model: str = "cassette"
    tools: str = "cassette"


@dataclass(frozen=True, slots=True, kw_only=True)
class EvaluatorRule:
    """When an evaluator fails the gate."""

    min_pass_rate: float | None = None
    params: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class GateFile:
    """A parsed gate file."""

    path: Path
    datasets: tuple[DatasetSelection, ...]
    baseline: Side
    candidate: Side
    evaluators: dict[str, EvaluatorRule]
    repeats: int = 3
    seed: int = 0
    alpha: float = 0.05
    jobs: int = 4


def load_gate(path: str | Path) -> GateFile:
    """Read and check a gate file."""
    source = Path(path)
    try:
        data = tomllib.loads(source.read_text(encoding="utf-8"))
    except OSError as exc:
        raise GateFileError(f"cannot read gate file {source}: {exc.strerror}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise GateFileError(f"{source}: not valid TOML: {exc}") from exc
    return parse_gate(data, source)


def parse_gate(data: dict[str, Any], source: Path) -> GateFile:
    """Check a gate file's data; relative dataset paths are relative to the file's folder."""
    _keys(data, {"gate", "datasets", "baseline", "candidate", "evaluators"}, "", source)
    settings = data.get("gate", {})
    _keys(settings, {"repeats", "seed", "alpha", "jobs"}, "gate.", source)
    if "datasets" not in data or not data["datasets"]:
        raise GateFileError(f"{source}: [[datasets]] is missing; name at least one dataset path")
    return GateFile(
        path=source,
        datasets=tuple(_dataset(d, i, source) for i, d in enumerate(data["datasets"])),
        baseline=_side(data, "baseline", source),
        candidate=_side(data, "candidate", source),
        evaluators=_evaluators(data.get("evaluators", {}), source),
        repeats=_int(settings, "repeats", 3, 1, source),
        seed=_int(settings, "seed", 0, 0, source),
        alpha=_alpha(settings.get("alpha", 0.05), source),
        jobs=_int(settings, "jobs", 4, 1, source),
    )


def _keys(data: Any, allowed: set[str] | frozenset[str], prefix: str, source: Path) -> None:
    if not isinstance(data, dict):
        raise GateFileError(f"{source}: {prefix.rstrip('.') or 'the file'} must be a table")
    unknown = sorted(set(data) - set(allowed))
    if unknown:
        raise GateFileError(
            f"{source}: unknown key {prefix + unknown[0]!r}; allowed: {', '.join(sorted(allowed))}"
        )


def _dataset(data: Any, index: int, source: Path) -> DatasetSelection:
    where = f"datasets[{index}]."
    _keys(data, {"path", "sessions", "turns"}, where, source)
    if not isinstance(data.get("path"), str):
        raise GateFileError(f"{source}: {where}path must be a dataset folder path")
    path = Path(data["path"])
    if not path.is_absolute():
        path = source.parent / path
    return DatasetSelection(
        path=path,
        sessions=tuple(str(s) for s in data.get("sessions", ())),
        turns=tuple(int(t) for t in data.get("turns", ())),
    )


def _side(data: dict[str, Any], name: str, source: Path) -> Side:
    side = data.get(name)
    if side is None:
        raise GateFileError(f"{source}: [{name}] is missing; it needs at least a variant")
    _keys(side, SIDE_KEYS, f"{name}.", source)
    if not isinstance(side.get("variant"), str):
        raise GateFileError(f"{source}: {name}.variant must be a variant name or .toml path")
    model = side.get("model", "cassette")
    if not (model in MODELS or model.startswith(("sim:", "openai:"))):
        raise GateFileError(
            f"{source}: {name}.model is {model!r}; allowed: cassette, cassette-lenient, "
            "sim:NAME, openai:MODEL"
        )
    tools = side.get("tools", "cassette")
    if tools not in TOOLS:
        raise GateFileError(f"{source}: {name}.tools is {tools!r}; allowed: cassette, live")
    return Side(variant=side["variant"], model=model, tools=tools)


def _evaluators(data: Any, source: Path) -> dict[str, EvaluatorRule]:
    from evaluators import evaluators as registered

    known = registered()
    _keys(data, set(known), "evaluators.", source)
    rules = {}
    for name, rule in data.items():
        _keys(rule, EVALUATOR_KEYS, f"evaluators.{name}.", source)
        rate = rule.get("min_pass_rate")
        if rate is not None and not (isinstance(rate, int | float) and 0 <= rate <= 1):
            raise GateFileError(f"{source}: evaluators.{name}.min_pass_rate must be in [0, 1]")
        rules[name] = EvaluatorRule(min_pass_rate=rate, params=dict(rule.get("params", {})))
    return rules or {name: EvaluatorRule() for name in ("task_completion", "tool_call_loops")}


def _int(data: dict[str, Any], key: str, default: int, least: int, source: Path) -> int:
    value = data.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise GateFileError(
            f"{source}: gate.{key} must be a whole number >= {least}, not {value!r}"
        )
    return value


def _alpha(value: Any, source: Path) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 1:
        raise GateFileError(f"{source}: gate.alpha must be between 0 and 1, not {value!r}")
    return float(value)
