"""Gate reports: JSON for machines, Markdown for the pull request, JUnit XML for CI systems.

Regressions come first, worst (most significant) evaluator first; each failing case carries its
evaluator's explanation, so a reader sees the evidence without opening a trace.
"""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from ci._gate import CaseResult, Verdict

MAX_CASES_IN_SUMMARY = 20


def verdict_json(verdict: Verdict) -> dict[str, Any]:
    """The verdict as JSON-able data."""
    return {
        "passed": verdict.passed,
        "exit_code": verdict.exit_code,
        "repeats": verdict.repeats,
        "alpha": verdict.alpha,
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
                "latency_ratio": _interval(v.ratio),
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
                "explanation": c.explanation,
            }
            for c in verdict.cases
        ],
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
    head = "✅ **plangate: pass**" if verdict.passed else "❌ **plangate: regression**"
    lines = [
        f"{head} ({verdict.repeats} repeats per side, α = {verdict.alpha})",
        "",
        "| evaluator | verdict | regressed | improved | flaky | pass^k baseline → candidate | p "
        "| Δ score (95% CI) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for v in sorted(verdict.evaluators, key=lambda v: (not v.failed, v.p_value)):
        lines.append(
            f"| {v.evaluator} | {'fail' if v.failed else 'pass'}: {v.reason} | {v.regressed} | "
            f"{v.improved} | {v.flaky} | {v.baseline_pass_hat_k:.3f} → "
            f"{v.candidate_pass_hat_k:.3f} | {v.p_value:.3g} | {_ci(v.score_difference)} |"
        )
    worst = [c for c in verdict.cases if c.status == "regressed"]
    flaky = [c for c in verdict.cases if c.status == "flaky"]
    if worst:
        lines += ["", f"**Regressed cases** ({len(worst)}):", ""]
        lines += [_case_line(c) for c in worst[:MAX_CASES_IN_SUMMARY]]
    if flaky:
        lines += ["", f"**Flaky cases** ({len(flaky)}, not counted as regressions):", ""]
        lines += [_case_line(c) for c in flaky[:MAX_CASES_IN_SUMMARY]]
    return "\n".join(lines) + "\n"


def _case_line(case: CaseResult) -> str:
    outcomes = f"{_marks(case.baseline)} → {_marks(case.candidate)}"
    return (
        f"- `{case.dataset}` {case.session_id} turn {case.turn_index}, {case.evaluator} "
        f"({outcomes}): {case.explanation}"
    )


def _marks(outcomes: tuple[bool, ...]) -> str:
    return "".join("✓" if ok else "✗" for ok in outcomes)


def junit(verdict: Verdict) -> str:
    """JUnit XML: one test case per golden turn and evaluator; a regression is a failure."""
    suites = ET.Element("testsuites", name="plangate")
    for name in [v.evaluator for v in verdict.evaluators]:
        cases = [c for c in verdict.cases if c.evaluator == name]
        suite = ET.SubElement(
            suites,
            "testsuite",
            name=name,
            tests=str(len(cases)),
            failures=str(sum(c.status == "regressed" for c in cases)),  # flaky ones are skipped
            skipped=str(sum(c.status == "flaky" for c in cases)),
            errors="0",
        )
        for case in cases:
            element = ET.SubElement(
                suite,
                "testcase",
                classname=f"{case.dataset}.{case.session_id}",
                name=f"turn {case.turn_index} {name}",
            )
            if case.status == "regressed":
                failure = ET.SubElement(element, "failure", message=case.explanation)
                failure.text = (
                    f"baseline {_marks(case.baseline)}, candidate {_marks(case.candidate)}"
                )
            elif case.status == "flaky":
                ET.SubElement(element, "skipped", message=f"flaky: {_marks(case.candidate)}")
    return ET.tostring(suites, encoding="unicode", xml_declaration=True)


def write_reports(verdict: Verdict, folder: str | Path) -> dict[str, Path]:
    """Write verdict.json, summary.md and junit.xml; append the summary to $GITHUB_STEP_SUMMARY."""
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    files = {
        "json": out / "verdict.json",
        "markdown": out / "summary.md",
        "junit": out / "junit.xml",
    }
    files["json"].write_text(json.dumps(verdict_json(verdict), indent=2) + "\n", encoding="utf-8")
    files["markdown"].write_text(markdown(verdict), encoding="utf-8")
    files["junit"].write_text(junit(verdict), encoding="utf-8")
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary:
        with open(summary, "a", encoding="utf-8") as handle:
            handle.write(markdown(verdict))
    return files
