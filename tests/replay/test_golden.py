"""Golden datasets: record, validate, replay, tamper, atomic writes, redaction, from traces."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from plangate.harness import OutputError
from plangate.replay import (
    GoldenDataset,
    ReferenceAgent,
    SessionRequest,
    dataset_from_traces,
    read_dataset,
    record,
    replay_turn,
    validate_dataset,
    write_dataset,
)

PLANNED = (
    "Sort the LLM spans by latency, identify the bottlenecks, and write a report with "
    "suggested improvements."
)
REQUESTS = (
    SessionRequest(
        session_id="s1",
        requests=(PLANNED, "Which model uses the most tokens? Show me the token usage by model."),
        rubrics=({"required_tools": ["find_bottlenecks"]}, None),
    ),
    SessionRequest(session_id="s2", requests=("What is the p95 latency per span kind?",)),
    SessionRequest(
        session_id="s3",
        requests=("List the failed tool spans, identify the bottlenecks, and write a report.",),
        model="sim:looper",
    ),
)
SECRETS = (
    "sk-proj-abcdefghijklmnop1234567890",
    "Bearer abcdef.ghijkl.mnopqrstuvwxyz",
    "user:hunter2pass",
    "ACME-123456",
)


def _record(requests: tuple[SessionRequest, ...] = REQUESTS, **options: Any) -> GoldenDataset:
    return asyncio.run(
        record(requests, name="golden", variant="alyx", model="sim:diligent", **options)
    )


@pytest.fixture(scope="module")
def golden(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small dataset written once for the module; tests copy it before changing it."""
    return write_dataset(_record(), tmp_path_factory.mktemp("golden") / "golden")


@pytest.fixture
def copy(golden: Path, tmp_path: Path) -> Path:
    """A private copy of the module's dataset."""
    return Path(shutil.copytree(golden, tmp_path / "golden"))


def _pairs(dataset: GoldenDataset) -> list[tuple[str, int]]:
    turns = dataset.turns
    return list(zip(turns["session_id"].to_pylist(), turns["turn_index"].to_pylist(), strict=True))


def test_a_written_dataset_validates(golden: Path) -> None:
    assert validate_dataset(golden) == []
    manifest = json.loads((golden / "manifest.json").read_text())
    assert manifest["counts"]["sessions"] == 3 and manifest["counts"]["turns"] == 4


def test_strict_cassette_replay_reproduces_every_turn(golden: Path) -> None:
    dataset = read_dataset(golden)
    for session, turn in _pairs(dataset):
        result = asyncio.run(replay_turn(dataset, session, turn))
        assert result.error is None, result.error
        assert result.divergence is None
        assert result.replayed == json.loads(dataset.turn(session, turn)["steps"])


def test_another_variant_on_a_simulated_model_diverges_at_step_0(golden: Path) -> None:
    dataset = read_dataset(golden)
    result = asyncio.run(
        replay_turn(dataset, "s1", 0, agent=ReferenceAgent("naive"), model="sim:diligent")
    )
    assert result.divergence is not None and result.divergence.step == 0
    assert result.divergence.recorded is not None
    assert result.divergence.recorded.startswith("call todo_write")


def test_strict_cassette_with_another_variant_names_the_first_difference(golden: Path) -> None:
    result = asyncio.run(replay_turn(read_dataset(golden), "s1", 0, agent=ReferenceAgent("naive")))
    assert result.error is not None
    assert "model call 1 no longer matches the recording" in result.error
    assert "offered tools" in result.error


def test_a_changed_byte_is_named_with_its_file_and_hash(copy: Path) -> None:
    path = copy / "turns.parquet"
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    problems = validate_dataset(copy)
    assert len(problems) == 1
    assert str(path) in problems[0] and "SHA-256" in problems[0]


def _rewrite(folder: Path, name: str, table: Any) -> None:
    """Write a table and update the manifest's hash, as a careless editor would."""
    import hashlib

    pq.write_table(table, folder / name)
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["files"][name] = hashlib.sha256((folder / name).read_bytes()).hexdigest()
    (folder / "manifest.json").write_text(json.dumps(manifest))


def test_a_removed_column_is_named(copy: Path) -> None:
    table = pq.read_table(copy / "tool_cassette.parquet").drop_columns(["tool_args"])
    _rewrite(copy, "tool_cassette.parquet", table)
    problems = validate_dataset(copy)
    assert any("tool_cassette.parquet" in p and "'tool_args' is missing" in p for p in problems)


def test_a_turn_of_a_missing_session_is_named_with_file_column_and_row(copy: Path) -> None:
    sessions = pq.read_table(copy / "sessions.parquet")
    _rewrite(copy, "sessions.parquet", sessions.slice(1))  # drop s1
    problems = validate_dataset(copy)
    assert problems[0] == (
        f"{copy / 'turns.parquet'}: column 'session_id', row 0: session 's1' is not in "
        "sessions.parquet"
    )


