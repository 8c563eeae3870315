"""Durations and sums to the last bit, as the evaluators computed them with pandas.

The stored scores (tests/evaluators/data) compare them exactly: pandas splits a duration into
whole seconds and the rest, and sums a group pairwise or, where the column has a NaN, by Kahan
summation. The evaluators that report seconds share these two.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

Ints = npt.NDArray[np.int64]
Floats = npt.NDArray[np.float64]


def seconds_between(begin: npt.NDArray[np.number], end: npt.NDArray[np.number]) -> Floats:
    """Seconds from `begin` to `end` (microseconds), as pandas' `total_seconds` gives them.

    Whole seconds plus the rest divided, not the microseconds divided: the last digit differs.
    """
    whole, rest = np.divmod(end - begin, 1e6)
    return np.asarray(whole + rest / 1e6, dtype=np.float64)


def group_sums(values: Floats, firsts: Ints) -> Floats:
    """Sums of stretches of `values`, as pandas' groupby sums them (NaN skipped).

    pandas adds each stretch with `np.add.reduceat` when no value is NaN, and otherwise with
    Kahan summation: the same order of additions gives the same last digit.
    """
    if not len(firsts):
        return np.zeros(0)
    if not np.isnan(values).any():
        return np.asarray(np.add.reduceat(values, firsts), dtype=np.float64)
    sizes = np.diff(np.append(firsts, len(values)))
    total, compensation = np.zeros(len(firsts)), np.zeros(len(firsts))
    for step in range(int(sizes.max())):
        live = np.flatnonzero(sizes > step)
        value = values[firsts[live] + step]
        known = ~np.isnan(value)
        adjusted = value - compensation[live]
        added = total[live] + adjusted
        error = (added - total[live]) - adjusted
        total[live] = np.where(known, added, total[live])
        error[np.isnan(error)] = 0.0  # an infinite value: its sum stays infinite
        compensation[live] = np.where(known, error, compensation[live])
    return total
