"""Every `plangate` command's arguments, in one place, so that they read as one tool.

The same thing has one spelling everywhere: `--phoenix-url` and `--phoenix-project` for Phoenix,
`-o/--output` for what a command writes, `--variant`, `--model`, `--domain`, `--seed`,
`--session` (repeatable where it selects), `--json` for machine-readable output. Every argument
has help text (tested). This module imports nothing heavy: `plangate --help` and `plangate run`
do not pay for what other commands need.
"""

from __future__ import annotations

from typing import Any

from plangate.ci.cli._flags import at_least_one, endpoint, judge
from plangate.ci.cli._options import (
    MODEL,
    agent_options,
    dataset_output,
    evaluator_choice,
    export_to_phoenix,
    force,
    json_output,
    redact,
    run_budget,
    session_filter,
    store_option,
    talk_to_phoenix,
    team_agent,
    tool_source,
)
from plangate.ci.phoenix.names import (
    DEFAULT_ENV,
    DEFAULT_FOLDER,
    DEFAULT_GRPC_PORT,
    DEFAULT_PORT,
    ENV_VARIABLE,
    GOLDEN_PROJECT,
)
from plangate.harness import SessionStore

IMPORT_FORMATS = (
    "atif", "openai-messages", "otlp-json", "phoenix", "swe-agent", "tau-bench", "tau2",
)  # fmt: skip
"""What `plangate import` reads (tested to match the registered importers)."""
EVAL_BATCH_ROWS = 250_000
"""`plangate eval --batch-rows`'s default (tested to match `plangate.evaluators`: the parser
does not import evaluators, which loads pandas)."""
REPLAY_MODEL = "cassette (strict), cassette-lenient, sim:NAME or openai:MODEL"

Commands = Any
"""What `add_subparsers()` returns."""


def add_commands(commands: Commands) -> None:
    """Every command, in the order `plangate --help` lists them."""
    _run(commands)
    _demo(commands)
    _import(commands)
    _export(commands)
    _eval(commands)
    _agreement(commands)
    _runs(commands)
    _record(commands)
    _dataset(commands)
    _replay(commands)
    _gate(commands)
    _compare(commands)
    _phoenix(commands)
    commands.add_parser("variants", help="list the shipped harness variants")
    commands.add_parser("domains", help="list the demo domains")
    commands.add_parser("models", help="list the simulated models")


# -- the commands -------------------------------------------------------------------------------


def _run(commands: Commands) -> None:
    run = commands.add_parser("run", help="run one request through the reference agent")
    run.add_argument(
        "request", help="what the user asks; @FILE reads it from a file, - from standard input"
    )
    agent_options(run, variant="alyx", model="sim:diligent")
    run.add_argument(
        "--session", metavar="ID", default=None, help="session id (default: a random one)"
    )
    json_output(run, "the turn's result")
    run.add_argument(
        "--store",
        metavar="FILE",
        help="save the session here (SQLite) after every change, to resume or approve later",
    )
    run.add_argument(
        "--otlp", metavar="URL", default=None, help="also export the spans over OTLP/HTTP here"
    )
    export_to_phoenix(run)


def _demo(commands: Commands) -> None:
    demo = commands.add_parser(
        "demo", help="every variant against every simulated model, then the default gate"
    )
    demo.add_argument(
        "--domain", action="append", help="only this demo domain (repeatable; default: all)"
    )
    demo.add_argument(
        "--seed", type=int, default=0, help="seed of the simulated models (default 0)"
    )
    demo.add_argument(
        "--gate", metavar="GATE.toml", default=None, help="gate file (default: the shipped one)"
    )
    demo.add_argument(
        "-o", "--output", default="out/demo", help="the gate's report folder (default out/demo)"
    )


def _import(commands: Commands) -> None:
    importing = commands.add_parser("import", help="other agents' traces into a trace table")
    importing.add_argument("format", help=f"the files' format: {', '.join(IMPORT_FORMATS)}")
    importing.add_argument("paths", nargs="+", metavar="PATH", help="the files to import")
    importing.add_argument(
        "-o", "--output", required=True, metavar="TABLE.parquet", help="the trace table to write"
    )
    force(importing, "trace table")


