"""Gate reports: JSON for machines, Markdown for the pull request, JUnit XML for CI systems.

The HTML page for people, with plots, is built in `_html_report`.

Regressions come first, worst (most significant) evaluator first; each failing case carries its
evaluator's explanation, so a reader sees the evidence without opening a trace. A gate that
cannot decide says why at the top, and lists the errored turns; cases an evaluator could not
judge are counted (n/a), and in JUnit they are skipped with the reason.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa

from plangate.ci._json import json_text
from plangate.ci.gate._html_report import html_report
from plangate.ci.gate._verdict import CaseResult, NoiseFloor, Verdict, figure
from plangate.harness import replace_folder, staging_folder, write_text_atomic, writing
from plangate.replay import default_redactor, write_parquet

MAX_CASES_IN_SUMMARY = 20
FAILING = ("regressed", "below_minimum")
"""Case statuses that are failures in the reports."""


def verdict_json(verdict: Verdict) -> dict[str, Any]:
    """The verdict as JSON-able data."""
    return {
        "passed": verdict.passed,
        "verdict": verdict.word,
        "exit_code": verdict.exit_code,
        "undecided": verdict.undecided,
        "warnings": list(verdict.warnings),
        "budget": _budget(verdict),
        "errors": [
            {
                "side": e.side,
                "session_id": e.session_id,
                "turn_index": e.turn_index,
                "trial": e.trial,
                "message": e.message,
            }
            for e in verdict.errors
        ],
        "repeats": verdict.repeats,
        "alpha": verdict.alpha,
        "baseline": verdict.baseline,
        "candidate": verdict.candidate,
        "noise_floor": verdict.noise_floor,
        "evaluators": [
            {
                "evaluator": v.evaluator,
                "failed": v.failed,
                "reason": v.reason,
                "cases": v.cases,
                "regressed": v.regressed,
                "improved": v.improved,
                "flaky": v.flaky,
                "p_value": v.p_value,
                "baseline_pass_hat_k": v.baseline_pass_hat_k,
                "candidate_pass_hat_k": v.candidate_pass_hat_k,
                "candidate_pass_rate": v.candidate_pass_rate,
                "min_pass_rate": v.min_pass_rate,
                "score_difference": _interval(v.score_difference),
                "ratio": _interval(v.ratio),
                "baseline_total": v.baseline_total,
                "candidate_total": v.candidate_total,
                "measured_cases": v.measured,
                "noise_floor": _noise(v.noise),
                "p_beyond_noise": v.p_beyond_noise,
                "below_minimum": v.below_minimum,
                "not_applicable": v.not_applicable,
                "errors": v.errors,
                "datasets": {
                    name: {"baseline_pass_hat_k": base, "candidate_pass_hat_k": cand}
                    for name, (base, cand) in v.datasets.items()
                },
            }
            for v in verdict.evaluators
        ],
        "cases": [
            {
                "dataset": c.dataset,
                "session_id": c.session_id,
                "turn_index": c.turn_index,
                "evaluator": c.evaluator,
                "status": c.status,
                "baseline": list(c.baseline),
                "candidate": list(c.candidate),
                "noise": list(c.noise),
                "baseline_not_applicable": c.baseline_na,
                "candidate_not_applicable": c.candidate_na,
                "baseline_errors": c.baseline_errors,
                "candidate_errors": c.candidate_errors,
                "baseline_pass_hat_k": c.baseline_pass_hat_k,
                "candidate_pass_hat_k": c.candidate_pass_hat_k,
                "baseline_score": c.baseline_score,
                "candidate_score": c.candidate_score,
                "min_pass_rate": c.min_pass_rate,
                "trace_url": c.trace_url,
                "explanation": c.explanation,
            }
            for c in verdict.cases
        ],
    }


def _budget(verdict: Verdict) -> dict[str, Any] | None:
    """The run's budget and spend, with its line (None: the gate had no budget)."""
    if verdict.budget is None:
        return None
    return {**dataclasses.asdict(verdict.budget), "summary": verdict.budget.line}


def _noise(noise: NoiseFloor | None) -> dict[str, Any] | None:
    if noise is None:
        return None
    return {
        "regressed": noise.regressed,
        "improved": noise.improved,
        "p_value": noise.p_value,
        "score_difference": _interval(noise.score_difference),
    }


def _interval(interval: Any) -> dict[str, float] | None:
    if interval is None:
        return None
    return {"mean": interval.mean, "low": interval.low, "high": interval.high, "n": interval.n}


def _ci(interval: Any) -> str:
    if interval is None or interval.n == 0:
        return "—"
    return f"{interval.mean:+.3f} [{interval.low:+.3f}, {interval.high:+.3f}]"


