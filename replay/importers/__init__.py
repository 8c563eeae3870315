"""Importers: other agents' traces into the trace table, one module per format.

Each importer takes a file and returns a trace table (the span formats, `otlp-json` and
`phoenix`, a file's spans: all files' spans are made into turns together, as a trace may cross
files); bad input raises `TraceTableError` naming the file, the record and the field.
Importers keep what a source has (rewards, termination reasons, timestamps, token usage) and
never invent what it lacks. Importing this package
registers every format: `atif` (`_atif`, its steps in `_atif_steps`), `openai-messages`
(`_messages`), `otlp-json` (`_otlp`), `phoenix` (`_phoenix`), `swe-agent` (`_swe`), `tau-bench`
and `tau2` (`_tau`). `_reading` holds what they share; `_registry` the registry.
`trajectories_from_table` (`_atif_export`) goes the other way: a trace table as ATIF, which
`write_trajectories` (`_atif`) writes.
`spans_of_request` and `spans_of_protobuf` read one OTLP request (the model endpoint's trace
receiver reads with them).
"""

from plangate.replay.importers import _atif, _swe, _tau  # noqa: F401 - importing registers them
from plangate.replay.importers._atif import write_trajectories
from plangate.replay.importers._atif_export import ATIF_VERSION, trajectories_from_table
from plangate.replay.importers._messages import rows_from_messages
from plangate.replay.importers._otlp import (
    otlp_json_from_spans,
    spans_of_protobuf,
    spans_of_request,
)
from plangate.replay.importers._phoenix import from_phoenix_dataframe
from plangate.replay.importers._registry import Importer, import_formats, import_traces, importer

__all__ = [
    "ATIF_VERSION",
    "Importer",
    "from_phoenix_dataframe",
    "import_formats",
    "import_traces",
    "importer",
    "otlp_json_from_spans",
    "rows_from_messages",
    "spans_of_protobuf",
    "spans_of_request",
    "trajectories_from_table",
    "write_trajectories",
]