def _export(commands: Commands) -> None:
    exporting = commands.add_parser("export", help="trace tables out in other formats")
    verbs = exporting.add_subparsers(dest="export_command", required=True, metavar="FORMAT")
    atif = verbs.add_parser("atif", help="trajectories in ATIF, the Harbor framework's format")
    atif.add_argument(
        "source", metavar="SOURCE", help="a trace table (.parquet) or a golden dataset folder"
    )
    atif.add_argument(
        "-o",
        "--output",
        required=True,
        metavar="FILE.json",
        help="the ATIF file: one trajectory, a list of several, or one per line if FILE.jsonl",
    )
    force(atif, "ATIF file")
    session_filter(atif, "only this session, with its subagents")
    redact(atif)


def _eval(commands: Commands) -> None:
    scoring = commands.add_parser("eval", help="score every turn of a trace table")
    scoring.add_argument(
        "table",
        metavar="SOURCE",
        help="the trace table: a .parquet file, a folder of them (Hive partitions too) or a "
        "quoted glob such as 'traces/*/*.parquet', on disk or in object storage "
        "('s3://bucket/traces/', 'gs://…')",
    )
    scoring.add_argument(
        "--rubric", metavar="FILE", help="rubric file (JSON or TOML) or golden dataset folder"
    )
    scoring.add_argument(
        "-o",
        "--output",
        metavar="SCORES",
        help="also write the score table here, on disk: one .parquet file for a file, a folder "
        "of parts (one per batch) for a folder or a glob",
    )
    force(scoring, "score table")
    evaluator_choice(scoring)
    scoring.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="EVALUATOR.KEY=VALUE",
        help="an evaluator parameter, e.g. tool_call_loops.max_repeats=3 (repeatable)",
    )
    scoring.add_argument(
        "--batch-rows",
        type=at_least_one,
        default=None,
        metavar="N",
        help=f"spans scored at a time, whole sessions (default {EVAL_BATCH_ROWS:,}): memory "
        "follows it, not the source's size",
    )
    scoring.add_argument(
        "--engine",
        choices=("local", "ray"),
        default="local",
        help="score here (default) or on Ray (needs `pip install 'plangate[ray]'`)",
    )
    scoring.add_argument(
        "--address",
        metavar="ray://HOST:PORT",
        default=None,
        help="the Ray cluster to score on (only with --engine ray; default: a local one)",
    )
    judge(scoring, "SCORES.judge.jsonl beside -o, or judge.jsonl in a dataset given as --rubric")
    json_output(scoring, "the summary")


def _agreement(commands: Commands) -> None:
    agreeing = commands.add_parser(
        "agreement", help="how far an evaluator's verdicts agree with labels (Cohen's kappa)"
    )
    agreeing.add_argument(
        "scores",
        metavar="SCORES",
        help="the score table (`plangate eval -o` or a gate run's): a .parquet file or a folder",
    )
    agreeing.add_argument(
        "labels",
        metavar="LABELS",
        help="a label file (.csv or .parquet: session_id, turn_index, label pass/fail, optional "
        "trial) or a trace table, whose AGENT rows' reward is the source's own judgement",
    )
    agreeing.add_argument(
        "--evaluator",
        default="task_completion",
        metavar="NAME",
        help="the evaluator whose verdicts to compare (default task_completion)",
    )
    json_output(agreeing, "the agreement, every disagreeing turn included,")


def _runs(commands: Commands) -> None:
    runs = commands.add_parser("runs", help="list saved sessions (paused runs first)")
    store_option(runs)
    runs.add_argument(
        "--status", choices=SessionStore.STATUSES, help="only sessions with this status"
    )

    plan = commands.add_parser(
        "plan", help="show a saved session's plan, or the one awaiting approval"
    )
    plan.add_argument("session", metavar="RUN", help="the saved session's id")
    store_option(plan)
    json_output(plan, "the status and plans")

    resume = commands.add_parser("resume", help="continue a paused or interrupted run")
    resume.add_argument("session", metavar="RUN", help="the saved session's id")
    store_option(resume)
    decision = resume.add_mutually_exclusive_group()
    decision.add_argument("--approve", action="store_true", help="approve the proposed plan")
    decision.add_argument(
        "--plan", metavar="FILE", help="approve this plan instead (JSON: a list of steps)"
    )
    decision.add_argument("--reject", action="store_true", help="reject the proposed plan")
    resume.add_argument(
        "--reason", default="", help="why the plan was rejected (the model is told)"
    )
    json_output(resume, "the turn's result")


