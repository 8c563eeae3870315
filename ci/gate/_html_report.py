"""The gate's HTML report: one self-contained page to open from a CI artifact, no server needed.

Inline CSS and hand-written inline SVG, no scripts, fonts or images, and well-formed XML so
tests can parse it. It shows the verdict, the evaluator table of summary.md, a forest plot of
the per-case score changes, the latency of each side, then the regressed and flaky cases.
Every piece of text goes through `html.escape`: explanations come from user data.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from html import escape

from plangate.ci.gate._stats import Interval
from plangate.ci.gate._verdict import CaseResult, EvaluatorVerdict, Verdict

WIDTH = 1160
"""Width of each plot in CSS pixels; the page is laid out for a 1280 px window."""
LABEL = 190
"""Room left of a plot for the row labels."""
BASELINE_COLOR = "#4e79a7"
CANDIDATE_COLOR = "#e15759"
LATENCY = "latency"
FAILING = ("regressed", "below_minimum")
"""Case statuses listed as regressions (a case can fail on its own minimum pass rate)."""
Scale = Callable[[float], float]
"""Data value to x in pixels."""

CSS = """
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #222;
  margin: 0; background: #f4f5f7; }
main { max-width: 1200px; margin: 0 auto; padding: 24px 20px 48px; }
h1 { font-size: 22px; margin: 0 0 4px; } h2 { font-size: 18px; margin: 32px 0 8px; }
.verdict { display: inline-block; padding: 6px 18px; border-radius: 6px; color: #fff;
  font-size: 26px; font-weight: 700; letter-spacing: .02em; margin: 8px 0; }
