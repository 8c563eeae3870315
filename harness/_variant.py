"""Harness variants: every pattern of the reference agent is a switch in a TOML file.

A variant file has a `name`, a `description` and three tables, `[plan]`, `[turn]` and
`[guards]`; every key is optional and defaults to the `alyx` design. Loading checks every key and
value, and a mistake is a `ConfigError` that names the file, the key and the allowed values.
"""

from __future__ import annotations

import dataclasses
import functools
import tomllib
import typing
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from plangate.harness._errors import ConfigError
from plangate.harness._files import read_text


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanSettings:
    """How the agent plans."""

    dialect: Literal["none", "todo", "harness", "dependency"] = "todo"
    """`none`: no plan; `todo`: todo tools; `harness`: the harness owns the list;
    `dependency`: a plan of named steps with dependencies (create_plan, start_step, …)."""
    statuses: Literal["two", "four"] = "four"
    """Todo statuses: `two` (pending / completed) or `four` (adds in_progress and blocked)."""
    message: Literal["pinned", "history", "none"] = "pinned"
    """Where the model sees the plan: a message pinned after the system prompt, only in plan
    tool results in the history, or nowhere."""
    status_reminder: bool = False
    """Add a one-line plan status after every tool result."""
    trigger: Literal["always", "action_verbs"] = "always"
    """`action_verbs`: offer planning only when the request holds two or more actions."""
    max_plan_steps: int = 20
    """Most steps a dependency plan may have."""
    strict_dependencies: bool = False
    """Starting a step whose dependencies are not done is an error (else a warning)."""
    approve_plan: bool = False
    """`create_plan` pauses the run until a person approves, edits or rejects the plan."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnSettings:
    """How a turn ends."""

    ending: Literal["text", "finish_tool"] = "finish_tool"
    """`text`: a reply without tool calls ends the turn; `finish_tool`: only `finish` does."""
    finish_gate: bool = True
    """Bounce `finish` while plan items are pending or in progress."""
    max_bounces: int = 3
    """Bounces before the gate lets a finish through."""
    max_iterations: int = 30
    """Model calls allowed in one turn."""
    iteration_warning: int = 3
    """Warn the model when this many calls remain (0: never)."""
    forced_finish: bool = True
    """At the limit, make one last call that may only call `finish` (stop: forced_finish)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class GuardSettings:
    """The guards that keep a run on track."""

    nudge: bool = True
    """Answer a tool call written as plain text with a nudge to really call it."""
    continuation: bool = True
    """Answer an empty reply while the plan is open with a prompt to go on."""
    loop_guard: bool = True
    """Warn on repeated identical calls, then stop the turn."""
    loop_warn_after: int = 3
    """Identical consecutive calls that draw a warning."""
    loop_stop_after: int = 5
    """Identical consecutive calls that stop the turn (stop: loop_guard)."""
    loop_compare_results: bool = True
    """Count identical calls only while their results stay the same (a changed result is
    progress: scrolling, paging, polling); false: identical calls alone count."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ContextSettings:
    """Context management and memory."""

    result_reference_chars: int = 0
    """Tool results longer than this reach the model as a reference it can query (0: never)."""
    history_token_budget: int = 0
    """Past this many history tokens, a checkpoint the model writes replaces them (0: never)."""
    memory: bool = False
    """Load the user's memory file on each request and update it after each turn."""
    skills: bool = False
    """Offer `load_skill` for the agent's skills."""
    subagents: bool = False
    """Offer `delegate` to run a scoped subagent."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolSettings:
    """How the harness runs tools."""

    timeout: float = 0
    """Seconds a tool call may take (0: no limit). A call that takes longer is a failure of the
    tool's environment, not the agent's: the turn stops with `tool_error`, an error under every
    evaluator. With a limit, sync tools run in a worker thread (about 0.1 ms a call)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Variant:
    """A harness variant: a name and every switch."""

    name: str
    """Variant name, as used on the command line and in traces."""
    description: str = ""
    """What the variant is for."""
    plan: PlanSettings = field(default_factory=PlanSettings)
    """Planning switches."""
    turn: TurnSettings = field(default_factory=TurnSettings)
    """Turn ending switches."""
    guards: GuardSettings = field(default_factory=GuardSettings)
    """Guard switches."""
    context: ContextSettings = field(default_factory=ContextSettings)
    """Context management, memory, skills and subagents."""
    tools: ToolSettings = field(default_factory=ToolSettings)
    """How tools run (their timeout)."""


