"""The gate file (TOML): what to replay, what to compare, and when to fail.

    [gate]
    repeats = 3                 # k: replays of each case per side
    seed = 0                    # seeds are seed, seed+1, ... per repeat
    alpha = 0.05                # significance of a regression on pass/fail flips
    jobs = 4                    # turns replayed at once
    noise_floor = true          # also replay the baseline against itself (fresh seeds)
    max_errors = 0              # errored turns a side may have before the gate cannot decide
    model_timeout = 60          # an openai: model's per-attempt timeout, in seconds
    model_retries = 4           # its retries after a failed attempt (429, 5xx, timeouts)
    model_deadline = 300        # the most one model call may take, retries included
                                # (these three: the command's flags win, then this file,
                                # then PLANGATE_MODEL_TIMEOUT/_RETRIES/_DEADLINE)
    budget_tokens = 2_000_000   # the run's budget over both sides and every repeat: once the
    budget_usd = 5.0            # finished turns used this many tokens or dollars, the rest are
                                # not run and the gate cannot decide (the flags win)
    price_as = "gpt-4o-mini"    # price every model call as this model (a dollar budget on
                                # sim: models, or on a model genai-prices does not know)

    [[datasets]]
    path = "datasets/observability-core"
    sessions = []               # optional: only these sessions
    turns = []                  # optional: only these turn indices

    [baseline]
    variant = "alyx"            # replay with this variant ...
    model = "sim:diligent"      # ... and this model: cassette, cassette-lenient, sim:X, openai:X
    tools = "cassette"          # or "live"

    seed = 0                    # seed offset of this side; 0 pairs its repeats with the other's

    [candidate]
    variant = "todo-basic"
    model = "sim:diligent"
    # or, instead of a variant to replay, a stored score table (one a gate run wrote):
    # scores = "out/main/scores/baseline.parquet"
    # or a team's own agent behind the agent boundary, with its variant settings:
    # agent = "python:my_agent:make"    # or "command:node agent.js", "http:http://..."
    # kwargs = { finish_check = true }  # a python: factory's keyword arguments
    # env = { PROMPT = "restate" }      # a command: agent's environment
    # args = ["--strict"]               # a command: agent's extra arguments
    # mcp = { DESK_MCP_URL = "stdio:python desk_server.py" }  # its MCP servers, through plangate

    [evaluators.task_completion]
    min_pass_rate = 0.9         # the candidate's pass rate must stay at or above this
    cases = { "obs-003" = 1.0, "obs-004:1" = 0.6 }   # per case (session, or session:turn)
    [evaluators.tool_call_loops]
    min_pass_rate = 0.95
    [evaluators.plan_adherence]
    allow_not_applicable = true # gate even if no case has a plan on one side (else exit 2)
    [evaluators.tokens]
    max_ratio = 1.2             # a measure (latency, tokens, cost): fail when candidate /
                                # baseline is above 1.2 with 95% confidence

Relative paths (datasets, variant files, score tables) are relative to the gate file's folder.
Every mistake is a `GateFileError` naming the file, the key and the allowed values.
"""

from __future__ import annotations

import dataclasses
import tomllib
from dataclasses import dataclass, field
from math import inf
from pathlib import Path
from typing import Any

from plangate.ci._budget import BudgetLimits
from plangate.ci.gate._verdict import MEASURES
from plangate.evaluators import evaluators as registered
from plangate.harness import EndpointSettings, PlangateError, load_variant, read_text
from plangate.replay import CASSETTE_MODELS, TOOL_SOURCES
from plangate.replay.agents import AGENT_KINDS, AgentSpec