.pass { background: #2e7d32; } .regression { background: #c62828; }
.undecided { background: #b26a00; }
.meta { color: #555; }
table { border-collapse: collapse; width: 100%; background: #fff; font-size: 14px; }
th, td { border: 1px solid #dde; padding: 5px 8px; text-align: left; vertical-align: top; }
th { background: #eceef3; } td.num { text-align: right; white-space: nowrap; }
td.explanation { word-break: break-word; } td.nowrap { white-space: nowrap; }
td.reason { min-width: 260px; }
.failed { color: #c62828; font-weight: 600; } .passed { color: #2e7d32; font-weight: 600; }
.ok { color: #2e7d32; } .no { color: #c62828; } .marks { font-family: monospace; }
figure { margin: 0; background: #fff; border: 1px solid #dde; padding: 8px; }
figcaption { color: #555; font-size: 13px; margin-top: 4px; }
svg { display: block; max-width: 100%; height: auto; }
svg text { font: 13px system-ui, sans-serif; fill: #333; }
.note { background: #fff8e1; border: 1px solid #f0d58c; padding: 8px 12px; }
"""


def html_report(verdict: Verdict) -> str:
    """The gate's verdict as one self-contained, well-formed HTML page.

    Args:
        verdict: The gate's decision with its evidence.

    Returns:
        The page, ready to write to report.html.
    """
    title = f"plangate: {verdict.word}"
    sections = [
        _header(verdict),
        _evaluator_table(verdict),
        _forest_plot(verdict),
        _latency_plot(verdict),
        _case_tables(verdict),
    ]
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8"/>\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1"/>\n'
        f"<title>{escape(title)}</title>\n<style>{CSS}</style>\n</head>\n"
        "<body>\n<main>\n" + "\n".join(sections) + "\n</main>\n</body>\n</html>\n"
    )


def _ranked(verdict: Verdict) -> list[EvaluatorVerdict]:
    """Failed evaluators first, most significant first, as in summary.md."""
    return sorted(verdict.evaluators, key=lambda v: (not v.failed, v.p_value))


# -- verdict and table ---------------------------------------------------------------------


def _header(verdict: Verdict) -> str:
    word = verdict.word.upper()
    css = {"pass": "pass", "regression": "regression", "cannot decide": "undecided"}[verdict.word]
    turns = {(c.dataset, c.session_id, c.turn_index) for c in verdict.cases}
    why = (
        f'<p class="note"><b>No verdict</b>: {escape(verdict.undecided)}</p>\n'
        if verdict.undecided is not None
        else ""
    )
    errors = "".join(
        f"<li>{escape(e.side)} {escape(e.session_id)} turn {e.turn_index} repeat {e.trial}: "
        f"{escape(e.message)}</li>"
        for e in verdict.errors[:20]
    )
    listed = (
        f"<h2>Errored turns ({len(verdict.errors)}), not judged</h2>\n<ul>{errors}</ul>\n"
        if errors
        else ""
    )
    return (
        "<h1>plangate gate report</h1>\n"
        f'<div class="verdict {css}">plangate: {word}</div>\n'
        f'<p class="meta"><code>{escape(verdict.baseline)}</code> → '
        f"<code>{escape(verdict.candidate)}</code>: {verdict.repeats} repeats per side, "
        f"α = {verdict.alpha:g}, {len(turns)} golden turns, {len(verdict.evaluators)} evaluators"
        f"{'; noise floor: the baseline against itself' if verdict.noise_floor else ''}; exit "
        f"code {verdict.exit_code}.</p>\n{why}{listed}"
    )


def _evaluator_table(verdict: Verdict) -> str:
    timed = any(v.ratio is not None for v in verdict.evaluators)
    head = [
        "evaluator", "verdict", "regressed", "improved", "flaky", "n/a", "noise floor",
        "pass^k baseline → candidate", "p", "Δ score (95% CI)",
        *(["candidate / baseline (95% CI)"] if timed else []),
    ]  # fmt: skip
    rows = []
    for v in _ranked(verdict):
        state = (
            '<span class="failed">fail</span>' if v.failed else '<span class="passed">pass</span>'
        )
        cells = [
            f"<td>{escape(v.evaluator)}</td>",
            f'<td class="reason">{state}: {escape(v.reason)}</td>',
            *(f'<td class="num">{n}</td>' for n in (v.regressed, v.improved, v.flaky)),
            f'<td class="num">{v.not_applicable + v.errors}</td>',
            "<td>—</td>"
            if v.noise is None
            else f"<td>{v.noise.regressed} worse, {v.noise.improved} better</td>",
            f'<td class="num">{v.baseline_pass_hat_k:.3f} → {v.candidate_pass_hat_k:.3f}</td>',
            f'<td class="num">{v.p_value:.3g}</td>',
            f'<td class="num">{_ci(v.score_difference, "+.3f")}</td>',
        ]
        if timed:
            cells.append(f'<td class="num">{_ci(v.ratio, ".2f", "×")}</td>')
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return "<h2>Evaluators</h2>\n" + _table(head, rows)


def _table(head: Sequence[str], rows: Sequence[str]) -> str:
    header = "".join(f"<th>{escape(h)}</th>" for h in head)
    return f"<table>\n<tr>{header}</tr>\n" + "\n".join(rows) + "\n</table>"


def _ci(interval: Interval | None, spec: str, unit: str = "") -> str:
    if interval is None or not _usable(interval):
        return "—"
    m, lo, hi = (format(x, spec) for x in (interval.mean, interval.low, interval.high))
    return f"{m}{unit} [{lo}, {hi}]"


def _usable(interval: Interval | None) -> bool:
    """An interval with data: finite bounds from at least one pair."""
    if interval is None or interval.n == 0:
        return False
    return all(math.isfinite(v) for v in (interval.low, interval.mean, interval.high))


# -- plot 1: score changes -------------------------------------------------------------------


def _forest_plot(verdict: Verdict) -> str:
    """Per evaluator: the per-case score changes as dots, their mean with its CI as a bar."""
    row, top = 76, 40
    names = [v.evaluator for v in _ranked(verdict)]
    changes = {name: _changes(verdict.cases, name) for name in names}
    intervals = {v.evaluator: v.score_difference for v in verdict.evaluators}
    half = _half_ticks(changes, intervals)
    height = top + row * len(names) + 34
    parts = [
        _legend_forest(),
        _axis_label(height - 8, "score change per case, candidate − baseline"),
    ]
    for i, name in enumerate(names):
        parts.append(_forest_row(name, changes[name], intervals[name], top + i * row, half))
    return (
        "<h2>Score change per evaluator</h2>\n<figure>\n"
        + _svg(height, parts, "forest plot of score changes", "forest")
        + "\n<figcaption>Each dot is one case: the mean score over the repeats, candidate minus "
        "baseline (cases without a score are left out). The bar is the mean change with its paired "
        "bootstrap 95% confidence interval; a bar clear of the dashed zero line is a real shift."
        + (" Latency's changes are seconds, on a scale of their own." if LATENCY in changes else "")
        + "</figcaption>\n</figure>"
    )


def _half_ticks(
    changes: dict[str, list[float]], intervals: dict[str, Interval | None]
) -> dict[str, list[float]]:
    """Ticks from 0 to half the x range, per unit: scores are fractions, latency's are seconds."""
    extents: dict[str, list[float]] = {}
    for name, values in changes.items():
        extents.setdefault(_unit(name), []).extend(abs(x) for x in _extent(values, intervals[name]))
    return {unit: _ticks_to(max(values, default=0.0)) for unit, values in extents.items()}


def _changes(cases: Sequence[CaseResult], name: str) -> list[float]:
    return _finite(
        c.candidate_score - c.baseline_score
        for c in cases
        if c.evaluator == name and c.baseline_score is not None and c.candidate_score is not None
    )


def _extent(changes: Sequence[float], interval: Interval | None) -> list[float]:
    bounds = [interval.low, interval.high] if interval is not None and _usable(interval) else []
    return [*changes, *bounds]


def _unit(name: str) -> str:
    return "s" if name == LATENCY else ""


def _forest_row(
    name: str,
    changes: Sequence[float],
    interval: Interval | None,
    y0: int,
    half: dict[str, list[float]],
) -> str:
    unit = _unit(name)
    ticks = half[unit]
    span = ticks[-1]

    def x(value: float) -> float:
        return LABEL + (value + span) / (2 * span) * (WIDTH - LABEL - 200)

    mid = y0 + 24
    label, suffix = (f"{name} ({unit})", f" {unit}") if unit else (name, "")
    parts = [
        f'<rect x="{LABEL}" y="{y0}" width="{x(span) - LABEL:.1f}" height="48" fill="#f6f7f9"/>',
        f'<text x="{LABEL - 12}" y="{mid + 4}" text-anchor="end">{escape(label)}</text>',
        f'<line x1="{x(0):.1f}" y1="{y0}" x2="{x(0):.1f}" y2="{y0 + 48}" stroke="#888" '
        'stroke-dasharray="4 3"/>',
    ]
    parts += _ticks([-t for t in reversed(ticks[1:])] + ticks, x, y0 + 48, unit, "+.3g")
    parts += [
        f'<circle class="dot" cx="{x(d):.1f}" cy="{mid + _jitter(i, 34):.1f}" r="3.5" '
        f'fill="{CANDIDATE_COLOR}" fill-opacity="0.4"/>'
        for i, d in enumerate(changes)
    ]
    if interval is not None and _usable(interval):
        low, high = x(interval.low), x(interval.high)
        parts += [
            f'<line class="ci" x1="{low:.1f}" y1="{mid}" x2="{high:.1f}" y2="{mid}" '
            'stroke="#222" stroke-width="3"/>',
            *(
                f'<line x1="{end:.1f}" y1="{mid - 7}" x2="{end:.1f}" y2="{mid + 7}" '
                'stroke="#222" stroke-width="2"/>'
                for end in (low, high)
            ),
            f'<rect x="{x(interval.mean) - 5:.1f}" y="{mid - 5}" width="10" height="10" '
            f'fill="#222" transform="rotate(45 {x(interval.mean):.1f} {mid})"/>',
            f'<text x="{WIDTH - 190}" y="{mid + 4}">'
            f"Δ {escape(_ci(interval, '+.3f', suffix))}</text>",
        ]
    else:
        parts.append(f'<text x="{WIDTH - 190}" y="{mid + 4}" fill="#888">no scores</text>')
    return "\n".join(parts)


def _legend_forest() -> str:
    return (
        f'<circle cx="{LABEL + 6}" cy="14" r="4" fill="{CANDIDATE_COLOR}" fill-opacity="0.5"/>'
        f'<text x="{LABEL + 16}" y="18">one case</text>'
        f'<line x1="{LABEL + 110}" y1="14" x2="{LABEL + 150}" y2="14" stroke="#222" '
        'stroke-width="3"/>'
        f'<text x="{LABEL + 158}" y="18">mean change, 95% CI</text>'
        f'<line x1="{LABEL + 320}" y1="6" x2="{LABEL + 320}" y2="22" stroke="#888" '
        'stroke-dasharray="4 3"/>'
        f'<text x="{LABEL + 328}" y="18">no change</text>'
    )


# -- plot 2: latency -------------------------------------------------------------------------


def _latency_plot(verdict: Verdict) -> str:
    """Per side: the latency evaluator's per-case wall time as a box and a strip of dots."""
    cases = [c for c in verdict.cases if c.evaluator == LATENCY]
    if not any(v.evaluator == LATENCY for v in verdict.evaluators):
        return (
            '<h2>Latency</h2>\n<p class="note">Latency wasn\'t evaluated in this gate. To see each '
            "side's wall time here, add <code>[evaluators.latency]</code> to the gate file.</p>"
        )
    sides = {
        "baseline": _finite(c.baseline_score for c in cases),
        "candidate": _finite(c.candidate_score for c in cases),
    }
    ticks = _ticks_to(max([*sides["baseline"], *sides["candidate"], 0.0]))
    span = ticks[-1]
    row, top = 84, 40
    height = top + row * 2 + 36

    def x(value: float) -> float:
        return LABEL + value / span * (WIDTH - LABEL - 40)

    parts = [_legend_latency(), _axis_label(height - 8, "wall time per case (s)")]
    parts += _ticks(ticks, x, top + row * 2 - 8, "s", ".3g")
    for i, (side, color) in enumerate(
        (("baseline", BASELINE_COLOR), ("candidate", CANDIDATE_COLOR))
    ):
        parts.append(_strip(side, sorted(sides[side]), x, top + i * row, color))
    ratio = next((v.ratio for v in verdict.evaluators if v.evaluator == LATENCY), None)
    note = f" Candidate / baseline wall time: {_ci(ratio, '.2f', '×')}." if _usable(ratio) else ""
    return (
        f"<h2>Latency per case: wall time in seconds, mean over the {verdict.repeats} repeats</h2>"
        "\n<figure>\n" + _svg(height, parts, "latency per variant", "latency") + "\n"
        "<figcaption>The latency evaluator's score is the turn's wall time. The box spans the "
        "quartiles with the median as a line; the whiskers reach the fastest and slowest case; "
        f"each dot is one case.{note}</figcaption>\n</figure>"
    )


def _strip(side: str, values: Sequence[float], x: Scale, y0: int, color: str) -> str:
    mid = y0 + 28
    parts = [
        f'<text x="{LABEL - 12}" y="{mid + 4}" text-anchor="end">{side} ({len(values)})</text>'
    ]
    if values:
        q1, median, q3 = (_quantile(values, q) for q in (0.25, 0.5, 0.75))
        parts += [
            f'<line x1="{x(values[0]):.1f}" y1="{mid}" x2="{x(values[-1]):.1f}" y2="{mid}" '
            f'stroke="{color}" stroke-width="1.5"/>',
            f'<rect class="box" x="{x(q1):.1f}" y="{mid - 16}" width="{max(x(q3) - x(q1), 1):.1f}" '
            f'height="32" fill="{color}" fill-opacity="0.15" stroke="{color}" stroke-width="1.5"/>',
            f'<line x1="{x(median):.1f}" y1="{mid - 16}" x2="{x(median):.1f}" y2="{mid + 16}" '
            f'stroke="{color}" stroke-width="3"/>',
        ]
    parts += [
        f'<circle class="dot" cx="{x(v):.1f}" cy="{mid + _jitter(i, 28):.1f}" r="3.5" '
        f'fill="{color}" fill-opacity="0.5"/>'
        for i, v in enumerate(values)
    ]
    return "\n".join(parts)


def _legend_latency() -> str:
    return (
        f'<rect x="{LABEL}" y="6" width="24" height="14" fill="{BASELINE_COLOR}" '
        f'fill-opacity="0.3" stroke="{BASELINE_COLOR}"/>'
        f'<text x="{LABEL + 30}" y="18">baseline</text>'
        f'<rect x="{LABEL + 110}" y="6" width="24" height="14" fill="{CANDIDATE_COLOR}" '
        f'fill-opacity="0.3" stroke="{CANDIDATE_COLOR}"/>'
        f'<text x="{LABEL + 140}" y="18">candidate</text>'
        f'<text x="{LABEL + 240}" y="18">box: quartiles and median · whiskers: min to max · '
        "dot: one case</text>"
    )


# -- cases -----------------------------------------------------------------------------------


def _case_tables(verdict: Verdict) -> str:
    rank = {v.evaluator: i for i, v in enumerate(_ranked(verdict))}

    def order(case: CaseResult) -> tuple[float, int, str, str, int]:
        drop = sum(case.baseline) / len(case.baseline) - sum(case.candidate) / len(case.candidate)
        return (-drop, rank.get(case.evaluator, 0), case.dataset, case.session_id, case.turn_index)

    regressed = sorted((c for c in verdict.cases if c.status in FAILING), key=order)
    flaky = sorted((c for c in verdict.cases if c.status == "flaky"), key=order)
    return "\n".join(
        [
            f"<h2>Regressed cases ({len(regressed)}), worst first</h2>",
            _cases(regressed, "No case regressed."),
            f"<h2>Flaky cases ({len(flaky)}), not counted as regressions</h2>",
            _cases(flaky, "No case was flaky."),
        ]
    )


def _cases(cases: Sequence[CaseResult], empty: str) -> str:
    if not cases:
        return f"<p>{escape(empty)}</p>"
    head = ("dataset", "session", "turn", "evaluator", "status", "baseline → candidate",
            "explanation")  # fmt: skip
    rows = [
        f'<tr><td class="nowrap">{escape(c.dataset)}</td><td class="nowrap">'
        f'{escape(c.session_id)}</td><td class="num">{c.turn_index}</td>'
        f"<td>{escape(c.evaluator)}</td><td>{escape(c.status.replace('_', ' '))}</td>"
        f'<td class="marks nowrap">{_marks(c.baseline)} → '
        f'{_marks(c.candidate)}</td><td class="explanation">{escape(c.explanation)}{_trace(c)}'
        "</td></tr>"
        for c in cases
    ]
    return _table(head, rows)


def _trace(case: CaseResult) -> str:
    """A link to the case's trace in Phoenix, when the gate exported there."""
    if not case.trace_url:
        return ""
    return f' <a class="trace" href="{escape(case.trace_url)}">trace in Phoenix</a>'


def _marks(outcomes: Sequence[bool]) -> str:
    return "".join(
        '<span class="ok">✓</span>' if ok else '<span class="no">✗</span>' for ok in outcomes
    )


# -- SVG pieces ------------------------------------------------------------------------------


def _svg(height: int, parts: Sequence[str], label: str, name: str) -> str:
    return (
        f'<svg class="{name}" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" '
        f'role="img" aria-label="{escape(label)}">\n' + "\n".join(parts) + "\n</svg>"
    )


def _ticks(values: Sequence[float], x: Scale, y: int, unit: str, spec: str) -> list[str]:
    parts = []
    for value in values:
        text = format(value, spec) if value else "0"
        parts.append(
            f'<line x1="{x(value):.1f}" y1="{y}" x2="{x(value):.1f}" y2="{y + 4}" stroke="#555"/>'
            f'<text x="{x(value):.1f}" y="{y + 16}" text-anchor="middle" font-size="11">'
            f"{escape(text)}{' ' + unit if unit else ''}</text>"
        )
    return parts


def _axis_label(y: int, text: str) -> str:
    return f'<text x="{(LABEL + WIDTH) / 2:.0f}" y="{y}" text-anchor="middle">{escape(text)}</text>'


def _jitter(index: int, spread: float) -> float:
    """A fixed vertical offset per dot (golden-ratio sequence): overlapping dots stay visible."""
    return ((index * 0.6180339887) % 1 - 0.5) * spread


def _finite(values: Iterable[float | None]) -> list[float]:
    """The numbers to plot: no None, no nan, no infinity."""
    return [v for v in values if v is not None and math.isfinite(v)]


def _quantile(ordered: Sequence[float], q: float) -> float:
    position = q * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def _ticks_to(limit: float) -> list[float]:
    """Round ticks from 0 up to the first at or past `limit`: four or so, 1, 2, 2.5 or 5 apart."""
    if limit <= 0 or not math.isfinite(limit):
        return [0.0, 0.5, 1.0]
    power = 10.0 ** math.floor(math.log10(limit / 4))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= limit / 4 * (1 - 1e-9))
    return [i * step for i in range(math.ceil(limit / step - 1e-9) + 1)]