def _record(commands: Commands) -> None:
    recording = commands.add_parser("record", help="record sessions as a golden dataset")
    agent_options(recording, variant=None, model=None, teams=True)
    recording.add_argument(
        "--requests", required=True, metavar="FILE", help="the sessions to record (JSON)"
    )
    dataset_output(recording)
    recording.add_argument("--description", default="", help="what the dataset is for")
    redact(recording)
    recording.add_argument(
        "--allow-errors",
        action="store_true",
        help="write the dataset even if turns ended in model_error or tool_error (default: "
        "refuse, exit 2)",
    )
    export_to_phoenix(recording)


def _dataset(commands: Commands) -> None:
    dataset = commands.add_parser("dataset", help="check, make or rebuild golden datasets")
    verbs = dataset.add_subparsers(dest="dataset_command", required=True, metavar="VERB")
    validate = verbs.add_parser("validate", help="check a dataset's files, hashes and rubrics")
    validate.add_argument("path", metavar="PATH", help="the dataset folder")

    traces = verbs.add_parser("from-traces", help="a golden dataset from a trace table")
    traces.add_argument("table", metavar="TABLE.parquet", help="the trace table")
    session_filter(traces)
    dataset_output(traces)
    redact(traces)

    pulling = verbs.add_parser("from-phoenix", help="a golden dataset from sessions in Phoenix")
    talk_to_phoenix(pulling, project=None, what="of the sessions", timeout=False, required=True)
    session_filter(pulling, "only this session, by its Phoenix or its original id")
    dataset_output(pulling)
    redact(pulling)

    building = verbs.add_parser(
        "build", help="record plangate's shipped golden datasets again from their requests"
    )
    building.add_argument(
        "names", nargs="*", metavar="NAME", help="only these datasets (default: all)"
    )
    building.add_argument(
        "-o",
        "--output",
        default="datasets",
        metavar="FOLDER",
        help="the datasets folder, with the request files in FOLDER/requests (default datasets)",
    )
    building.add_argument(
        "--corpus",
        metavar="FOLDER",
        default=None,
        help="the third-party trajectories (default: $PLANGATE_CORPUS, else shared/corpus beside "
        "the repository: FOLDER/../../shared/corpus)",
    )


def _replay(commands: Commands) -> None:
    replaying = commands.add_parser("replay", help="replay a golden dataset's turns")
    replaying.add_argument("dataset", metavar="DATASET", help="the golden dataset folder")
    session_filter(replaying)
    replaying.add_argument(
        "--turn", type=int, action="append", help="only this turn index (repeatable)"
    )
    replaying.add_argument(
        "--variant", help="harness variant (default: each session's recording variant)"
    )
    team_agent(replaying, "replay with")
    replaying.add_argument(
        "--model", default="cassette", help=f"where answers come from: {REPLAY_MODEL}"
    )
    tool_source(replaying)
    endpoint(replaying)
    replaying.add_argument(
        "-o", "--output", metavar="TABLE.parquet", help="also write the replays' spans here"
    )
    force(replaying, "trace table")
    json_output(replaying, "one result per turn")
    replaying.add_argument(
        "--shard", metavar="i/n", help="only every n-th turn, starting at the i-th"
    )
    replaying.add_argument(
        "--jobs", type=at_least_one, default=4, help="turns replayed at once (default 4)"
    )
    run_budget(replaying)
    export_to_phoenix(replaying)


def _gate(commands: Commands) -> None:
    gate = commands.add_parser("gate", help="compare a candidate with a baseline on golden turns")
    gate.add_argument("gate_file", metavar="GATE.toml", help="the gate file")
    gate.add_argument(
        "-o", "--output", default="out/gate", help="the report folder (default out/gate)"
    )
    force(gate, "report set (the folder's verdict.json, summaries and scores)")
    gate.add_argument(
        "--repeats", type=at_least_one, help="instead of the gate file's gate.repeats (>= 1)"
    )
    endpoint(gate)
    run_budget(gate, gate=True)
    judge(gate, "the gate file's [evaluators.judge] cassette")
    export_to_phoenix(gate)


