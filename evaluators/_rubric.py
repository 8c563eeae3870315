"""The rubric: what a turn must achieve, as the evaluators read it (checks and budgets).

A small versioned schema that golden datasets store per turn (as JSON), and that a rubric file
gives for a whole trace table: a `default` rubric and per-turn rubrics keyed by session and
turn. Every field is optional; a check without data in the rubric is not applied.

    {"version": 1,
     "default": {"plan_expected": true},
     "turns": [{"session_id": "s1", "turn_index": 0,
                "required_tools": [{"name": "refund_item",
                                    "arguments": {"order_id": "O-7001"}, "match": "subset"}],
                "order": "unordered", "forbidden_tools": ["cancel_order"],
                "answer": [{"kind": "contains", "value": "refund"}],
                "max_seconds": 30, "max_iterations": 20,
                "max_tokens": 50000, "max_cost": 0.25,
                "judge": {"question": "Did the agent refund the item and say how much?",
                          "scale": "pass_fail", "model": "openai:gpt-4.1-mini"}}]}

TOML with the same structure (`[default]`, `[[turns]]`) works too.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

from plangate.harness import PlangateError, read_text

RUBRIC_VERSION = 1

ArgumentMatch = Literal["exact", "ignore", "subset"]
"""How a call's arguments must match: equal, not compared, or the expected keys equal."""
Order = Literal["strict", "unordered", "subset", "superset"]
"""How the call sequence must match: the same sequence; the same calls in any order; only
expected calls (actual ⊆ expected); every expected call (actual ⊇ expected)."""
AnswerKind = Literal["contains", "not_contains", "regex", "json_path"]


class RubricError(PlangateError):
    """A rubric file or rubric mapping is malformed; the message names the place."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolExpectation:
    """A tool call the turn is expected to make."""

    name: str
    """Tool name."""
    arguments: Mapping[str, Any] | None = None
    """Expected arguments (None: not compared)."""
    match: ArgumentMatch = "subset"
    """How arguments are compared when given."""

    def matches(self, name: str, arguments: Mapping[str, Any] | None) -> bool:
        """Whether a call (name and parsed arguments) satisfies this expectation."""
        if name != self.name:
            return False
        if self.arguments is None or self.match == "ignore":
            return True
        actual = arguments or {}
        if self.match == "exact":
            return dict(actual) == dict(self.arguments)
        return all(key in actual and actual[key] == value for key, value in self.arguments.items())

    def describe(self) -> str:
        """`name(args)` for explanations."""
        if self.arguments is None or self.match == "ignore":
            return self.name
        text = json.dumps(self.arguments, sort_keys=True, ensure_ascii=False)
        return f"{self.name}({text if len(text) <= 120 else text[:119] + '…'})"


@dataclass(frozen=True, slots=True, kw_only=True)
class AnswerCheck:
    """A check on the turn's final answer."""

    kind: AnswerKind
    """`contains` / `not_contains` (case-insensitive text), `regex` (search), `json_path`."""
    value: str
    """The text, the pattern, or the path (`$.a.b[0]`)."""
    expected: Any = None
    """For `json_path`: the value the path must hold (None: the path must exist)."""

    def check(self, answer: str) -> str | None:
        """None when the answer passes; otherwise what is wrong."""
        if self.kind == "contains":
            ok = self.value.lower() in answer.lower()
            return None if ok else f"answer does not contain {self.value!r}"
        if self.kind == "not_contains":
            ok = self.value.lower() not in answer.lower()
            return None if ok else f"answer contains {self.value!r}"
        if self.kind == "regex":
            return (
                None if re.search(self.value, answer) else f"answer does not match /{self.value}/"
            )
        return _check_json_path(answer, self.value, self.expected)


@dataclass(frozen=True, slots=True, kw_only=True)
class JudgeQuestion:
    """A question an LLM judge answers about the turn (the `judge` evaluator asks it)."""

    question: str
    """What the judge is asked about the request, the calls and the answer."""
    scale: tuple[int, int] | None = None
    """None: the judge says pass or fail; (low, high): it gives a whole-number score."""
    pass_at: int | None = None
    """On a scale: the lowest score that passes."""
    model: str | None = None
    """The judge model (`openai:NAME`); None: the evaluator's `model` parameter."""

    def to_dict(self) -> dict[str, Any]:
        """The question as JSON-able data."""
        data: dict[str, Any] = {"question": self.question}
        data["scale"] = "pass_fail" if self.scale is None else list(self.scale)
        for key in ("pass_at", "model"):
            if getattr(self, key) is not None:
                data[key] = getattr(self, key)
        return data


