"""Across repeats: pass@k (at least one of k tries passes) and pass^k (all k tries pass).

With n tries of a task and c of them passing, pass@k = 1 - C(n-c, k) / C(n, k) and
pass^k = C(c, k) / C(n, k), averaged over tasks (the unbiased estimators; tau-bench's pass^k).
Tasks are grouped by `task_id`; a turn without one is a task tried once. Only tries that passed
or failed count: a not-applicable or errored try says nothing about the task. A task with fewer
than k such tries cannot say anything about k tries and is left out (the result says how many
were used).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from math import comb

import pandas as pd
import pyarrow as pa

from plangate.evaluators.scores import APPLICABLE, EVALUATOR, OUTCOME, PASS
from plangate.harness import PlangateError
from plangate.replay.schema import SESSION_ID, TASK_ID, TURN_INDEX


@dataclass(frozen=True, slots=True, kw_only=True)
class RepeatScore:
    """pass@k and pass^k for one k."""

    k: int
    pass_at_k: float | None
    """Mean over tasks of the chance that one of k tries passes (None: no task has k tries)."""
    pass_hat_k: float | None
    """Mean over tasks of the chance that all k tries pass."""
    tasks: int
    """Tasks with at least k tries (the ones averaged)."""


def task_outcomes(
    scores: pa.Table | pd.DataFrame, evaluator: str = "task_completion"
) -> pd.DataFrame:
    """Per task: applicable tries `n` and passes `c` for one evaluator."""
    frame = scores.to_pandas() if isinstance(scores, pa.Table) else scores
    rows = frame[frame[EVALUATOR] == evaluator]
    if rows.empty:
        raise PlangateError(f"no {evaluator!r} scores to count repeats from")
    rows = rows[rows[OUTCOME].isin(APPLICABLE)]
    task = rows[TASK_ID].where(
        rows[TASK_ID].notna(), rows[SESSION_ID] + "#" + rows[TURN_INDEX].astype(str)
    )
    grouped = (rows[OUTCOME] == PASS).groupby(task)
    return pd.DataFrame({"n": grouped.size(), "c": grouped.sum().astype(int)})


def repeat_scores(
    scores: pa.Table | pd.DataFrame,
    ks: Sequence[int] | None = None,
    evaluator: str = "task_completion",
) -> list[RepeatScore]:
    """pass@k and pass^k for each k (default 1 to the most tries of any task).

    With no applicable try at all (every turn `n/a` or an error) there is no default k: the
    list is empty, and a k asked for has no task to average (`tasks` 0, the rates None).
    """
    return outcome_repeats(task_outcomes(scores, evaluator), ks)


def outcome_repeats(outcomes: pd.DataFrame, ks: Sequence[int] | None = None) -> list[RepeatScore]:
    """`repeat_scores` from per-task tries `n` and passes `c`.

    As `task_outcomes` gives them, or summed over batches of scores (a streamed summary).
    """
    most = int(outcomes["n"].max()) if not outcomes.empty else 0
    chosen = list(ks) if ks else list(range(1, most + 1))
    return [_for_k(outcomes, k) for k in chosen]


def _check_k(n: int, c: int, k: int) -> None:
    if not 1 <= k <= n:
        raise ValueError(f"k must be between 1 and n={n!r}, got k={k!r}")
    if not 0 <= c <= n:
        raise ValueError(f"passes c must be between 0 and n={n!r}, got c={c!r}")


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased estimate of pass@k: the chance that at least one of k repeats passes.

    Computed as 1 - C(n - c, k) / C(n, k) in exact integer arithmetic.

    Args:
        n: Repeats run.
        c: Repeats that passed.
        k: Repeats drawn.

    Returns:
        The estimate in [0, 1].

    Raises:
        ValueError: If k is not in [1, n] or c is not in [0, n].
    """
    _check_k(n, c, k)
    total = comb(n, k)
    return (total - comb(n - c, k)) / total


def pass_hat_k(n: int, c: int, k: int) -> float:
    """Unbiased estimate of pass^k: the chance that all of k repeats pass.

    Computed as C(c, k) / C(n, k) in exact integer arithmetic.

    Args:
        n: Repeats run.
        c: Repeats that passed.
        k: Repeats drawn.

    Returns:
        The estimate in [0, 1].

    Raises:
        ValueError: If k is not in [1, n] or c is not in [0, n].
    """
    _check_k(n, c, k)
    return comb(c, k) / comb(n, k)


def _for_k(outcomes: pd.DataFrame, k: int) -> RepeatScore:
    if k < 1:
        raise PlangateError(f"k must be at least 1, not {k}")
    usable = outcomes[outcomes["n"] >= k]
    if usable.empty:
        return RepeatScore(k=k, pass_at_k=None, pass_hat_k=None, tasks=0)
    pairs = list(zip(usable["n"], usable["c"], strict=True))
    at = [pass_at_k(n, c, k) for n, c in pairs]
    hat = [pass_hat_k(n, c, k) for n, c in pairs]
    return RepeatScore(
        k=k, pass_at_k=sum(at) / len(at), pass_hat_k=sum(hat) / len(hat), tasks=len(usable)
    )
