"""A run's budget: the tokens or dollars a run's turns may spend before the rest are not run.

`plangate gate` and `plangate replay` share one `RunBudget` over all their turns (a gate's both
sides and every repeat). Before a turn starts (inside the run's concurrency limit) the caller
asks `reached()`; a turn that is not started gets a trace table of its own (`not_run_table`):
one AGENT row whose stop reason is `not_run`, which every evaluator scores as an `error`. After a
turn finishes, `spend` adds what its spans record: total tokens (the `tokens` evaluator) and US
dollars (the `cost` evaluator, priced with genai-prices, or as `price_as`). Turns already in
flight when the budget is crossed finish and are kept, so the overshoot is at most the turns in
flight (`--jobs`).

A finished turn whose spend is unknown (model calls without token counts, a model genai-prices
cannot price) never counts as zero: from then on the budget cannot be kept, and it stops the run
as if reached, naming why. A turn that ended in an infrastructure error with nothing counted
spent nothing: a failed model call is not billed.
"""

from __future__ import annotations

import uuid
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from plangate.evaluators import EvaluatorError, evaluate
from plangate.evaluators.scores import EVALUATOR, EXPLANATION, SCORE
from plangate.harness import PlangateError
from plangate.replay.schema import (
    ERROR_STOP_REASONS,
    MODEL_NAME,
    NOT_RUN,
    SESSION_ID,
    SPAN_KIND,
    STOP_REASON,
    TURN_INDEX,
    build_table,
)