def markdown(verdict: Verdict) -> str:
    """A summary for the pull request: the verdict, then the worst regressions first."""
    icon = {"pass": "✅", "regression": "❌", "cannot decide": "⚠️"}[verdict.word]
    head = f"{icon} **plangate: {verdict.word}**"
    noise = ", noise floor: the baseline against itself" if verdict.noise_floor else ""
    lines = [
        f"{head}: `{verdict.baseline}` → `{verdict.candidate}` ({verdict.repeats} repeats per "
        f"side, α = {verdict.alpha}{noise})",
        "",
    ]
    if verdict.undecided is not None:
        lines += [f"**No verdict**: {verdict.undecided}", ""]
    if verdict.budget is not None:
        lines += [f"**Run budget**: {verdict.budget.line}", ""]
    lines += [
        "| evaluator | verdict | regressed | improved | flaky | n/a | noise floor | pass^k "
        "baseline → candidate | p | Δ score (95% CI) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for v in sorted(verdict.evaluators, key=lambda v: (not v.failed, v.p_value)):
        floor = "—" if v.noise is None else f"{v.noise.regressed} worse, {v.noise.improved} better"
        skipped = f"{v.not_applicable}" + (f" (+{v.errors} errored)" if v.errors else "")
        pass_hat_k = (
            f"{figure(v.baseline_pass_hat_k, '.3f')} → {figure(v.candidate_pass_hat_k, '.3f')}"
        )
        lines.append(
            f"| {v.evaluator} | {verdict.evaluator_word(v)}: {v.reason} | {v.regressed} | "
            f"{v.improved} | {v.flaky} | {skipped} | {floor} | {pass_hat_k} | "
            f"{figure(v.p_value, '.3g')} | {_ci(v.score_difference)} |"
        )
    lines += _measures(verdict)
    failed = {v.evaluator for v in verdict.evaluators if v.failed}
    worst = sorted(
        (c for c in verdict.cases if c.status in FAILING),
        key=lambda c: c.evaluator not in failed,  # the failing evaluators' cases first
    )
    flaky = [c for c in verdict.cases if c.status == "flaky"]
    if worst:
        lines += ["", f"**Regressed cases** ({len(worst)}):", ""]
        lines += [_case_line(c) for c in worst[:MAX_CASES_IN_SUMMARY]]
    if flaky:
        lines += ["", f"**Flaky cases** ({len(flaky)}, not counted as regressions):", ""]
        lines += [_case_line(c) for c in flaky[:MAX_CASES_IN_SUMMARY]]
    if verdict.warnings:
        lines += ["", f"**Warnings** ({len(verdict.warnings)}):", ""]
        lines += [f"- {w}" for w in verdict.warnings[:MAX_CASES_IN_SUMMARY]]
    if verdict.errors:
        lines += ["", f"**Errored turns** ({len(verdict.errors)}, not judged):", ""]
        lines += [
            f"- {e.side} {e.session_id} turn {e.turn_index} repeat {e.trial}: {e.message}"
            for e in verdict.errors[:MAX_CASES_IN_SUMMARY]
        ]
    return "\n".join(lines) + "\n"


UNITS = {"latency": ("", " s", ".2f"), "tokens": ("", " tokens", ",.0f"), "cost": ("$", "", ",.4f")}
"""How a measure's totals are written: prefix, suffix, format."""


def _measures(verdict: Verdict) -> list[str]:
    """What each side measured (seconds, tokens, dollars): totals, per case, the ratio."""
    measured = [(v, v.ratio) for v in verdict.evaluators if v.ratio is not None and v.measured]
    if not measured:
        return []
    lines = [
        "",
        "| measure | baseline total | candidate total | per case, baseline → candidate | "
        "candidate / baseline (95% CI) |",
        "|---|---|---|---|---|",
    ]
    for v, ratio in measured:
        before, after, spec = UNITS.get(v.evaluator, ("", "", ".3g"))
        base, cand = v.baseline_total or 0.0, v.candidate_total or 0.0
        lines.append(
            f"| {v.evaluator} | {before}{base:{spec}}{after} | {before}{cand:{spec}}{after} | "
            f"{before}{base / v.measured:{spec}}{after} → {before}{cand / v.measured:{spec}}"
            f"{after} over {v.measured} cases | {ratio.mean:.2f}× [{ratio.low:.2f}, "
            f"{ratio.high:.2f}] |"
        )
    return lines


def _case_line(case: CaseResult) -> str:
    outcomes = f"{_marks(case.baseline)} → {_marks(case.candidate)}"
    trace = f" [trace]({case.trace_url})" if case.trace_url else ""
    return (
        f"- `{case.dataset}` {case.session_id} turn {case.turn_index}, {case.evaluator} "
        f"({outcomes}): {case.explanation}{trace}"
    )


def _marks(outcomes: tuple[bool, ...]) -> str:
    return "".join("✓" if ok else "✗" for ok in outcomes)


def junit(verdict: Verdict) -> str:
    """JUnit XML: one test case per golden turn and evaluator; a regression is a failure.

    A flaky or not-applicable case is skipped with the reason; a case whose every repeat on a
    side errored is an error.
    """
    suites = ET.Element("testsuites", name="plangate")
    for name in [v.evaluator for v in verdict.evaluators]:
        cases = [c for c in verdict.cases if c.evaluator == name]
        suite = ET.SubElement(
            suites,
            "testsuite",
            name=name,
            tests=str(len(cases)),
            failures=str(sum(c.status in FAILING for c in cases)),
            skipped=str(sum(c.status in ("flaky", "n/a") for c in cases)),
            errors=str(sum(c.status == "error" for c in cases)),
        )
        for case in cases:
            element = ET.SubElement(
                suite,
                "testcase",
                classname=f"{case.dataset}.{case.session_id}",
                name=f"turn {case.turn_index} {name}",
            )
            if case.status in FAILING:
                failure = ET.SubElement(element, "failure", message=case.explanation)
                failure.text = (
                    f"baseline {_marks(case.baseline)}, candidate {_marks(case.candidate)}"
                    + (
                        f"; below the case's minimum pass rate {case.min_pass_rate:.0%}"
                        if case.below_minimum
                        else ""
                    )
                    + (f"\ntrace: {case.trace_url}" if case.trace_url else "")
                )
            elif case.status == "flaky":
                ET.SubElement(element, "skipped", message=f"flaky: {_marks(case.candidate)}")
            elif case.status == "n/a":
                ET.SubElement(element, "skipped", message=case.why_not_applicable)
            elif case.status == "error":
                ET.SubElement(element, "error", message=case.explanation)
    return ET.tostring(suites, encoding="unicode", xml_declaration=True)


REPORT_MARKER = "verdict.json"
"""The file that marks a folder as a gate's report set (the only kind of folder replaced)."""
REPORT_OWNS = ("summary.md", "junit.xml", "report.html", "scores")
"""What else a report set holds: a folder holding more is not replaced (`--force`)."""


def write_reports(
    verdict: Verdict, folder: str | Path, *, scores: Mapping[str, pa.Table] | None = None
) -> dict[str, Path]:
    """Write verdict.json, summary.md, junit.xml and report.html (and `scores/SIDE.parquet`).

    The set is written whole in a folder beside `folder`, then put in its place: a reader, or a
    kill at any point, finds the previous complete set or the new one (or, between the two
    renames, none), never new reports beside old scores. A folder that holds other files is
    refused. The summary is also appended to $GITHUB_STEP_SUMMARY when that is set.
    """
    target = Path(folder)
    texts = _texts(verdict)
    staging = staging_folder(target)
    try:
        with writing(target):  # a full or read-only disk names `folder`, not the staging folder
            files = _write_set(texts, scores or {}, staging, target)
            replace_folder(
                staging, target, what="a gate's report set", marker=REPORT_MARKER, owns=REPORT_OWNS
            )
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary:
        with writing(Path(summary)), open(summary, "a", encoding="utf-8") as handle:
            handle.write(texts["markdown"][1])
    return files


def _texts(verdict: Verdict) -> dict[str, tuple[str, str]]:
    """Each report's file name and text, redacted: a report leaves the process."""
    texts = {
        "json": (REPORT_MARKER, json_text(verdict_json(verdict)) + "\n"),
        "markdown": ("summary.md", markdown(verdict)),
        "junit": ("junit.xml", junit(verdict)),
        "html": ("report.html", html_report(verdict)),
    }
    redact = default_redactor().text
    return {key: (name, redact(text)) for key, (name, text) in texts.items()}


def _write_set(
    texts: Mapping[str, tuple[str, str]],
    scores: Mapping[str, pa.Table],
    staging: Path,
    target: Path,
) -> dict[str, Path]:
    """Every report and score table into `staging`; returns where each will be in `target`."""
    files = {}
    for key, (name, text) in texts.items():
        write_text_atomic(staging / name, text)
        files[key] = target / name
    for side, table in scores.items():
        # Stored, these become a later gate's side: `[baseline] scores = "…/baseline.parquet"`.
        write_parquet(table, staging / "scores" / f"{side}.parquet")
        files[f"{side} scores"] = target / "scores" / f"{side}.parquet"
    return files