def test_a_failed_write_leaves_the_previous_dataset_intact(
    copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = {p.name: p.read_bytes() for p in copy.iterdir()}
    real = pq.write_table
    written = []

    def failing(table: Any, where: Any, **options: Any) -> None:
        written.append(where)
        if len(written) == 3:
            raise OSError("disk full")
        real(table, where, **options)

    monkeypatch.setattr(pq, "write_table", failing)
    with pytest.raises(OutputError, match=f"^cannot write {re.escape(str(copy))}: disk full$"):
        write_dataset(_record(REQUESTS[1:2]), copy)  # the folder named, not its staging copy
    assert {p.name: p.read_bytes() for p in copy.iterdir()} == before
    assert [p.name for p in copy.parent.iterdir()] == ["golden"]
    assert validate_dataset(copy) == []


def test_secrets_are_redacted_from_every_file_and_replay_still_matches(tmp_path: Path) -> None:
    leaky = SessionRequest(
        session_id="leaky",
        requests=(
            f"My key is {SECRETS[0]}, header Authorization: {SECRETS[1]}, the db is "
            f"https://{SECRETS[2]}@db.example.com, ticket {SECRETS[3]}. What is the p95 "
            "latency per span kind?",
        ),
    )
    dataset = _record((leaky,), redact=[r"ACME-\d{6}"])
    folder = write_dataset(dataset, tmp_path / "leaky")
    for path in folder.iterdir():
        content = path.read_bytes()
        for secret in (*SECRETS, "hunter2pass"):
            assert secret.encode() not in content, (path.name, secret)
    assert b"[REDACTED]" in (folder / "turns.parquet").read_bytes()
    result = asyncio.run(replay_turn(read_dataset(folder), "leaky", 0))
    assert result.error is None and result.divergence is None


def test_a_dataset_from_its_own_spans_has_the_same_turns(golden: Path, tmp_path: Path) -> None:
    dataset = read_dataset(golden)
    rebuilt = dataset_from_traces(dataset.spans, name="again")
    folder = write_dataset(rebuilt, tmp_path / "again")
    assert validate_dataset(folder) == []
    for session, turn in _pairs(dataset):
        old, new = dataset.turn(session, turn), rebuilt.turn(session, turn)
        assert new["request"] == old["request"]
        assert json.loads(new["steps"]) == json.loads(old["steps"])
        assert [m["role"] for m in json.loads(new["messages"])] == [
            m["role"] for m in json.loads(old["messages"])
        ]
    assert rebuilt.model_cassette["fingerprint"].to_pylist() == (
        dataset.model_cassette["fingerprint"].to_pylist()
    )
    assert rebuilt.session("s3")["model"] == "sim:looper"
    assert rebuilt.session("s1")["variant"] == "alyx"
    first = asyncio.run(replay_turn(rebuilt, "s1", 0))
    assert first.error is None and first.divergence is None


def test_arguments_that_are_not_json_make_a_valid_golden(golden: Path, tmp_path: Path) -> None:
    # Another agent's model cut a call's arguments short: the trace keeps the text as given,
    # and so does the golden (a replayed call is looked up by that text), which validates.
    spans = read_dataset(golden).spans
    arguments = spans["tool_args"].to_pylist()
    first = next(i for i, kind in enumerate(spans["span_kind"].to_pylist()) if kind == "TOOL")
    arguments[first] = '{"query": "p95 lat'
    index = spans.schema.get_field_index("tool_args")
    cut = spans.set_column(index, spans.schema.field(index), pa.array(arguments, pa.string()))
    folder = write_dataset(dataset_from_traces(cut, name="cut"), tmp_path / "cut")
    assert validate_dataset(folder) == []
    assert '{"query": "p95 lat' in read_dataset(folder).tool_cassette["tool_args"].to_pylist()


def test_from_traces_keeps_only_the_chosen_sessions(golden: Path) -> None:
    dataset = read_dataset(golden)
    rebuilt = dataset_from_traces(dataset.spans, name="one", sessions=["s2"])
    assert set(rebuilt.spans["session_id"].to_pylist()) == {"s2"}
    assert rebuilt.turns.num_rows == 1
    with pytest.raises(Exception, match="'nope' is not in the trace table"):
        dataset_from_traces(dataset.spans, name="x", sessions=["nope"])


def test_memory_before_a_turn_is_recorded_and_restored_on_replay(tmp_path: Path) -> None:
    from plangate.harness import load_variant

    variant_file = tmp_path / "alyx-memory.toml"
    variant_file.write_text('name = "alyx-memory"\n[context]\nmemory = true\n', encoding="utf-8")
    assert load_variant(str(variant_file)).context.memory
    memory = tmp_path / "memory"
    (memory / "dana").mkdir(parents=True)
    (memory / "dana" / "default.md").write_text(
        "# Dana\n- Wants reports as bullet lists.\n", encoding="utf-8"
    )
    requests = [
        SessionRequest(
            session_id="with-memory",
            user_id="dana",
            requests=(
                "Sort the LLM spans by latency, identify the bottlenecks, and write a report with suggested improvements.",
                "Thanks.",
            ),
        )
    ]
    dataset = asyncio.run(
        record(
            requests, name="mem", variant=str(variant_file), model="sim:diligent", memory_dir=memory
        )
    )
    first = dataset.turn("with-memory", 0)
    assert first["memory_before"] == "# Dana\n- Wants reports as bullet lists.\n"
    (memory / "dana" / "default.md").write_text("changed after the recording\n", encoding="utf-8")
    import tempfile

    leftovers = set(Path(tempfile.gettempdir()).glob("plangate-replay-memory-*"))
    replayed = asyncio.run(replay_turn(dataset, "with-memory", 0))
    assert replayed.error is None and replayed.divergence is None
    assert set(Path(tempfile.gettempdir()).glob("plangate-replay-memory-*")) == leftovers