@dataclass(frozen=True, slots=True, kw_only=True)
class Rubric:
    """What one turn must achieve."""

    required_tools: tuple[ToolExpectation, ...] = ()
    """Calls the turn must make."""
    order: Order = "superset"
    """How `trajectory_match` compares the calls with `required_tools`."""
    required_plan_items: tuple[str, ...] = ()
    """Texts that must each match (case-insensitive substring) a completed or blocked item."""
    forbidden_tools: tuple[str, ...] = ()
    """Tools the turn must not call."""
    answer: tuple[AnswerCheck, ...] = ()
    """Checks on the final answer."""
    plan_expected: bool | None = None
    """True: the turn must plan; False: it must not (a simple request); None: either."""
    max_seconds: float | None = None
    """Latency budget of the turn."""
    max_iterations: int | None = None
    """Model-call budget of the turn."""
    max_tokens: int | None = None
    """Token budget of the turn: prompt plus completion tokens over its model calls."""
    max_cost: float | None = None
    """Cost budget of the turn, in US dollars."""
    judge: JudgeQuestion | None = None
    """A question for an LLM judge (the `judge` evaluator)."""

    def to_dict(self) -> dict[str, Any]:
        """The rubric as JSON-able data (what golden datasets store)."""
        data: dict[str, Any] = {"version": RUBRIC_VERSION}
        if self.required_tools:
            data["required_tools"] = [
                {"name": t.name, "arguments": dict(t.arguments), "match": t.match}
                if t.arguments is not None
                else {"name": t.name}
                for t in self.required_tools
            ]
        data["order"] = self.order
        for key in ("required_plan_items", "forbidden_tools"):
            if getattr(self, key):
                data[key] = list(getattr(self, key))
        if self.answer:
            data["answer"] = [
                {
                    "kind": a.kind,
                    "value": a.value,
                    **({"expected": a.expected} if a.expected is not None else {}),
                }
                for a in self.answer
            ]
        for key in ("plan_expected", *_BUDGETS):
            if getattr(self, key) is not None:
                data[key] = getattr(self, key)
        if self.judge is not None:
            data["judge"] = self.judge.to_dict()
        return data


@dataclass(frozen=True, slots=True, kw_only=True)
class RubricSet:
    """Rubrics for a trace table: a default and per-turn ones."""

    default: Rubric | None = None
    """Applies to turns without their own rubric."""
    turns: Mapping[tuple[str, int], Rubric] = field(default_factory=dict)
    """Per (session_id, turn_index)."""

    def uses(self, field_name: str) -> bool:
        """Whether any rubric of the set sets `field_name` (lets evaluators skip work)."""
        rubrics = [self.default, *self.turns.values()]
        return any(r is not None and getattr(r, field_name) for r in rubrics)

    def lookup(self, session_id: str, turn_index: int) -> Rubric | None:
        """The rubric of one turn (its own, else the default, else None)."""
        return self.turns.get((session_id, turn_index), self.default)


_RUBRIC_KEYS = frozenset(
    {"version", "required_tools", "order", "required_plan_items", "forbidden_tools", "answer",
     "plan_expected", "max_seconds", "max_iterations", "max_tokens", "max_cost", "judge"}
)  # fmt: skip
_BUDGETS = ("max_seconds", "max_iterations", "max_tokens", "max_cost")