EVALUATOR_KEYS = frozenset(
    {"min_pass_rate", "params", "cases", "allow_not_applicable", "max_ratio"}
)
AGENT_SETTINGS = frozenset({"env", "args", "kwargs", "mcp"})
SIDE_KEYS = frozenset({"variant", "agent", "model", "tools", "scores", "seed", *AGENT_SETTINGS})
ENDPOINT_KEYS = {
    "model_timeout": "timeout",
    "model_retries": "retries",
    "model_deadline": "deadline",
}
"""The `[gate]` keys of an `openai:` model's patience, and their `EndpointSettings` fields."""
BUDGET_KEYS = frozenset({"budget_tokens", "budget_usd", "price_as"})
"""The `[gate]` keys of the run's budget (`--budget-tokens`, `--budget-usd`, `--price-as`)."""
GATE_KEYS = frozenset(
    {"repeats", "seed", "alpha", "jobs", "noise_floor", "max_errors", *ENDPOINT_KEYS, *BUDGET_KEYS}
)

DEFAULT_GATE = Path(__file__).resolve().parent.parent / "gate.toml"
"""The shipped gate file: the shipped golden datasets and the default evaluators."""


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
    """How one side of the comparison gets its outcomes: replayed, or read from stored scores."""

    variant: str | None = None
    model: str = "cassette"
    tools: str = "cassette"
    scores: Path | None = None
    """A stored score table (`SCORE_SCHEMA`, `trial` = repeat) instead of replaying."""
    seed: int = 0
    """Added to this side's seeds; 0 pairs each repeat with the other side's."""
    agent: AgentSpec | None = None
    """A team's own agent, replayed through the agent boundary instead of a variant."""

    @property
    def label(self) -> str:
        """The variant's name, or the stored score table's file name."""
        if self.agent is not None:
            return self.agent.label
        return self.variant if self.variant is not None else str(self.scores)


@dataclass(frozen=True, slots=True, kw_only=True)
class EvaluatorRule:
    """When an evaluator fails the gate."""

    min_pass_rate: float | None = None
    params: dict[str, Any] = field(default_factory=dict)
    cases: dict[str, float] = field(default_factory=dict)
    """Per-case minimum pass rates, keyed `SESSION` (every turn) or `SESSION:TURN`."""
    allow_not_applicable: bool = False
    """Decide even when no case is applicable on a side (otherwise the gate cannot decide)."""
    max_ratio: float | None = None
    """For a measure (latency, tokens, cost): the most candidate / baseline may be; the gate
    fails when the ratio's whole confidence interval lies above it."""

    def case_minimum(self, session_id: str, turn_index: int) -> float | None:
        """The case's own minimum pass rate, if the gate file sets one."""
        return self.cases.get(f"{session_id}:{turn_index}", self.cases.get(session_id))


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
    noise_floor: bool = True
    """Replay the baseline a second time with fresh seeds; the verdict must beat that noise."""
    max_errors: int = 0
    """Errored turns (infrastructure failures) a side may have; beyond, the gate cannot decide."""
    endpoint: EndpointSettings = field(default_factory=EndpointSettings)
    """An `openai:` model's timeout, retries and deadline (unset: from the environment)."""
    budget: BudgetLimits = field(default_factory=BudgetLimits)
    """The run's budget, over both sides and every repeat (unset: no limit)."""


def load_gate(path: str | Path) -> GateFile:
    """Read and check a gate file."""
    source = Path(path)
    text = read_text(source, "gate file", GateFileError)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise GateFileError(f"{source}: not valid TOML: {exc}") from exc
    return parse_gate(data, source)


