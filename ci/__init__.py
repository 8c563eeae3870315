"""The CI side of plangate: the command line, telemetry wiring, the gate and its reports."""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ci._cli import main
    from ci._compare import Comparison, VariantScore, compare
    from ci._gate import CaseResult, EvaluatorVerdict, NoiseFloor, Verdict, run_gate
    from ci._gate_file import GateFile, GateFileError, load_gate
    from ci._html_report import html_report
    from ci._reports import junit, markdown, verdict_json, write_reports
    from ci._telemetry import Telemetry, telemetry

_LAZY = {
    "main": "ci._cli",
    "Telemetry": "ci._telemetry",
    "telemetry": "ci._telemetry",
    "Comparison": "ci._compare",
    "VariantScore": "ci._compare",
    "compare": "ci._compare",
    "NoiseFloor": "ci._gate",
    "html_report": "ci._html_report",
    "CaseResult": "ci._gate",
    "EvaluatorVerdict": "ci._gate",
    "Verdict": "ci._gate",
    "run_gate": "ci._gate",
    "GateFile": "ci._gate_file",
    "GateFileError": "ci._gate_file",
    "load_gate": "ci._gate_file",
    "junit": "ci._reports",
    "markdown": "ci._reports",
    "verdict_json": "ci._reports",
    "write_reports": "ci._reports",
}


def __getattr__(name: str) -> Any:
    # Everything loads on first use: the gate pulls in pandas and pyarrow, which `plangate
    # run` should not pay for, and the pytest plugin (imported by every pytest run where
    # plangate is installed) should cost nothing until `--plangate` is given.
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'ci' has no attribute {name!r}")


__all__ = [
    "CaseResult",
    "Comparison",
    "EvaluatorVerdict",
    "GateFile",
    "GateFileError",
    "NoiseFloor",
    "Telemetry",
    "VariantScore",
    "Verdict",
    "compare",
    "html_report",
    "junit",
    "load_gate",
    "main",
    "markdown",
    "run_gate",
    "telemetry",
    "verdict_json",
    "write_reports",
]
