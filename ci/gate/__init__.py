"""The gate: a gate file, the paired comparison of two sides, its statistics and reports.

- `_gate_file`: the gate file (TOML): datasets, sides, evaluators, thresholds;
- `_gate`: replay or read both sides, evaluate, compare case by case, decide;
- `_cases`: which golden turns a gate compares, and their rubrics;
- `_replays`: replay one side, a variant or a team's agent, k times a case;
- `_verdict`, `_scores`: the verdict's records; score tables as a side;
- `_stats`: exact tests on flips, paired bootstrap intervals, pass^k;
- `_compare`: several variants side by side (`plangate compare`);
- `_reports`, `_html_report`, `_outputs`: JSON, Markdown, JUnit and HTML reports, and what a run
  writes to disk.

The gate never imports Phoenix: whoever runs it hands it `span_processors` to export replayed
spans. Names load on first use (the pytest plugin imports this package in every pytest run).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from plangate._lazy import lazy_getattr

if TYPE_CHECKING:
    from plangate.ci.gate._cases import gate_cases
    from plangate.ci.gate._compare import Comparison, VariantScore, compare
    from plangate.ci.gate._gate import run_gate
    from plangate.ci.gate._gate_file import (
        DEFAULT_GATE,
        DatasetSelection,
        EvaluatorRule,
        GateFile,
        GateFileError,
        Side,
        load_gate,
        side_of,
    )
    from plangate.ci.gate._html_report import html_report
    from plangate.ci.gate._outputs import gate_with_reports, write_outputs
    from plangate.ci.gate._replays import ReplayRun, SpanProcessors
    from plangate.ci.gate._reports import (
        REPORT_MARKER,
        REPORT_OWNS,
        junit,
        markdown,
        verdict_json,
        write_reports,
    )
    from plangate.ci.gate._scores import Case
    from plangate.ci.gate._stats import check_bootstrap, resample_indices
    from plangate.ci.gate._verdict import CaseResult, EvaluatorVerdict, NoiseFloor, Verdict, figure
_HOME = {
    "EvaluatorRule": "plangate.ci.gate._gate_file",
    "DatasetSelection": "plangate.ci.gate._gate_file",
    "DEFAULT_GATE": "plangate.ci.gate._gate_file",
    "Case": "plangate.ci.gate._scores",
    "CaseResult": "plangate.ci.gate._verdict",
    "Comparison": "plangate.ci.gate._compare",
    "EvaluatorVerdict": "plangate.ci.gate._verdict",
    "GateFile": "plangate.ci.gate._gate_file",
    "GateFileError": "plangate.ci.gate._gate_file",
    "NoiseFloor": "plangate.ci.gate._verdict",
    "REPORT_MARKER": "plangate.ci.gate._reports",
    "REPORT_OWNS": "plangate.ci.gate._reports",
    "ReplayRun": "plangate.ci.gate._replays",
    "Side": "plangate.ci.gate._gate_file",
    "SpanProcessors": "plangate.ci.gate._replays",
    "VariantScore": "plangate.ci.gate._compare",
    "Verdict": "plangate.ci.gate._verdict",
    "check_bootstrap": "plangate.ci.gate._stats",
    "compare": "plangate.ci.gate._compare",
    "figure": "plangate.ci.gate._verdict",
    "gate_cases": "plangate.ci.gate._cases",
    "gate_with_reports": "plangate.ci.gate._outputs",
    "html_report": "plangate.ci.gate._html_report",
    "junit": "plangate.ci.gate._reports",
    "load_gate": "plangate.ci.gate._gate_file",
    "markdown": "plangate.ci.gate._reports",
    "run_gate": "plangate.ci.gate._gate",
    "side_of": "plangate.ci.gate._gate_file",
    "verdict_json": "plangate.ci.gate._reports",
    "write_outputs": "plangate.ci.gate._outputs",
    "write_reports": "plangate.ci.gate._reports",
    "resample_indices": "plangate.ci.gate._stats",
}
"""Where each public name lives: everything loads on first use."""

if not TYPE_CHECKING:  # to a type checker, a module `__getattr__` hides every missing name
    __getattr__ = lazy_getattr(__name__, _HOME)

__all__ = [
    "DEFAULT_GATE",
    "REPORT_MARKER",
    "REPORT_OWNS",
    "Case",
    "CaseResult",
    "Comparison",
    "DatasetSelection",
    "EvaluatorRule",
    "EvaluatorVerdict",
    "GateFile",
    "GateFileError",
    "NoiseFloor",
    "ReplayRun",
    "Side",
    "SpanProcessors",
    "VariantScore",
    "Verdict",
    "check_bootstrap",
    "compare",
    "figure",
    "gate_cases",
    "gate_with_reports",
    "html_report",
    "junit",
    "load_gate",
    "markdown",
    "resample_indices",
    "run_gate",
    "side_of",
    "verdict_json",
    "write_outputs",
    "write_reports",
]
