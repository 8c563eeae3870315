"""plangate: an evaluation and regression harness for LLM planning agents.

The four packages, in the order data flows and imports point (each imports only those before it):

- `plangate.harness`: the reference planning agent (models, tools, plans, the loop, guards,
  variants, tracing);
- `plangate.replay`: the trace table, golden datasets, importers, recording and replay;
- `plangate.evaluators`: pure, versioned scorers over trace tables, and pass^k;
- `plangate.ci`: the gate, its reports, Phoenix, the pytest plugin and the command line.

This root re-exports the names a user starts from; everything loads on first use, so that
`import plangate` (and the pytest plugin, and the `plangate` command) costs nothing up front.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from plangate._lazy import lazy_getattr

if TYPE_CHECKING:
    from plangate.ci import GateFile, Verdict, load_gate, run_gate
    from plangate.evaluators import Rubric, RubricSet, evaluate, load_rubrics
    from plangate.harness import (
        Agent,
        Model,
        OpenAIModel,
        ScriptedModel,
        SimulatedModel,
        TurnResult,
        Variant,
        get_domain,
        load_variant,
    )
    from plangate.replay import (
        GoldenDataset,
        import_traces,
        read_dataset,
        read_table,
        record,
        replay_turn,
    )

_HOME = {
    "Agent": "plangate.harness",
    "Model": "plangate.harness",
    "OpenAIModel": "plangate.harness",
    "ScriptedModel": "plangate.harness",
    "SimulatedModel": "plangate.harness",
    "TurnResult": "plangate.harness",
    "Variant": "plangate.harness",
    "get_domain": "plangate.harness",
    "load_variant": "plangate.harness",
    "GoldenDataset": "plangate.replay",
    "import_traces": "plangate.replay",
    "read_dataset": "plangate.replay",
    "read_table": "plangate.replay",
    "record": "plangate.replay",
    "replay_turn": "plangate.replay",
    "Rubric": "plangate.evaluators",
    "RubricSet": "plangate.evaluators",
    "evaluate": "plangate.evaluators",
    "load_rubrics": "plangate.evaluators",
    "GateFile": "plangate.ci",
    "Verdict": "plangate.ci",
    "load_gate": "plangate.ci",
    "run_gate": "plangate.ci",
}
"""Where each public name lives."""


if not TYPE_CHECKING:  # to a type checker, a module `__getattr__` hides every missing name
    _names = lazy_getattr(__name__, _HOME)

    def __getattr__(name: str) -> Any:
        if name == "__version__":
            from importlib import metadata  # here: it costs every import of plangate 30 ms

            return metadata.version("plangate")
        return _names(name)


__all__ = [
    "Agent",
    "GateFile",
    "GoldenDataset",
    "Model",
    "OpenAIModel",
    "Rubric",
    "RubricSet",
    "ScriptedModel",
    "SimulatedModel",
    "TurnResult",
    "Variant",
    "Verdict",
    "evaluate",
    "get_domain",
    "import_traces",
    "load_gate",
    "load_rubrics",
    "load_variant",
    "read_dataset",
    "read_table",
    "record",
    "replay_turn",
    "run_gate",
]
