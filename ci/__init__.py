"""The CI side of plangate: the gate, Phoenix, the pytest plugin, telemetry, and the command line.

- `gate/`: the gate file, the paired comparison of baseline and candidate, reports;
- `phoenix/`: the Phoenix server, exports, annotations, datasets, experiments, fetching;
- `cli/`: every `plangate` command (argument parsing and printing only, calling the library);
- `_pytest_plugin`: the gate's cases as pytest items (`pytest --plangate GATE.toml`);
- `_telemetry`: where the reference agent's spans go (in memory, over OTLP, or nowhere);
- `_rubrics`, `_summary`, `_turns`: golden turns' rubrics and checks, a score table in brief,
  the turns a command replays (shared by the gate, Phoenix and the command line);
- `_demo`, `_build`: the demo's matrix and claims; the recipes of the shipped golden datasets.

Library code here never imports `cli/`, and `gate/` never imports `phoenix/`. Everything loads on
first use: the gate pulls in pandas and pyarrow, which `plangate run` should not pay for, and
the pytest plugin (imported by every pytest run where plangate is installed) should cost nothing
until `--plangate` is given.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from plangate._lazy import lazy_getattr

if TYPE_CHECKING:
    from plangate.ci._telemetry import Telemetry, telemetry
    from plangate.ci.gate import (
        CaseResult,
        Comparison,
        EvaluatorVerdict,
        GateFile,
        GateFileError,
        NoiseFloor,
        VariantScore,
        Verdict,
        compare,
        gate_with_reports,
        html_report,
        junit,
        load_gate,
        markdown,
        run_gate,
        verdict_json,
        write_outputs,
        write_reports,
    )
    from plangate.ci.phoenix import (
        AnnotationReport,
        ExportReport,
        PhoenixDataset,
        PhoenixExperiment,
        PhoenixExport,
        PhoenixServer,
        annotate,
        fetch_spans,
        golden_from_phoenix,
        mirror_dataset,
        publish_verdict,
        run_experiment,
        session_url,
        trace_url,
    )
_HOME = {
    "AnnotationReport": "plangate.ci.phoenix",
    "CaseResult": "plangate.ci.gate",
    "Comparison": "plangate.ci.gate",
    "EvaluatorVerdict": "plangate.ci.gate",
    "ExportReport": "plangate.ci.phoenix",
    "GateFile": "plangate.ci.gate",
    "GateFileError": "plangate.ci.gate",
    "NoiseFloor": "plangate.ci.gate",
    "PhoenixDataset": "plangate.ci.phoenix",
    "PhoenixExperiment": "plangate.ci.phoenix",
    "PhoenixExport": "plangate.ci.phoenix",
    "PhoenixServer": "plangate.ci.phoenix",
    "Telemetry": "plangate.ci._telemetry",
    "VariantScore": "plangate.ci.gate",
    "Verdict": "plangate.ci.gate",
    "annotate": "plangate.ci.phoenix",
    "compare": "plangate.ci.gate",
    "fetch_spans": "plangate.ci.phoenix",
    "gate_with_reports": "plangate.ci.gate",
    "golden_from_phoenix": "plangate.ci.phoenix",
    "html_report": "plangate.ci.gate",
    "junit": "plangate.ci.gate",
    "load_gate": "plangate.ci.gate",
    "markdown": "plangate.ci.gate",
    "mirror_dataset": "plangate.ci.phoenix",
    "publish_verdict": "plangate.ci.phoenix",
    "run_experiment": "plangate.ci.phoenix",
    "run_gate": "plangate.ci.gate",
    "session_url": "plangate.ci.phoenix",
    "telemetry": "plangate.ci._telemetry",
    "trace_url": "plangate.ci.phoenix",
    "verdict_json": "plangate.ci.gate",
    "write_outputs": "plangate.ci.gate",
    "write_reports": "plangate.ci.gate",
}
"""Where each public name lives: everything loads on first use."""

if not TYPE_CHECKING:  # to a type checker, a module `__getattr__` hides every missing name
    __getattr__ = lazy_getattr(__name__, _HOME)

__all__ = [
    "AnnotationReport",
    "CaseResult",
    "Comparison",
    "EvaluatorVerdict",
    "ExportReport",
    "GateFile",
    "GateFileError",
    "NoiseFloor",
    "PhoenixDataset",
    "PhoenixExperiment",
    "PhoenixExport",
    "PhoenixServer",
    "Telemetry",
    "VariantScore",
    "Verdict",
    "annotate",
    "compare",
    "fetch_spans",
    "gate_with_reports",
    "golden_from_phoenix",
    "html_report",
    "junit",
    "load_gate",
    "markdown",
    "mirror_dataset",
    "publish_verdict",
    "run_experiment",
    "run_gate",
    "session_url",
    "telemetry",
    "trace_url",
    "verdict_json",
    "write_outputs",
    "write_reports",
]
