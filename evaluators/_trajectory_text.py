"""`trajectory_match`'s label, explanation and details, column-wise over the judged turns.

A call is described as `name(arguments cut to 80 characters)`, an expected call by
`ToolExpectation.describe`. Each distinct tool, argument text and expected call is described
once, in plain text and JSON-escaped (escaping is character by character, so an escaped
template is the template of the escaped parts); a turn's text takes them by code.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from plangate.evaluators._columns import Column, overlay, strings, text
from plangate.evaluators._frame import Ints
from plangate.evaluators._trajectory_calls import Judged
from plangate.evaluators._trajectory_codes import ORDERS, Arguments, Bools, Expectations
from plangate.evaluators._trajectory_rows import MAX_ARGUMENT_CHARS

_ORDER_NAMES = pa.array(ORDERS, pa.string())
_STRICT = ORDERS.index("strict")
_PRINTABLE_ASCII = r"[^ -~]"
"""What JSON writes as itself, besides the quote and the backslash: the rest is escaped."""


def escaped(values: pa.Array) -> pa.Array:
    """Strings as JSON writes them between the quotes (`json.dumps(s)[1:-1]`)."""
    out = pc.replace_substring(values, "\\", "\\\\")
    out = pc.replace_substring(out, '"', '\\"')
    odd = np.flatnonzero(
        np.asarray(pc.match_substring_regex(values, _PRINTABLE_ASCII).to_numpy(False), bool)
    )
    if not len(odd):
        return out
    written = [json.dumps(v)[1:-1] for v in values.take(pa.array(odd)).to_pylist()]
    return overlay(out, odd, pa.array(written, pa.string()))


def _both(texts: Sequence[str]) -> tuple[pa.Array, pa.Array]:
    return pa.array(texts, pa.string()), pa.array([json.dumps(t)[1:-1] for t in texts])


@dataclass(frozen=True, slots=True, eq=False)
class Pieces:
    """Descriptions by code, plain (index 0) and JSON-escaped (index 1)."""

    tool: tuple[pa.Array, pa.Array]
    """Per tool code: its name."""
    argument: tuple[pa.Array, pa.Array]
    """Per argument code: the text, cut."""
    check: tuple[pa.Array, pa.Array]
    """Per check: the expected call described."""
    listed: pa.Array
    """Per rubric shape: its expected calls described, as a JSON list."""

    @classmethod
    def of(cls, names: Sequence[str], arguments: Arguments, table: Expectations) -> Pieces:
        """Describe every distinct tool, argument text and expected call once."""
        texts = arguments.texts
        long = pc.greater(pc.utf8_length(texts), MAX_ARGUMENT_CHARS)
        short = pc.utf8_slice_codeunits(texts, 0, MAX_ARGUMENT_CHARS - 1)
        cut = pc.if_else(long, pc.binary_join_element_wise(short, "…", ""), texts)
        described = pa.array(table.described, pa.string())
        quoted = escaped(described)
        return cls(
            tool=_both(names),
            argument=(cut, escaped(cut)),
            check=(described, quoted),
            listed=_lists(quoted.take(pa.array(table.check)), table.base, len(table.check)),
        )

    def call(self, tool: Ints, argument: Ints, form: int) -> pa.Array:
        """Calls described: `name(arguments)`."""
        name = self.tool[form].take(pa.array(tool))
        return text(name, "(", self.argument[form].take(pa.array(argument)), ")", rows=len(tool))

    def expected(self, check: Ints, form: int) -> pa.Array:
        """Expected calls described."""
        return self.check[form].take(pa.array(check))


def columns(
    pieces: Pieces, judged: Judged, table: Expectations, matched: Ints, passed: Bools
) -> tuple[pa.Array, pa.Array, pa.Array]:
    """Label, explanation and details of the judged turns.

    A failing strict turn's single mismatch is written here; the failing turns of the other
    orders get placeholders, which the caller replaces.
    """
    rows = len(judged.slot)
    order = table.order[judged.slot]
    expected = table.size[judged.slot]
    verdict = pa.array(passed)
    said, quoted = _mismatches(pieces, judged, table, (order == _STRICT) & ~passed, matched)
    closing = _summaries(matched, expected, order, judged, rows)
    explanation = pc.if_else(verdict, closing, text(said, "; ", closing, rows=rows))
    label = pc.if_else(verdict, "match", "mismatch")
    listed = pc.if_else(verdict, "[]", text('["', quoted, '"]', rows=rows))
    actual = _lists(pieces.call(judged.tool, judged.argument, 1), judged.start, len(judged.turn))
    details = text(
        '{"actual": ', actual, ', "calls": ', judged.calls,
        ', "expected": ', pieces.listed.take(pa.array(judged.slot)),
        ', "ignored_calls": ', judged.skipped, ', "matched": ', matched,
        ', "mismatches": ', listed, ', "order": "', _ORDER_NAMES.take(pa.array(order)), '"}',
        rows=rows,
    )  # fmt: skip
    return label, explanation, details


def _summaries(matched: Ints, expected: Ints, order: Ints, judged: Judged, rows: int) -> pa.Array:
    """`k of m expected calls matched (order) in n calls[ (s plan/control calls left out)]`."""
    left_out = pc.if_else(
        pa.array(judged.skipped > 0),
        text(" (", judged.skipped, " plan/control calls left out)", rows=rows),
        "",
    )
    return text(
        matched, " of ", expected, " expected calls matched (", _ORDER_NAMES.take(pa.array(order)),
        ") in ", judged.calls, " calls", left_out, rows=rows,
    )  # fmt: skip


def _lists(inner: pa.Array, start: Ints, total: int) -> pa.Array:
    """JSON lists of strings: `inner` (JSON-escaped) cut at `start` (each list's first)."""
    quoted = text('"', inner, '"', rows=total)
    offsets = pa.array(np.append(start, total), pa.int64())
    return text(
        "[",
        pc.binary_join(pa.LargeListArray.from_arrays(offsets, quoted), ", "),
        "]",
        rows=len(start),
    )


def _mismatches(
    pieces: Pieces, judged: Judged, table: Expectations, failed: Bools, at: Ints
) -> tuple[pa.Array, pa.Array]:
    """The mismatch of each failing strict turn, plain and JSON-escaped ("" elsewhere).

    At the first place where the sequences differ: a call other than the expected one, an
    expected call missing at the end, or an extra call at the end (`at`: the matching prefix).
    The escaped text is the plain one escaped: the templates' own characters escape as
    themselves, so that is the template of the escaped parts.
    """
    rows = len(judged.slot)
    has_call = at < judged.calls
    has_expected = at < table.size[judged.slot]
    kinds = [failed & has_call & has_expected, failed & ~has_call, failed & ~has_expected]
    where: list[Ints] = []
    said: list[pa.Array] = []
    for kind, chosen in enumerate(np.flatnonzero(k) for k in kinds):
        if not len(chosen):
            continue
        call = judged.start[chosen] + at[chosen]
        last = table.size[judged.slot[chosen]] - 1  # an extra call has no expected call
        check = table.check[table.base[judged.slot[chosen]] + np.minimum(at[chosen], last)]
        where.append(chosen)
        said.append(_mismatch(kind, pieces, judged, call, check))
    blank = strings("", rows)
    if not where:
        return blank, blank
    index, plain = np.concatenate(where), pa.concat_arrays(said)
    return overlay(blank, index, plain), overlay(blank, index, escaped(plain))


def _mismatch(kind: int, pieces: Pieces, judged: Judged, call: Ints, check: Ints) -> pa.Array:
    rows = len(call)
    if kind == 1:
        return text("missing ", pieces.expected(check, 0), rows=rows)
    described = pieces.call(judged.tool[call], judged.argument[call], 0)
    number: Column = judged.number[call]
    if kind == 2:
        return text("unexpected call ", described, " (call ", number, ")", rows=rows)
    return text(
        "call ", number, " is ", described, " but the rubric expects ",
        pieces.expected(check, 0), rows=rows,
    )  # fmt: skip
