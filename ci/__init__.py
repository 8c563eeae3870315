"""The CI side of plangate: the command line, telemetry wiring, the gate and its reports."""

from typing import TYPE_CHECKING, Any

from ci._cli import main
from ci._telemetry import Telemetry, telemetry

if TYPE_CHECKING:
    from ci._gate import CaseResult, EvaluatorVerdict, Verdict, run_gate
    from ci._gate_file import GateFile, GateFileError, load_gate
    from ci._reports import junit, markdown, verdict_json, write_reports

_LAZY = {
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
    # The gate pulls in pandas and pyarrow; `plangate run` should not pay for them.
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'ci' has no attribute {name!r}")


__all__ = [
    "CaseResult",
    "EvaluatorVerdict",
    "GateFile",
    "GateFileError",
    "Telemetry",
    "Verdict",
    "junit",
    "load_gate",
    "main",
    "markdown",
    "run_gate",
    "telemetry",
    "verdict_json",
    "write_reports",
]
