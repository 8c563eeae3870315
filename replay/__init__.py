"""The trace table, golden datasets, and replay: recorded turns run again against a variant.

- `schema` (public): the trace table, one row per span: its columns, schema and checks;
- `_openinference`, `_exporter`: spans (OpenInference) into rows; the in-process exporter;
- `importers/`: other agents' traces (ATIF, tau-bench, tau2, SWE-agent, OTLP JSON, Phoenix,
  OpenAI messages) into trace tables, and trace tables out as ATIF trajectories;
- `_dataset`, `_record`, `_cassette`, `_redact`, `_from_traces`: golden datasets, recording
  them (secrets redacted) with a cassette of every exchange, and goldens from any trace table;
- `_replay`: one recorded turn again, with answers from the cassette, a simulated or a live
  model, and where the new trajectory diverged.

Imports `plangate.harness` only (the agent that records and replays, and its vocabulary).
"""

from plangate.replay._cassette import (
    CassetteError,
    CassetteModel,
    Exchange,
    Recorder,
    RecordingModel,
    ToolRecord,
    cassette_tools,
    fingerprint,
    recording_tools,
)
from plangate.replay._dataset import (
    DATASET_FILES,
    MANIFEST,
    DatasetError,
    GoldenDataset,
    dataset_folder,
    read_dataset,
    redacted_count,
    validate_dataset,
    write_dataset,
)
from plangate.replay._exporter import TraceTableExporter, trace_table_provider
from plangate.replay._from_traces import dataset_from_traces
from plangate.replay._openinference import rows_from_spans
from plangate.replay._record import SessionRequest, load_requests, record, steps
from plangate.replay._redact import Redactor, default_redactor, redactor_for
from plangate.replay._redacting import RedactingExporter, redacted_span
from plangate.replay._replay import (
    CASSETTE_MODELS,
    TOOL_SOURCES,
    Divergence,
    ReferenceAgent,
    ReplayAgent,
    ReplayedTurn,
    ReplayResult,
    ToolSource,
    TurnToReplay,
    first_divergence,
    replay_turn,
)
from plangate.replay._spans import SpanEvent, SpanRecord
from plangate.replay._table_spans import spans_from_table
from plangate.replay.importers import (
    ATIF_VERSION,
    from_phoenix_dataframe,
    import_formats,
    import_traces,
    importer,
    otlp_json_from_spans,
    rows_from_messages,
    trajectories_from_table,
    write_trajectories,
)
from plangate.replay.schema import (
    ATTRIBUTE_FIELDS,
    COLUMNS,
    SCHEMA,
    SCHEMA_VERSION,
    TraceTableError,
    build_table,
    canonical_arguments,
    concat_tables,
    empty_table,
    lost_attributes,
    read_table,
    table_from_columns,
    to_utc,
    upgrade_table,
    validate_table,
    write_parquet,
    write_table,
)

__all__ = [
    "ATIF_VERSION",
    "ATTRIBUTE_FIELDS",
    "CASSETTE_MODELS",
    "COLUMNS",
    "DATASET_FILES",
    "MANIFEST",
    "SCHEMA",
    "SCHEMA_VERSION",
    "TOOL_SOURCES",
    "CassetteError",
    "CassetteModel",
    "DatasetError",
    "Divergence",
    "Exchange",
    "GoldenDataset",
    "Recorder",
    "RecordingModel",
    "RedactingExporter",
    "Redactor",
    "ReferenceAgent",
    "ReplayAgent",
    "ReplayResult",
    "ReplayedTurn",
    "SessionRequest",
    "SpanEvent",
    "SpanRecord",
    "ToolRecord",
    "ToolSource",
    "TraceTableError",
    "TraceTableExporter",
    "TurnToReplay",
    "build_table",
    "canonical_arguments",
    "cassette_tools",
    "concat_tables",
    "dataset_folder",
    "dataset_from_traces",
    "default_redactor",
    "empty_table",
    "fingerprint",
    "first_divergence",
    "from_phoenix_dataframe",
    "import_formats",
    "import_traces",
    "importer",
    "load_requests",
    "lost_attributes",
    "otlp_json_from_spans",
    "read_dataset",
    "read_table",
    "record",
    "recording_tools",
    "redacted_count",
    "redacted_span",
    "redactor_for",
    "replay_turn",
    "rows_from_messages",
    "rows_from_spans",
    "spans_from_table",
    "steps",
    "table_from_columns",
    "to_utc",
    "trace_table_provider",
    "trajectories_from_table",
    "upgrade_table",
    "validate_dataset",
    "validate_table",
    "write_dataset",
    "write_parquet",
    "write_table",
    "write_trajectories",
]