def rubric_from_dict(data: Mapping[str, Any], where: str = "rubric") -> Rubric:
    """Parse one rubric mapping; errors name `where` and the key."""
    unknown = sorted(set(data) - _RUBRIC_KEYS - {"session_id", "turn_index"})
    if unknown:
        raise RubricError(
            f"{where}: unknown key {unknown[0]!r}; allowed: {', '.join(sorted(_RUBRIC_KEYS))}"
        )
    version = data.get("version", RUBRIC_VERSION)
    if version != RUBRIC_VERSION:
        raise RubricError(
            f"{where}: rubric version {version!r} is not supported (expected {RUBRIC_VERSION})"
        )
    return Rubric(
        required_tools=tuple(
            _tool(t, f"{where}.required_tools[{i}]")
            for i, t in enumerate(data.get("required_tools", ()))
        ),
        order=_choice(data.get("order", "superset"), Order, f"{where}.order"),
        required_plan_items=_strings(
            data.get("required_plan_items", ()), f"{where}.required_plan_items"
        ),
        forbidden_tools=_strings(data.get("forbidden_tools", ()), f"{where}.forbidden_tools"),
        answer=tuple(
            _answer(a, f"{where}.answer[{i}]") for i, a in enumerate(data.get("answer", ()))
        ),
        plan_expected=_optional(data, "plan_expected", bool, where),
        max_seconds=_budget(data, "max_seconds", (int, float), where),
        max_iterations=_budget(data, "max_iterations", int, where),
        max_tokens=_budget(data, "max_tokens", int, where),
        max_cost=_budget(data, "max_cost", (int, float), where),
        judge=_judge(data["judge"], f"{where}.judge") if data.get("judge") is not None else None,
    )


def load_rubrics(path: str | Path) -> RubricSet:
    """Read a rubric file (JSON or TOML): `{"default": {...}, "turns": [{...}, ...]}`."""
    source = Path(path)
    text = read_text(source, "rubric file", RubricError)
    try:
        data = tomllib.loads(text) if source.suffix == ".toml" else json.loads(text)
    except (json.JSONDecodeError, tomllib.TOMLDecodeError, RecursionError) as exc:
        raise RubricError(
            f"{source}: not valid {'TOML' if source.suffix == '.toml' else 'JSON'}: {exc}"
        ) from exc
    return rubrics_from_dict(data, str(source))


def rubrics_from_dict(data: Any, where: str = "rubrics") -> RubricSet:
    """Parse a rubric set mapping."""
    if not isinstance(data, Mapping):
        raise RubricError(f"{where}: expected an object with 'default' and/or 'turns'")
    unknown = sorted(set(data) - {"version", "default", "turns"})
    if unknown:
        raise RubricError(f"{where}: unknown key {unknown[0]!r}; allowed: default, turns, version")
    default = rubric_from_dict(data["default"], f"{where}: default") if "default" in data else None
    turns: dict[tuple[str, int], Rubric] = {}
    for index, entry in enumerate(data.get("turns", ())):
        place = f"{where}: turns[{index}]"
        if not isinstance(entry, Mapping) or "session_id" not in entry or "turn_index" not in entry:
            raise RubricError(f"{place}: each turn rubric needs 'session_id' and 'turn_index'")
        turns[(str(entry["session_id"]), int(entry["turn_index"]))] = rubric_from_dict(entry, place)
    return RubricSet(default=default, turns=turns)


def _tool(data: Any, where: str) -> ToolExpectation:
    if isinstance(data, str):
        return ToolExpectation(name=data)
    if not isinstance(data, Mapping) or not isinstance(data.get("name"), str):
        raise RubricError(f"{where}: expected a tool name or {{'name': ..., 'arguments': {{...}}}}")
    arguments = data.get("arguments")
    if arguments is not None and not isinstance(arguments, Mapping):
        raise RubricError(f"{where}.arguments: expected an object")
    match = _choice(data.get("match", "subset"), ArgumentMatch, f"{where}.match")
    return ToolExpectation(name=data["name"], arguments=arguments, match=match)


def _answer(data: Any, where: str) -> AnswerCheck:
    if not isinstance(data, Mapping) or not isinstance(data.get("value"), str):
        raise RubricError(f"{where}: expected {{'kind': ..., 'value': '...'}}")
    kind = _choice(data.get("kind", "contains"), AnswerKind, f"{where}.kind")
    if kind == "regex":
        try:
            re.compile(data["value"])
        except re.error as exc:
            raise RubricError(f"{where}.value: not a valid regular expression ({exc})") from exc
    return AnswerCheck(kind=kind, value=data["value"], expected=data.get("expected"))


