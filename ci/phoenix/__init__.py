"""Phoenix, where people look at the traces and the scores: library code only.

No argparse and no printing here: the command line is `plangate.ci.cli._phoenix`.

- `_server`: a local Phoenix server from its own environment, bound to 127.0.0.1;
- `names`, `_client`: how plangate names things in Phoenix and links to them; talking to a
  server (health, errors, projects, waiting for spans to be ingested);
- `_transport`, `_export`: spans over OTLP/HTTP, retried through back-pressure and checked to
  arrive, their session ids namespaced;
- `_annotations`, `_publish`: scores as span, trace and session annotations; a gate verdict's
  scores and trace links;
- `_datasets`, `_experiments`: golden datasets as Phoenix datasets, variants as experiments;
- `_fetch`: production traces back from Phoenix as golden datasets.

The Phoenix client is imported only by the functions that talk to a server, and the server
package never: `import plangate.ci.phoenix` costs nothing until a name is used. The gate does not
import this package; the command line hands the gate an export as span processors.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from plangate._lazy import lazy_getattr

if TYPE_CHECKING:
    from plangate.ci.phoenix._annotations import AnnotationError, AnnotationReport, annotate
    from plangate.ci.phoenix._client import (
        IngestTimeoutError,
        PhoenixError,
        PhoenixRequestError,
        UnknownProjectError,
        client_url,
        wait_for_spans,
    )
    from plangate.ci.phoenix._datasets import PhoenixDataset, PhoenixDatasetError, mirror_dataset
    from plangate.ci.phoenix._experiments import (
        PhoenixExperiment,
        check_experiment,
        run_experiment,
    )
    from plangate.ci.phoenix._export import (
        ExportReport,
        PhoenixExport,
        replay_processor,
        with_export,
    )
    from plangate.ci.phoenix._fetch import fetch_spans, golden_from_phoenix
    from plangate.ci.phoenix._publish import publish_verdict
    from plangate.ci.phoenix._server import PhoenixServer, down, status, up
    from plangate.ci.phoenix.names import compare_url, session_url, trace_url
_HOME = {
    "client_url": "plangate.ci.phoenix._client",
    "AnnotationError": "plangate.ci.phoenix._annotations",
    "AnnotationReport": "plangate.ci.phoenix._annotations",
    "ExportReport": "plangate.ci.phoenix._export",
    "IngestTimeoutError": "plangate.ci.phoenix._client",
    "PhoenixDataset": "plangate.ci.phoenix._datasets",
    "PhoenixDatasetError": "plangate.ci.phoenix._datasets",
    "PhoenixError": "plangate.ci.phoenix._client",
    "PhoenixExperiment": "plangate.ci.phoenix._experiments",
    "PhoenixExport": "plangate.ci.phoenix._export",
    "PhoenixRequestError": "plangate.ci.phoenix._client",
    "PhoenixServer": "plangate.ci.phoenix._server",
    "UnknownProjectError": "plangate.ci.phoenix._client",
    "annotate": "plangate.ci.phoenix._annotations",
    "check_experiment": "plangate.ci.phoenix._experiments",
    "compare_url": "plangate.ci.phoenix.names",
    "down": "plangate.ci.phoenix._server",
    "fetch_spans": "plangate.ci.phoenix._fetch",
    "golden_from_phoenix": "plangate.ci.phoenix._fetch",
    "mirror_dataset": "plangate.ci.phoenix._datasets",
    "publish_verdict": "plangate.ci.phoenix._publish",
    "replay_processor": "plangate.ci.phoenix._export",
    "run_experiment": "plangate.ci.phoenix._experiments",
    "session_url": "plangate.ci.phoenix.names",
    "status": "plangate.ci.phoenix._server",
    "trace_url": "plangate.ci.phoenix.names",
    "up": "plangate.ci.phoenix._server",
    "wait_for_spans": "plangate.ci.phoenix._client",
    "with_export": "plangate.ci.phoenix._export",
}
"""Where each public name lives: everything loads on first use."""

if not TYPE_CHECKING:  # to a type checker, a module `__getattr__` hides every missing name
    __getattr__ = lazy_getattr(__name__, _HOME)

__all__ = [
    "AnnotationError",
    "AnnotationReport",
    "ExportReport",
    "IngestTimeoutError",
    "PhoenixDataset",
    "PhoenixDatasetError",
    "PhoenixError",
    "PhoenixExperiment",
    "PhoenixExport",
    "PhoenixRequestError",
    "PhoenixServer",
    "UnknownProjectError",
    "annotate",
    "check_experiment",
    "client_url",
    "compare_url",
    "down",
    "fetch_spans",
    "golden_from_phoenix",
    "mirror_dataset",
    "publish_verdict",
    "replay_processor",
    "run_experiment",
    "session_url",
    "status",
    "trace_url",
    "up",
    "wait_for_spans",
    "with_export",
]
