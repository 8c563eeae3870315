"""Trace tables, importers, and (later) golden datasets and replay."""

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
    DatasetError,
    GoldenDataset,
    read_dataset,
    validate_dataset,
    write_dataset,
)
from plangate.replay._exporter import TraceTableExporter, trace_table_provider
from plangate.replay._from_traces import dataset_from_traces
from plangate.replay._import_messages import rows_from_messages
from plangate.replay._import_otlp import otlp_json_from_spans
from plangate.replay._import_phoenix import from_phoenix_dataframe
from plangate.replay._importers import import_formats, import_traces, importer
from plangate.replay._openinference import SpanEvent, SpanRecord, rows_from_spans
from plangate.replay._record import SessionRequest, load_requests, record, steps
from plangate.replay._redact import Redactor
from plangate.replay._replay import Divergence, ReplayResult, first_divergence, replay_turn
from plangate.replay._schema import (
    COLUMNS,
    SCHEMA,
    SCHEMA_VERSION,
    TraceTableError,
    build_table,
    canonical_arguments,
    concat_tables,
    empty_table,
    read_table,
    to_utc,
    validate_table,
    write_parquet,
    write_table,
)

__all__ = [
    "CassetteError",
    "CassetteModel",
    "DatasetError",
    "Divergence",
    "Exchange",
    "GoldenDataset",
    "Recorder",
    "RecordingModel",
    "Redactor",
    "ReplayResult",
    "SessionRequest",
    "ToolRecord",
    "cassette_tools",
    "dataset_from_traces",
    "fingerprint",
    "first_divergence",
    "load_requests",
    "read_dataset",
    "record",
    "recording_tools",
    "replay_turn",
    "steps",
    "validate_dataset",
    "write_dataset",
    "COLUMNS",
    "SCHEMA",
    "SCHEMA_VERSION",
    "SpanEvent",
    "SpanRecord",
    "TraceTableError",
    "TraceTableExporter",
    "build_table",
    "canonical_arguments",
    "concat_tables",
    "empty_table",
    "from_phoenix_dataframe",
    "import_formats",
    "import_traces",
    "importer",
    "otlp_json_from_spans",
    "read_table",
    "rows_from_messages",
    "rows_from_spans",
    "to_utc",
    "trace_table_provider",
    "validate_table",
    "write_parquet",
    "write_table",
]