def _judge(data: Any, where: str) -> JudgeQuestion:
    if not isinstance(data, Mapping) or not isinstance(data.get("question"), str):
        raise RubricError(f"{where}: expected {{'question': '...', 'scale': 'pass_fail'}}")
    if not data["question"].strip():
        raise RubricError(f"{where}.question: is empty; ask the judge something")
    unknown = sorted(set(data) - {"question", "scale", "pass_at", "model"})
    if unknown:
        raise RubricError(
            f"{where}: unknown key {unknown[0]!r}; allowed: model, pass_at, question, scale"
        )
    model = _optional(data, "model", str, where)
    if model is not None and not model.startswith("openai:"):
        raise RubricError(f"{where}.model: {model!r} is not a judge model; use openai:NAME")
    scale = data.get("scale", "pass_fail")
    if scale == "pass_fail":
        if data.get("pass_at") is not None:
            raise RubricError(f"{where}.pass_at: only a numeric scale has one")
        return JudgeQuestion(question=data["question"], model=model)
    low, high = _scale(scale, f"{where}.scale")
    pass_at = _optional(data, "pass_at", int, where)
    if pass_at is None or not low <= pass_at <= high:
        raise RubricError(
            f"{where}.pass_at: a scale of {low} to {high} needs the lowest passing score, "
            f"a whole number from {low} to {high}"
        )
    return JudgeQuestion(question=data["question"], scale=(low, high), pass_at=pass_at, model=model)


def _scale(value: Any, where: str) -> tuple[int, int]:
    whole = isinstance(value, Sequence) and not isinstance(value, str) and len(value) == 2
    if not whole or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise RubricError(f"{where}: {value!r} is not 'pass_fail' or [LOW, HIGH] (whole numbers)")
    if value[0] >= value[1]:
        raise RubricError(f"{where}: {list(value)!r}: LOW must be below HIGH")
    return int(value[0]), int(value[1])


def _choice(value: Any, kind: Any, where: str) -> Any:
    allowed = get_args(kind)
    if value not in allowed:
        raise RubricError(f"{where}: {value!r} is not one of {', '.join(map(repr, allowed))}")
    return value


def _strings(value: Any, where: str) -> tuple[str, ...]:
    if (
        not isinstance(value, Sequence)
        or isinstance(value, str)
        or not all(isinstance(v, str) for v in value)
    ):
        raise RubricError(f"{where}: expected a list of strings")
    return tuple(value)


def _optional(data: Mapping[str, Any], key: str, kind: Any, where: str) -> Any:
    value = data.get(key)
    if value is None:
        return None
    if isinstance(value, bool) and kind is not bool or not isinstance(value, kind):
        raise RubricError(f"{where}.{key}: {value!r} has the wrong type")
    return value


def _budget(data: Mapping[str, Any], key: str, kind: Any, where: str) -> Any:
    """An optional budget: a number of `kind`, not negative (and finite)."""
    value = _optional(data, key, kind, where)
    if value is not None and not 0 <= value < float("inf"):
        raise RubricError(f"{where}.{key}: {value!r} is not a budget; expected a number >= 0")
    return value


_PATH_PART = re.compile(r"\.([A-Za-z_][\w-]*)|\[(\d+)\]|\[['\"]([^'\"]+)['\"]\]")


def _check_json_path(answer: str, path: str, expected: Any) -> str | None:
    try:
        value: Any = json.loads(answer)
    except (json.JSONDecodeError, RecursionError):
        return f"answer is not JSON, so {path} cannot be read"
    rest = path[1:] if path.startswith("$") else path
    position = 0
    while position < len(rest):
        match = _PATH_PART.match(rest, position)
        if match is None:
            return f"json path {path!r} is malformed at {rest[position:]!r}"
        key, index, quoted = match.groups()
        step: Any = int(index) if index is not None else (key or quoted)
        try:
            value = value[step]
        except (KeyError, IndexError, TypeError):
            return f"answer has no {path}"
        position = match.end()
    if expected is not None and value != expected:
        return f"answer {path} is {value!r}, expected {expected!r}"
    return None
