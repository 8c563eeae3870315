"""`plangate import` and `plangate eval`, run as a user would run them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from opentelemetry.sdk.trace import SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from plangate.replay import otlp_json_from_spans
from tests.conftest import REPO
from tests.helpers import plangate


def test_import_then_eval_reproduces_tau_bench_pass_hat_k(corpus: Path, tmp_path: Path) -> None:
    table = tmp_path / "tau.parquet"
    done = plangate(
        "import", "tau-bench", str(corpus / "tau-bench" / "gpt-4o-airline.json"), "-o", str(table)
    )
    assert done.returncode == 0, done.stderr
    assert "200 turns, 200 sessions" in done.stdout

    scores = tmp_path / "scores.parquet"
    done = plangate("eval", str(table), "-o", str(scores), "--json")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    hats = [round(r["pass_hat_k"], 3) for r in summary["repeats"]]
    assert hats == [0.42, 0.273, 0.22, 0.2]
    rows = {row["evaluator"]: row for row in summary["evaluators"]}
    assert set(rows) == {
        "task_completion",
        "plan_adherence",
        "tool_call_loops",
        "latency",
        "trajectory_match",
        "tokens",
        "cost",
        "judge",
    }
    # No plan, no rubric naming tools or asking a judge, no time budget, no token counts: no
    # evidence, so n/a
    # on every turn.
    for name in ("plan_adherence", "trajectory_match", "latency", "tokens", "cost", "judge"):
        row = rows[name]
        assert (row["not_applicable"], row["passed"], row["pass_rate"]) == (200, 0, None), name
    completion = rows["task_completion"]
    assert (completion["passed"], completion["failed"], completion["not_applicable"]) == (
        84,
        116,
        0,
    )
    assert completion["pass_rate"] == pytest.approx(0.42)
    written = pq.read_table(scores)
    assert written.num_rows == 200 * 8
    assert set(written.column_names) >= {
        "session_id",
        "turn_index",
        "evaluator",
        "version",
        "score",
        "passed",
        "outcome",
        "label",
        "explanation",
    }


def test_import_warns_of_spans_that_lost_attributes_and_eval_does_not_pass_them(
    tmp_path: Path,
) -> None:
    """An agent's SDK kept 16 attributes a span: a long model call lost its kind and counts."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(span_limits=SpanLimits(max_span_attributes=16))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("a-long-turn")
    root = {"openinference.span.kind": "AGENT", "session.id": "s", "input.value": "Do it."}
    with (
        tracer.start_as_current_span("turn", attributes=root),
        tracer.start_as_current_span("llm", attributes={"openinference.span.kind": "LLM"}) as span,
    ):
        span.set_attribute("llm.token_count.prompt", 90_000)  # set first: dropped first
        span.set_attribute("llm.token_count.completion", 900)
        for n in range(20):
            span.set_attribute(f"llm.input_messages.{n}.message.content", f"m{n}")
    source = tmp_path / "spans.json"
    source.write_text(json.dumps(otlp_json_from_spans(exporter.get_finished_spans())))
    table = tmp_path / "table.parquet"
    done = plangate("import", "otlp-json", str(source), "-o", str(table))
    assert done.returncode == 0, done.stderr
    assert done.stderr.startswith("plangate: warning: 1 span of 1 turn lost attributes")
    assert "SpanLimits(max_span_attributes=10_000)" in done.stderr
    rubric = tmp_path / "rubric.toml"
    rubric.write_text("[default]\nmax_tokens = 1_000_000\n")
    scores = tmp_path / "scores.parquet"
    done = plangate("eval", str(table), "--rubric", str(rubric), "-o", str(scores))
    assert done.returncode == 0, done.stderr
    [tokens] = pq.read_table(scores).filter(pc.equal(pc.field("evaluator"), "tokens")).to_pylist()
    assert (tokens["outcome"], tokens["label"], tokens["score"]) == ("n/a", "lost counts", None)


