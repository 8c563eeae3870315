"""The CI side of plangate: the command line, telemetry wiring, the gate and its reports."""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ci._cli import main
    from ci._compare import Comparison, VariantScore, compare
    from ci._gate import CaseResult, EvaluatorVerdict, NoiseFloor, Verdict, run_gate
    from ci._gate_file import GateFile, GateFileError, load_gate
    from ci._html_report import html_report
    from ci._phoenix import AnnotationReport, annotate, session_url, trace_url
    from ci._phoenix_dataset import PhoenixDataset, mirror_dataset
    from ci._phoenix_experiment import PhoenixExperiment, run_experiment
    from ci._phoenix_export import ExportReport, PhoenixExport
    from ci._phoenix_fetch import fetch_spans, golden_from_phoenix
    from ci._phoenix_gate import publish_verdict
    from ci._phoenix_server import PhoenixServer
    from ci._phoenix_server import down as phoenix_down
    from ci._phoenix_server import status as phoenix_status
    from ci._phoenix_server import up as phoenix_up
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
    "AnnotationReport": "ci._phoenix",
    "annotate": "ci._phoenix",
    "session_url": "ci._phoenix",
    "trace_url": "ci._phoenix",
    "PhoenixDataset": "ci._phoenix_dataset",
    "mirror_dataset": "ci._phoenix_dataset",
    "PhoenixExperiment": "ci._phoenix_experiment",
    "run_experiment": "ci._phoenix_experiment",
    "fetch_spans": "ci._phoenix_fetch",
    "golden_from_phoenix": "ci._phoenix_fetch",
    "PhoenixServer": "ci._phoenix_server",
    "phoenix_up": "ci._phoenix_server",
    "phoenix_down": "ci._phoenix_server",
    "phoenix_status": "ci._phoenix_server",
    "publish_verdict": "ci._phoenix_gate",
    "ExportReport": "ci._phoenix_export",
    "PhoenixExport": "ci._phoenix_export",
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


_RENAMED = {"phoenix_up": "up", "phoenix_down": "down", "phoenix_status": "status"}
"""Public names that differ from the name in their module."""


def __getattr__(name: str) -> Any:
    # Everything loads on first use: the gate pulls in pandas and pyarrow, which `plangate
    # run` should not pay for, and the pytest plugin (imported by every pytest run where
    # plangate is installed) should cost nothing until `--plangate` is given.
    if name in _LAZY:
        import importlib

        module = importlib.import_module(_LAZY[name])
        return getattr(module, _RENAMED.get(name, name))
    raise AttributeError(f"module 'ci' has no attribute {name!r}")


__all__ = [
    "AnnotationReport",
    "CaseResult",
    "Comparison",
    "EvaluatorVerdict",
    "ExportReport",
    "PhoenixServer",
    "fetch_spans",
    "golden_from_phoenix",
    "phoenix_down",
    "phoenix_status",
    "phoenix_up",
    "publish_verdict",
    "GateFile",
    "GateFileError",
    "NoiseFloor",
    "PhoenixDataset",
    "PhoenixExperiment",
    "PhoenixExport",
    "Telemetry",
    "VariantScore",
    "Verdict",
    "annotate",
    "compare",
    "html_report",
    "junit",
    "load_gate",
    "main",
    "markdown",
    "mirror_dataset",
    "run_experiment",
    "run_gate",
    "session_url",
    "telemetry",
    "trace_url",
    "verdict_json",
    "write_reports",
]