def _compare(commands: Commands) -> None:
    compare = commands.add_parser(
        "compare", help="harness variants or agents side by side, with intervals"
    )
    compare.add_argument(
        "variants",
        nargs="+",
        metavar="SIDE",
        help="a harness variant (name or .toml file), an agent (python:..., command:..., "
        "http:...), or a .toml file naming an agent and its env, args and kwargs",
    )
    compare.add_argument(
        "--gate",
        metavar="GATE.toml",
        default=None,
        help="the gate file whose datasets, evaluators and repeats to use (default: the "
        "shipped one)",
    )
    compare.add_argument(
        "--dataset", action="append", help="instead of the gate's: this dataset (repeatable)"
    )
    compare.add_argument("--model", help=MODEL + " (default: the gate's candidate model)")
    tool_source(compare, default=None)
    compare.add_argument(
        "--repeats", type=at_least_one, help="repeats per case, >= 1 (default: the gate's)"
    )
    endpoint(compare)
    evaluator_choice(compare)
    json_output(compare, "the comparison")


def _phoenix(commands: Commands) -> None:
    phoenix = commands.add_parser("phoenix", help="Phoenix: a local server, and plangate's results")
    verbs = phoenix.add_subparsers(dest="phoenix_command", required=True, metavar="VERB")
    starting = verbs.add_parser("up", help="start a local server (if not running), wait until up")
    stopping = verbs.add_parser("down", help="stop the local server")
    asking = verbs.add_parser("status", help="is the local server running? (exit 0 yes, 1 no)")
    for verb in (starting, stopping, asking):
        verb.add_argument(
            "--dir",
            default=str(DEFAULT_FOLDER),
            help=f"the server's data folder (default {DEFAULT_FOLDER})",
        )
    starting.add_argument(
        "--port",
        type=int,
        default=DEFAULT_PORT,
        help=f"HTTP port: UI, REST, OTLP (default {DEFAULT_PORT})",
    )
    starting.add_argument(
        "--grpc-port",
        type=int,
        default=DEFAULT_GRPC_PORT,
        help=f"OTLP/gRPC port (default {DEFAULT_GRPC_PORT})",
    )
    starting.add_argument(
        "--env",
        default=None,
        help=f"the server's Python environment (default: ${ENV_VARIABLE} or {DEFAULT_ENV}, "
        "made on first use)",
    )

    annotating = verbs.add_parser("annotate", help="log a score table as Phoenix annotations")
    annotating.add_argument(
        "scores", metavar="SCORES", help="the score table (`plangate eval -o`: a file or a folder)"
    )
    annotating.add_argument(
        "traces",
        metavar="TRACES",
        help="the scored trace table, as `eval` reads it (a file, a folder or a glob, on disk or "
        "in object storage); only its AGENT rows' ids are read",
    )
    annotating.add_argument(
        "--identifier", help="keep these annotations apart from others of the same name"
    )
    talk_to_phoenix(annotating, project=None, what="of the scored spans")

    mirroring = verbs.add_parser("dataset", help="mirror a golden dataset as a Phoenix dataset")
    experimenting = verbs.add_parser(
        "experiment", help="replay a golden dataset per variant as Phoenix experiments"
    )
    for command in (mirroring, experimenting):
        command.add_argument("dataset", metavar="DATASET", help="the golden dataset folder")
        command.add_argument("--name", help="the Phoenix dataset's name (default: the dataset's)")
        session_filter(command)
        talk_to_phoenix(command, project=GOLDEN_PROJECT, what="that holds the recorded spans")
    experimenting.add_argument(
        "--variant", action="append", default=[], help="a variant: name or .toml (repeatable)"
    )
    experimenting.add_argument(
        "--agent",
        action="append",
        default=[],
        metavar="SPEC",
        help="your agent: python:..., command:..., http:..., or a .toml file naming an agent "
        "and its env, args and kwargs (repeatable; with or without --variant)",
    )
    experimenting.add_argument("--model", required=True, help=f"the model: {REPLAY_MODEL}")
    tool_source(experimenting)
    evaluator_choice(experimenting)