def parse_gate(data: dict[str, Any], source: Path) -> GateFile:
    """Check a gate file's data; relative dataset paths are relative to the file's folder."""
    _keys(data, {"gate", "datasets", "baseline", "candidate", "evaluators"}, "", source)
    settings = data.get("gate", {})
    _keys(settings, GATE_KEYS, "gate.", source)
    noise_floor = settings.get("noise_floor", True)
    if not isinstance(noise_floor, bool):
        raise GateFileError(
            f"{source}: gate.noise_floor must be true or false, not {noise_floor!r}"
        )
    if "datasets" not in data or not data["datasets"]:
        raise GateFileError(f"{source}: [[datasets]] is missing; name at least one dataset path")
    if not isinstance(data["datasets"], list):
        raise GateFileError(f"{source}: datasets must be [[datasets]] tables, one per dataset")
    datasets = tuple(_dataset(d, i, source) for i, d in enumerate(data["datasets"]))
    _one_name_each(datasets, source)
    return GateFile(
        path=source,
        datasets=datasets,
        baseline=_side(data, "baseline", source),
        candidate=_side(data, "candidate", source),
        evaluators=_judge_cassette(
            _evaluators(data.get("evaluators", {}), source), datasets, source
        ),
        repeats=_int(settings, "repeats", 3, 1, source),
        seed=_int(settings, "seed", 0, 0, source),
        alpha=_alpha(settings.get("alpha", 0.05), source),
        jobs=_int(settings, "jobs", 4, 1, source),
        noise_floor=noise_floor,
        max_errors=_int(settings, "max_errors", 0, 0, source),
        endpoint=_endpoint(settings, source),
        budget=_budget(settings, source),
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
    sessions, turns = data.get("sessions", []), data.get("turns", [])
    if not isinstance(sessions, list) or not all(isinstance(s, str) for s in sessions):
        raise GateFileError(
            f'{source}: {where}sessions must be a list of session ids like ["obs-003"], not '
            f"{sessions!r}"
        )
    if not isinstance(turns, list) or not all(
        isinstance(t, int) and not isinstance(t, bool) and t >= 0 for t in turns
    ):
        raise GateFileError(
            f"{source}: {where}turns must be a list of turn numbers like [0, 2], not {turns!r}"
        )
    return DatasetSelection(path=path, sessions=tuple(sessions), turns=tuple(turns))


def _one_name_each(datasets: tuple[DatasetSelection, ...], source: Path) -> None:
    """Refuse two dataset folders of one name: a case is known by its dataset's folder name."""
    named: dict[str, Path] = {}
    for selection in datasets:
        first = named.setdefault(selection.path.name, selection.path)
        if first.resolve() != selection.path.resolve():
            raise GateFileError(
                f"{source}: datasets {first} and {selection.path} are both named "
                f"{selection.path.name!r}; a gate knows a dataset by its folder's name: rename "
                "one folder"
            )


def _side(data: dict[str, Any], name: str, source: Path) -> Side:
    side = data.get(name)
    if side is None:
        raise GateFileError(f"{source}: [{name}] is missing; it needs at least a variant")
    _keys(side, SIDE_KEYS, f"{name}.", source)
    seed = _int(side, "seed", 0, 0, source, f"{name}.")
    given = [key for key in ("variant", "agent", "scores") if key in side]
    if len(given) > 1:
        raise GateFileError(
            f"{source}: {name} has {'both ' if len(given) == 2 else ''}{' and '.join(given)}; "
            "give one: a variant to replay, an agent to replay, or a stored score table"
        )
    if "scores" in side:
        if not isinstance(side["scores"], str):
            raise GateFileError(f"{source}: {name}.scores must be a score table path")
        scores = Path(side["scores"])
        return Side(scores=scores if scores.is_absolute() else source.parent / scores, seed=seed)
    if not isinstance(side.get("variant", side.get("agent")), str):
        raise GateFileError(
            f"{source}: {name}.variant must be a variant name or .toml path (or give "
            f"{name}.agent, an agent spec, or {name}.scores, a stored score table)"
        )
    model = _model(side, name, source)
    tools = side.get("tools", "cassette")
    if tools not in TOOL_SOURCES:
        raise GateFileError(f"{source}: {name}.tools is {tools!r}; allowed: cassette, live")
    agent = _agent(side, name, source)
    if agent is not None:
        return Side(agent=agent, model=model, tools=tools, seed=seed)
    variant = side["variant"]
    if variant.endswith(".toml") and not Path(variant).is_absolute():
        variant = str(source.parent / variant)
    try:
        load_variant(variant)
    except PlangateError as exc:
        raise GateFileError(f"{source}: {name}.variant: {exc}") from exc
    return Side(variant=variant, model=model, tools=tools, seed=seed)


def side_of(text: str, *, model: str, tools: str) -> Side:
    """A side named on the command line (`compare`, `phoenix experiment`).

    It is an agent spec (`python:...`, `command:...`, `http:...`); a `.toml` file that names
    an `agent` with its settings (`env`, `args`, `kwargs`), as a gate file's side does; or a
    harness variant of plangate's agent (a name, or a variant `.toml` file).

    Raises:
        PlangateError: The spec, the file or the variant is unusable; the message names it.
    """
    if text.partition(":")[0] in AGENT_KINDS:
        return Side(agent=AgentSpec.of(text), model=model, tools=tools)
    source = Path(text)
    if text.endswith(".toml") and source.is_file():
        try:
            data = tomllib.loads(read_text(source, "side file", GateFileError))
        except tomllib.TOMLDecodeError as exc:
            raise GateFileError(f"{source}: not valid TOML: {exc}") from exc
        if "agent" in data:
            _keys(data, {"agent", *AGENT_SETTINGS}, "", source)
            return Side(agent=_agent(data, "the file", source), model=model, tools=tools)
    load_variant(text)  # an unknown name fails here, listing the choices
    return Side(variant=text, model=model, tools=tools)


def _endpoint(settings: dict[str, Any], source: Path) -> EndpointSettings:
    chosen: dict[str, float | int] = {}
    for key, name in ENDPOINT_KEYS.items():
        if key not in settings:
            continue
        value = settings[key]
        if name == "retries":
            chosen[name] = _int(settings, key, 0, 0, source)
        elif isinstance(value, int | float) and not isinstance(value, bool) and 0 < value < inf:
            chosen[name] = float(value)
        else:
            raise GateFileError(
                f"{source}: gate.{key} must be a number of seconds > 0, not {value!r}"
            )
    return EndpointSettings(**chosen)  # type: ignore[arg-type]


def _budget(settings: dict[str, Any], source: Path) -> BudgetLimits:
    """`budget_tokens` (a whole number >= 1), `budget_usd` (> 0) and `price_as` (a name)."""
    chosen: dict[str, Any] = {}
    if "budget_tokens" in settings:
        chosen["max_tokens"] = _int(settings, "budget_tokens", 0, 1, source)
    usd = settings.get("budget_usd")
    if usd is not None:
        if isinstance(usd, bool) or not isinstance(usd, int | float) or not 0 < usd < inf:
            raise GateFileError(
                f"{source}: gate.budget_usd must be a number of US dollars > 0, not {usd!r}"
            )
        chosen["max_usd"] = float(usd)
    name = settings.get("price_as")
    if name is not None:
        if not isinstance(name, str) or not name.strip():
            raise GateFileError(f"{source}: gate.price_as must be a model name, not {name!r}")
        chosen["price_as"] = name
    return BudgetLimits(**chosen)


def _model(side: dict[str, Any], name: str, source: Path) -> str:
    model = side.get("model", "cassette")
    if not isinstance(model, str) or not (
        model in CASSETTE_MODELS or model.startswith(("sim:", "openai:"))
    ):
        raise GateFileError(
            f"{source}: {name}.model is {model!r}; allowed: cassette, cassette-lenient, "
            "sim:NAME, openai:MODEL"
        )
    return model


def _agent(side: dict[str, Any], name: str, source: Path) -> AgentSpec | None:
    """The side's agent and its settings (None: the side replays a variant)."""
    settings = {key: side[key] for key in AGENT_SETTINGS if key in side}
    if "agent" not in side:
        if settings:
            raise GateFileError(
                f"{source}: {name}.{sorted(settings)[0]} is an agent's setting; give {name}.agent"
            )
        return None
    try:
        return AgentSpec.of(side["agent"], settings)
    except PlangateError as exc:
        raise GateFileError(f"{source}: {name}: {exc}") from exc


def _evaluators(data: Any, source: Path) -> dict[str, EvaluatorRule]:
    known = registered()
    _keys(data, set(known), "evaluators.", source)
    rules = {}
    for name, rule in data.items():
        _keys(rule, EVALUATOR_KEYS, f"evaluators.{name}.", source)
        rate = rule.get("min_pass_rate")
        if rate is not None and not (isinstance(rate, int | float) and 0 <= rate <= 1):
            raise GateFileError(f"{source}: evaluators.{name}.min_pass_rate must be in [0, 1]")
        allow = rule.get("allow_not_applicable", False)
        if not isinstance(allow, bool):
            raise GateFileError(
                f"{source}: evaluators.{name}.allow_not_applicable must be true or false, "
                f"not {allow!r}"
            )
        params = rule.get("params", {})
        if not isinstance(params, dict):
            raise GateFileError(
                f"{source}: evaluators.{name}.params must be a table like {{ max_repeats = 3 }}, "
                f"not {params!r}"
            )
        rules[name] = EvaluatorRule(
            allow_not_applicable=allow,
            min_pass_rate=rate,
            max_ratio=_max_ratio(rule.get("max_ratio"), name, source),
            params=dict(params),
            cases=_case_rates(rule.get("cases", {}), f"evaluators.{name}.cases", source),
        )
    return rules or {name: EvaluatorRule() for name in ("task_completion", "tool_call_loops")}


def _judge_cassette(
    rules: dict[str, EvaluatorRule], datasets: tuple[DatasetSelection, ...], source: Path
) -> dict[str, EvaluatorRule]:
    """The judge's cassette, relative to the gate file's folder like every path in it.

    Without one, a gate on one dataset keeps its judge's replies in it (`judge.jsonl`): the
    golden and its judge's verdicts go together. On several, the file must name one.
    """
    rule = rules.get("judge")
    if rule is None:
        return rules
    cassette = rule.params.get("cassette")
    if cassette is None and len(datasets) == 1:
        path = datasets[0].path / "judge.jsonl"
    elif isinstance(cassette, str):
        path = source.parent / cassette  # an absolute path stays as it is
    else:
        return rules  # none on several datasets, or not a path: the judge says which
    placed = dataclasses.replace(rule, params={**rule.params, "cassette": str(path)})
    return {**rules, "judge": placed}


def _max_ratio(value: Any, name: str, source: Path) -> float | None:
    if value is None:
        return None
    if name not in MEASURES:
        raise GateFileError(
            f"{source}: evaluators.{name}.max_ratio applies to a measure only "
            f"({', '.join(sorted(MEASURES))}); {name} is a grade: use min_pass_rate"
        )
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise GateFileError(
            f"{source}: evaluators.{name}.max_ratio must be a number above 0 (1.2: at most 20% "
            f"more than the baseline), not {value!r}"
        )
    return float(value)


def _case_rates(data: Any, where: str, source: Path) -> dict[str, float]:
    if not isinstance(data, dict):
        raise GateFileError(f'{source}: {where} must be a table like {{ "obs-003" = 1.0 }}')
    for key, rate in data.items():
        session, _, turn = key.partition(":")
        if not session or (turn and not turn.isdecimal()):
            raise GateFileError(
                f"{source}: {where} key {key!r} must be SESSION or SESSION:TURN (a turn number)"
            )
        if isinstance(rate, bool) or not isinstance(rate, int | float) or not 0 <= rate <= 1:
            raise GateFileError(f"{source}: {where}.{key} must be a pass rate in [0, 1]")
    return {key: float(rate) for key, rate in data.items()}


def _int(
    data: dict[str, Any], key: str, default: int, least: int, source: Path, prefix: str = "gate."
) -> int:
    value = data.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise GateFileError(
            f"{source}: {prefix}{key} must be a whole number >= {least}, not {value!r}"
        )
    return value


def _alpha(value: Any, source: Path) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 1:
        raise GateFileError(f"{source}: gate.alpha must be between 0 and 1, not {value!r}")
    return float(value)