class BudgetError(PlangateError):
    """A budget that cannot be kept before anything runs (a dollar budget on an unpriced model)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class BudgetLimits:
    """A run's budget as configured: a gate file's `[gate]` keys, or a command's flags."""

    max_tokens: int | None = None
    """The most tokens the run's finished turns may use (None: no limit)."""
    max_usd: float | None = None
    """The most US dollars they may cost (None: no limit)."""
    price_as: str | None = None
    """Price every model call as this model (a genai-prices name), whatever model it names."""

    def over(self, other: BudgetLimits) -> BudgetLimits:
        """These limits, with `other`'s where these are unset (flags over a gate file)."""
        return BudgetLimits(
            max_tokens=self.max_tokens if self.max_tokens is not None else other.max_tokens,
            max_usd=self.max_usd if self.max_usd is not None else other.max_usd,
            price_as=self.price_as if self.price_as is not None else other.price_as,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class BudgetUse:
    """What a run's budget allowed and what the run spent: for reports."""

    max_tokens: int | None
    max_usd: float | None
    tokens: int
    """Total tokens of the finished turns."""
    usd: float
    """Their cost in US dollars (counted only under a dollar budget)."""
    finished: int
    """Turns run to their end (their spend counted)."""
    not_run: int
    """Turns not started: the budget was reached (or could not be kept) first."""
    stopped: str | None
    """Why the budget stopped the run, when it did."""
    unknown: tuple[str, ...] = ()
    """The measures (`tokens`, `cost`) a finished turn did not report: their totals are at
    least what is shown."""

    @property
    def line(self) -> str:
        """`200,000 tokens, 201,345 tokens spent over 12 turn(s); 5 turn(s) not run`."""
        text = f"{_limit(self.max_tokens, self.max_usd)}, {_spent(self)} spent over "
        text += f"{self.finished} turn(s)"
        return text + (f"; {self.not_run} turn(s) not run" if self.not_run else "")


@dataclass(slots=True, kw_only=True)
class RunBudget:
    """The tokens and dollars a run may spend, and what its finished turns have spent."""

    max_tokens: int | None = None
    """Stop starting turns once the finished ones used this many tokens (None: no limit)."""
    max_usd: float | None = None
    """... or cost this many US dollars (None: no limit)."""
    price_as: str | None = None
    """Price every model call as this model (genai-prices' name), whatever model it names."""
    tokens: int = 0
    usd: float = 0.0
    finished: int = 0
    not_run: int = 0
    broken: str | None = None
    """Why the budget cannot be kept (a finished turn's spend is unknown); None while it can."""
    unknown: set[str] = field(default_factory=set)
    """The measures a finished turn did not report (`tokens`, `cost`)."""
    skipped: set[Hashable] = field(default_factory=set)
    """The keys `skip` was given: which turns were not run, as the caller names them."""

    @classmethod
    def of(cls, limits: BudgetLimits) -> RunBudget:
        """A fresh budget with these limits, nothing spent."""
        return cls(max_tokens=limits.max_tokens, max_usd=limits.max_usd, price_as=limits.price_as)

    @property
    def limited(self) -> bool:
        """A limit is set: the run is budgeted."""
        return self.max_tokens is not None or self.max_usd is not None

    def reached(self) -> bool:
        """No more turns may start: a limit is reached, or the budget cannot be kept."""
        if self.broken is not None:
            return True
        over_tokens = self.max_tokens is not None and self.tokens >= self.max_tokens
        return over_tokens or (self.max_usd is not None and self.usd >= self.max_usd)

    def spend(self, table: pa.Table | None) -> None:
        """Add a finished turn's tokens and dollars, from its trace table."""
        if not self.limited or table is None:
            return
        self.finished += 1
        measures = [("tokens", self.max_tokens), ("cost", self.max_usd)]
        names = [name for name, limit in measures if limit is not None]
        params = {"cost": {"price_as": self.price_as}} if self.price_as else {}
        for row in evaluate(_measured(table), names=names, params=params).to_pylist():
            if row[SCORE] is not None:
                self._add(row[EVALUATOR], row[SCORE])
            elif not _errored(table):  # no model calls: unknown, too
                self.unknown.add(row[EVALUATOR])
                if self.broken is None:
                    self.broken = _unknown(row[EVALUATOR], row[EXPLANATION], self.describe())

    def _add(self, name: str, value: float) -> None:
        if name == "tokens":
            self.tokens += round(value)
        else:
            self.usd += value

    def describe(self) -> str:
        """The limits: `200,000 tokens`, `$5`, `200,000 tokens or $5`."""
        return _limit(self.max_tokens, self.max_usd)

    def reason(self) -> str:
        """Why turns are not run: `the run's budget of 200,000 tokens was reached (...)`."""
        if self.broken is not None:
            return self.broken
        return f"the run's budget of {self.describe()} was reached ({_spent(self.use())} spent)"

    def skip(self, key: Hashable = None) -> str:
        """Count a turn not run (kept by `key`, when given); the reason to record on it."""
        self.not_run += 1
        if key is not None:
            self.skipped.add(key)
        return self.reason()

    def use(self) -> BudgetUse:
        """What was allowed and spent, so far."""
        return BudgetUse(
            max_tokens=self.max_tokens, max_usd=self.max_usd, tokens=self.tokens,
            usd=self.usd, finished=self.finished, not_run=self.not_run, stopped=self.broken,
            unknown=tuple(sorted(self.unknown)),
        )  # fmt: skip


def check_priceable(budget: RunBudget, model: str, where: str = "--budget-usd") -> None:
    """Before anything runs: a dollar budget needs a model genai-prices can price.

    `openai:NAME` must be a model genai-prices knows, `sim:NAME` (simulated, no price) needs
    `price_as`; a cassette's recorded models are checked as its turns finish.

    Raises:
        BudgetError: The budget cannot be kept; the message says what to do instead.
    """
    if budget.max_usd is None:
        return
    if budget.price_as is not None:
        problem = unpriced(budget.price_as, budget.price_as)
        if problem is not None:
            raise BudgetError(f"--price-as {budget.price_as!r}: {problem}; name a model it knows")
        return
    kind, _, name = model.partition(":")
    advice = (
        "give a token budget (--budget-tokens N) or price it as a known model (--price-as MODEL)"
    )
    needs = f"{where}: a dollar budget needs a model with a price"
    if kind == "sim":
        raise BudgetError(
            f"{needs}, and the simulated model {model!r} has none; {advice}, e.g. gpt-4o-mini"
        )
    problem = unpriced(name, None) if kind == "openai" else None
    if problem is not None:
        raise BudgetError(f"{needs}, and genai-prices cannot price {model!r} ({problem}); {advice}")


def check_recording_priced(
    budget: RunBudget, recorded: pa.Table, where: str = "--budget-usd"
) -> None:
    """Before a cassette replay: a dollar budget needs a price for what the recording spent.

    A cassette replays the recorded model calls, and counts what their spans record: a recorded
    turn without a known cost (a simulated model's, a model genai-prices does not know) would
    stop the run after it, so it is refused before anything runs. Errored turns spent nothing.

    Raises:
        BudgetError: A recorded turn's cost is unknown; the message names the turn.
    """
    if budget.max_usd is None or budget.price_as is not None or not recorded.num_rows:
        return
    errored = {
        (row[SESSION_ID], row[TURN_INDEX])
        for row in recorded.select([SESSION_ID, TURN_INDEX, STOP_REASON]).to_pylist()
        if row[STOP_REASON] in ERROR_STOP_REASONS
    }
    for row in evaluate(_measured(recorded), names=["cost"]).to_pylist():
        if row[SCORE] is None and (row[SESSION_ID], row[TURN_INDEX]) not in errored:
            raise BudgetError(
                f"{where}: a dollar budget needs a price, and the cassette's session "
                f"{row[SESSION_ID]!r} turn {row[TURN_INDEX]} has none ({row[EXPLANATION]}); "
                "give a token budget (--budget-tokens N) or price it as a known model "
                "(--price-as MODEL)"
            )


def unpriced(model: str, price_as: str | None) -> str | None:
    """Why a call to `model` (priced as `price_as`) has no price, or None when it has one."""
    probe = build_table(
        [
            {**_ROW, SPAN_KIND: "AGENT", "span_id": "a", "name": "agent.turn"},
            {
                **_ROW,
                SPAN_KIND: "LLM",
                "span_id": "b",
                "parent_span_id": "a",
                "name": "llm",
                MODEL_NAME: model,
                "tokens_prompt": 1,
                "tokens_completion": 1,
            },
        ]  # fmt: skip
    )
    params = {"cost": {"price_as": price_as}} if price_as else {}
    try:
        row = evaluate(probe, names=["cost"], params=params).to_pylist()[0]
    except EvaluatorError as exc:
        return str(exc).rpartition(": ")[2]
    return None if row[SCORE] is not None else str(row[EXPLANATION])


_ROW: dict[str, Any] = {
    "session_id": "probe", "turn_index": 0, "trace_id": "probe", "status_code": "OK",
    "source": "plangate",
}  # fmt: skip


def not_run_table(session_id: str, turn_index: int, reason: str, variant: str | None) -> pa.Table:
    """A turn that was not run: one AGENT row, stop reason `not_run`, the reason as its status."""
    return build_table(
        [
            {
                "session_id": session_id,
                "turn_index": turn_index,
                "trace_id": uuid.uuid4().hex,
                "span_id": uuid.uuid4().hex[:16],
                SPAN_KIND: "AGENT",
                "name": "agent.turn",
                "status_code": "ERROR",
                "status_message": reason,
                "source": "plangate",
                "variant": variant,
                STOP_REASON: NOT_RUN,
            }
        ]  # fmt: skip
    )


def _measured(table: pa.Table) -> pa.Table:
    """The table without stop reasons: what an errored turn's spans record still counts."""
    index = table.schema.get_field_index(STOP_REASON)
    return table.set_column(index, STOP_REASON, pa.nulls(table.num_rows, pa.string()))


def _errored(table: pa.Table) -> bool:
    reasons = table[STOP_REASON].drop_null().to_pylist()
    return any(reason in ERROR_STOP_REASONS for reason in reasons)


def _unknown(name: str, explanation: str, limit: str) -> str:
    what = "tokens" if name == "tokens" else "cost"
    advice = "--budget-tokens" if name == "cost" else "a model that reports token usage"
    return (
        f"the run's budget of {limit} cannot be kept: a finished turn's {what} is unknown "
        f"({explanation}); use {advice}" + (" or --price-as MODEL" if name == "cost" else "")
    )


def _limit(max_tokens: int | None, max_usd: float | None) -> str:
    parts = []
    if max_tokens is not None:
        parts.append(f"{max_tokens:,} tokens")
    if max_usd is not None:
        parts.append(f"${max_usd:g}")
    return " or ".join(parts)


def _spent(use: BudgetUse) -> str:
    """What the finished turns spent: at least, for a measure a turn did not report."""
    parts = []
    if use.max_tokens is not None:
        parts.append(("at least " if "tokens" in use.unknown else "") + f"{use.tokens:,} tokens")
    if use.max_usd is not None:
        parts.append(("at least " if "cost" in use.unknown else "") + f"${use.usd:,.4f}")
    return ", ".join(parts)
