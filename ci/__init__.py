"""The CI side of plangate: the command line, telemetry wiring, the gate and its reports."""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from plangate.ci._cli import main
    from plangate.ci._compare import Comparison, VariantScore, compare
    from plangate.ci._gate import CaseResult, EvaluatorVerdict, NoiseFloor, Verdict, run_gate
    from plangate.ci._gate_file import GateFile, GateFileError, load_gate
    from plangate.ci._html_report import html_report
    from plangate.ci._phoenix import AnnotationReport, annotate, session_url, trace_url
    from plangate.ci._phoenix_dataset import PhoenixDataset, mirror_dataset
    from plangate.ci._phoenix_experiment import PhoenixExperiment, run_experiment
    from plangate.ci._phoenix_export import ExportReport, PhoenixExport
    from plangate.ci._phoenix_fetch import fetch_spans, golden_from_phoenix
    from plangate.ci._phoenix_gate import publish_verdict
    from plangate.ci._phoenix_server import PhoenixServer
    from plangate.ci._phoenix_server import down as phoenix_down
    from plangate.ci._phoenix_server import status as phoenix_status
    from plangate.ci._phoenix_server import up as phoenix_up
    from plangate.ci._reports import junit, markdown, verdict_json, write_reports
    from plangate.ci._telemetry import Telemetry, telemetry

_LAZY = {
    "main": "plangate.ci._cli",
    "Telemetry": "plangate.ci._telemetry",
    "telemetry": "plangate.ci._telemetry",
    "Comparison": "plangate.ci._compare",
    "VariantScore": "plangate.ci._compare",
    "compare": "plangate.ci._compare",
    "NoiseFloor": "plangate.ci._gate",
    "html_report": "plangate.ci._html_report",
    "AnnotationReport": "plangate.ci._phoenix",
    "annotate": "plangate.ci._phoenix",
    "session_url": "plangate.ci._phoenix",
    "trace_url": "plangate.ci._phoenix",
    "PhoenixDataset": "plangate.ci._phoenix_dataset",
    "mirror_dataset": "plangate.ci._phoenix_dataset",
    "PhoenixExperiment": "plangate.ci._phoenix_experiment",
    "run_experiment": "plangate.ci._phoenix_experiment",
    "fetch_spans": "plangate.ci._phoenix_fetch",
    "golden_from_phoenix": "plangate.ci._phoenix_fetch",
    "PhoenixServer": "plangate.ci._phoenix_server",
    "phoenix_up": "plangate.ci._phoenix_server",
    "phoenix_down": "plangate.ci._phoenix_server",
    "phoenix_status": "plangate.ci._phoenix_server",
    "publish_verdict": "plangate.ci._phoenix_gate",
    "ExportReport": "plangate.ci._phoenix_export",
    "PhoenixExport": "plangate.ci._phoenix_export",
    "CaseResult": "plangate.ci._gate",
    "EvaluatorVerdict": "plangate.ci._gate",
    "Verdict": "plangate.ci._gate",
    "run_gate": "plangate.ci._gate",
    "GateFile": "plangate.ci._gate_file",
    "GateFileError": "plangate.ci._gate_file",
    "load_gate": "plangate.ci._gate_file",
    "junit": "plangate.ci._reports",
    "markdown": "plangate.ci._reports",
    "verdict_json": "plangate.ci._reports",
    "write_reports": "plangate.ci._reports",
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
    raise AttributeError(f"module 'plangate.ci' has no attribute {name!r}")


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