def builtin_variants() -> list[str]:
    """The names of the variants that ship with plangate."""
    folder = resources.files("plangate.harness") / "variants"
    return sorted(
        p.name.removesuffix(".toml") for p in folder.iterdir() if p.name.endswith(".toml")
    )


def load_variant(name_or_path: str | Path) -> Variant:
    """A shipped variant by name, or a variant file by path."""
    text = str(name_or_path)
    if text.endswith(".toml") or Path(text).is_file():
        path = Path(text)
        return parse_variant(read_text(path, "variant file"), str(path))
    if text not in builtin_variants():
        choices = ", ".join(builtin_variants())
        raise ConfigError(
            f"unknown variant {text!r}; choose one of: {choices} (or give a path to a .toml file)"
        )
    source = (resources.files("plangate.harness") / "variants" / f"{text}.toml").read_text("utf-8")
    return parse_variant(source, f"{text}.toml")


def parse_variant(source: str, where: str = "<variant>") -> Variant:
    """Parse and check a variant file's text; `where` names it in errors.

    A variant is read-only, so the same text gives the same (shared) variant: a replay loads
    one per turn, and parsing is most of the cost of that.
    """
    return _parsed(source, where)


@functools.lru_cache(maxsize=256)
def _parsed(source: str, where: str) -> Variant:
    try:
        data = tomllib.loads(source)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{where}: not valid TOML: {exc}") from exc
    if "name" not in data:
        raise ConfigError(f"{where}: missing key 'name' (the variant's name)")
    variant: Variant = _build(Variant, data, where, "")
    _check_consistency(variant, where)
    return variant


def _build(cls: type[Any], data: dict[str, Any], where: str, prefix: str) -> Any:
    hints = typing.get_type_hints(cls)
    fields = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - fields)
    if unknown:
        raise ConfigError(
            f"{where}: unknown key {prefix + unknown[0]!r}; allowed keys"
            f"{' in [' + prefix.rstrip('.') + ']' if prefix else ''}: {', '.join(sorted(fields))}"
        )
    values = {key: _value(hints[key], value, where, prefix + key) for key, value in data.items()}
    return cls(**values)


def _value(hint: Any, value: Any, where: str, key: str) -> Any:
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: {key!r} must be a table ([{key}])")
        return _build(hint, value, where, f"{key}.")
    if typing.get_origin(hint) is Literal:
        choices = typing.get_args(hint)
        if value not in choices:
            allowed = ", ".join(repr(c) for c in choices)
            raise ConfigError(f"{where}: {key!r} is {value!r}; allowed values: {allowed}")
        return value
    if hint is bool and not isinstance(value, bool):
        raise ConfigError(f"{where}: {key!r} must be true or false, not {value!r}")
    if hint is int and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
        raise ConfigError(f"{where}: {key!r} must be a whole number >= 0, not {value!r}")
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
            raise ConfigError(f"{where}: {key!r} must be a number >= 0, not {value!r}")
        return float(value)
    if hint is str and not isinstance(value, str):
        raise ConfigError(f"{where}: {key!r} must be a string, not {value!r}")
    return value


def _check_consistency(variant: Variant, where: str) -> None:
    plan, turn, guards = variant.plan, variant.turn, variant.guards
    problems = []
    if turn.max_iterations < 1:
        problems.append("'turn.max_iterations' must be at least 1")
    if turn.iteration_warning >= turn.max_iterations:
        problems.append("'turn.iteration_warning' must be smaller than 'turn.max_iterations'")
    if guards.loop_guard and not 2 <= guards.loop_warn_after < guards.loop_stop_after:
        problems.append(
            "'guards.loop_warn_after' must be at least 2 and below 'guards.loop_stop_after'"
        )
    if plan.dialect == "harness" and turn.ending != "finish_tool":
        problems.append("'plan.dialect = \"harness\"' needs 'turn.ending = \"finish_tool\"'")
    if plan.approve_plan and plan.dialect != "dependency":
        problems.append("'plan.approve_plan' needs 'plan.dialect = \"dependency\"'")
    if plan.max_plan_steps < 2:
        problems.append("'plan.max_plan_steps' must be at least 2")
    if problems:
        raise ConfigError(f"{where}: " + "; ".join(problems))