def test_eval_prints_a_table_and_honours_rubric_and_params(corpus: Path, tmp_path: Path) -> None:
    table = tmp_path / "swe.parquet"
    path = corpus / "swe-agent" / "trajectories" / "demonstrations" / "ctf" / "crypto" / "eps.traj"
    assert plangate("import", "swe-agent", str(path), "-o", str(table)).returncode == 0
    rubric = tmp_path / "rubric.toml"
    rubric.write_text('[default]\nforbidden_tools = ["submit"]\n')
    done = plangate(
        "eval",
        str(table),
        "--rubric",
        str(rubric),
        "--evaluator",
        "task_completion",
        "--evaluator",
        "tool_call_loops",
    )
    assert done.returncode == 0, done.stderr
    assert (
        "task_completion" in done.stdout
        and "tool_call_loops" in done.stdout
        and "pass rate" in done.stdout
    )
    loose = plangate(
        "eval",
        str(table),
        "--evaluator",
        "tool_call_loops",
        "--param",
        "tool_call_loops.max_repeats=4",
        "--json",
    )
    assert json.loads(loose.stdout)["evaluators"][0]["passed"] == 1


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (
            ["import", "tau3", "x.json", "-o", "t.parquet"],
            "unknown import format 'tau3'; choose one of:",
        ),
        (["import", "tau-bench", "missing.json", "-o", "t.parquet"], "missing.json: no such file"),
        (["eval", "missing.parquet"], "missing.parquet: no such file"),
        (["eval", "TABLE", "--evaluator", "speed"], "unknown evaluator 'speed'; choose from:"),
        (["eval", "TABLE", "--param", "loops=3"], "expected EVALUATOR.KEY=VALUE"),
        (
            ["eval", "TABLE", "--param", "tool_call_loops.max_loops=3"],
            "evaluator 'tool_call_loops': bad parameters ['max_loops']",
        ),
        (["eval", "TABLE", "--rubric", "RUBRIC"], "unknown key 'forbiden_tools'"),
        (["eval", "NOT_PARQUET"], "not a readable Parquet file"),
    ],
)
def test_user_mistakes_exit_2_with_the_place_named(
    args: list[str], needle: str, tmp_path: Path
) -> None:
    table = tmp_path / "t.parquet"
    good = tmp_path / "conv.json"
    good.write_text(
        json.dumps([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}])
    )
    assert plangate("import", "openai-messages", str(good), "-o", str(table)).returncode == 0
    rubric = tmp_path / "r.json"
    rubric.write_text('{"default": {"forbiden_tools": []}}')
    junk = tmp_path / "junk.parquet"
    junk.write_text("not parquet")
    replaced = [
        a.replace("TABLE", str(table))
        .replace("RUBRIC", str(rubric))
        .replace("NOT_PARQUET", str(junk))
        for a in args
    ]
    done = plangate(*replaced)
    assert done.returncode == 2, done.stdout + done.stderr
    assert needle in done.stderr
    assert "Traceback" not in done.stderr


def test_import_of_a_malformed_file_names_record_and_field(tmp_path: Path) -> None:
    bad = tmp_path / "tau.json"
    bad.write_text(json.dumps([{"task_id": 1, "trial": 0, "reward": 1.0, "info": {}}]))
    out = tmp_path / "out.parquet"
    done = plangate("import", "tau-bench", str(bad), "-o", str(out))
    assert done.returncode == 2
    assert str(bad) in done.stderr and "record 0" in done.stderr and "traj" in done.stderr
    assert not out.exists()


def test_the_help_lists_every_import_format() -> None:
    from plangate.ci.cli._arguments import IMPORT_FORMATS
    from plangate.replay import import_formats

    assert tuple(import_formats()) == IMPORT_FORMATS


@pytest.mark.parametrize("argv", [["variants"], ["run", "Sort the LLM spans by latency"]])
def test_plangate_run_does_not_pay_for_pandas(argv: list[str]) -> None:
    code = (
        "import sys\nfrom plangate.ci.cli import main\n"
        f"assert main({argv!r}) == 0\nprint('pandas' in sys.modules, 'pyarrow' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.stdout.strip().endswith("False False"), done.stdout + done.stderr


@pytest.mark.parametrize("column", ["session_id", "span_kind"])
def test_a_text_that_is_not_utf8_is_named_by_file_row_and_column(
    column: str, tmp_path: Path
) -> None:
    """Parquet's strings are UTF-8; one that is not is bad input (2), never an internal error."""
    table = pq.read_table(REPO / "datasets" / "third-party" / "spans.parquet")
    row = next(i for i, v in enumerate(table[column].to_pylist()) if v)  # a row that has one
    raw = table[column].combine_chunks().cast(pa.binary()).to_pylist()
    raw[row] = raw[row][:3] + b"\xff" + raw[row][3:]
    index = table.schema.get_field_index(column)
    broken = table.set_column(index, column, pa.array(raw, pa.binary()).view(pa.string()))
    pq.write_table(broken, tmp_path / "t.parquet")
    done = plangate("eval", str(tmp_path / "t.parquet"), "-o", str(tmp_path / "scores.parquet"))
    assert done.returncode == 2, done.stderr
    assert done.stderr == (
        f"plangate: error: {tmp_path / 't.parquet'}: row {row}, column {column!r} is not UTF-8 "
        "text (invalid start byte at byte 3); write its texts as UTF-8\n"
    )
