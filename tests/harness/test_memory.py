"""Memory, end to end on the real session loop and a scripted model."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from plangate.harness import (
    Agent,
    ConfigError,
    ModelError,
    ScriptedModel,
    SystemMessage,
    UserMessage,
    Variant,
    load_variant,
)
from plangate.harness.features._memory import MAX_CHARS, UPDATE_PROMPT, Memory, MemoryPathError
from plangate.harness.plans import PLAN_HEADER
from tests.helpers import WORK_TOOLS, call

TWO_TASKS = "Add 1 and 2, then add 3 and 4"
ONE_TASK = "What is 1 plus 2?"
MEMORY = "- Ana prefers metric units."


def variant(**switches: bool) -> Variant:
    """The alyx variant with some `context` switches turned on."""
    loaded = load_variant("alyx")
    return dataclasses.replace(loaded, context=dataclasses.replace(loaded.context, **switches))


def make_agent(model: ScriptedModel, switches: dict[str, bool], **kw: Any) -> Agent:
    return Agent(model=model, variant=variant(**switches), tools=lambda: WORK_TOOLS, **kw)


def traced() -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def memory_of(session: Any) -> Memory:
    return next(f for f in session.features if isinstance(f, Memory))


def events(spans: Sequence[ReadableSpan], name: str) -> list[dict[str, Any]]:
    return [dict(e.attributes or {}) for s in spans for e in s.events if e.name == name]


# -- memory -----------------------------------------------------------------------------------


async def test_memory_is_loaded_after_the_plan_on_every_call_and_no_change_keeps_it(
    tmp_path: Path,
) -> None:
    path = tmp_path / "ana" / "default.md"
    path.parent.mkdir()
    path.write_text(MEMORY + "\n", encoding="utf-8")
    before = path.stat().st_mtime_ns
    todos = [{"content": "Add 1 and 2"}, {"content": "Add 3 and 4"}]
    model = ScriptedModel(
        [
            call("todo_write", "w", todos=[{**t, "status": "completed"} for t in todos]),
            call("add", "a", a=1, b=2),
            call("finish", "f", summary="3 and 7"),
            "NO_CHANGE",  # the separate memory update step
        ]
    )
    # memory_dir as a str works as a path
    session = make_agent(model, {"memory": True}, memory_dir=str(tmp_path)).session(user_id="ana")
    result = await session.run_turn(TWO_TASKS)
    model.assert_complete()
    assert result.stop_reason == "finished"
    *turn_calls, update = model.requests
    for seen in turn_calls:
        assert isinstance(seen.messages[0], SystemMessage)
        assert seen.messages[1].content.startswith(PLAN_HEADER)
        assert seen.messages[2] == SystemMessage(content=f"# Memory of ana\n{MEMORY}")
        assert seen.messages[3] == UserMessage(content=TWO_TASKS)
    assert update.tools == ()
    assert update.messages[0] == SystemMessage(content=UPDATE_PROMPT)
    assert MEMORY in update.messages[1].content
    assert TWO_TASKS in update.messages[1].content and "3 and 7" in update.messages[1].content
    assert path.read_text(encoding="utf-8") == MEMORY + "\n"
    assert path.stat().st_mtime_ns == before
    assert [u.status for u in memory_of(session).updates] == ["unchanged"]


async def test_memory_is_written_after_a_turn_and_read_on_the_next(tmp_path: Path) -> None:
    provider, exporter = traced()
    new = "# Ana\n- Prefers metric units."
    model = ScriptedModel(
        [
            call("finish", "f", summary="3"),
            f"```markdown\n{new}\n```",  # a fenced answer is unwrapped
            call("finish", "g", summary="hello again"),
            "NO_CHANGE",
        ]
    )
    agent = make_agent(model, {"memory": True}, memory_dir=tmp_path, tracer_provider=provider)
    session = agent.session("s", user_id="ana")
    first = await session.run_turn(ONE_TASK)
    assert [e.kind for e in first.events][-2:] == ["memory_updated", "stop"]
    memory_span = next(s for s in exporter.get_finished_spans() if s.name == "memory.update")
    turn_span = next(s for s in exporter.get_finished_spans() if s.name == "agent.turn")
    assert (
        memory_span.parent is not None and memory_span.parent.span_id == turn_span.context.span_id
    )
    assert not any("# Memory of" in m.content for m in model.requests[0].messages)
    assert (tmp_path / "ana" / "default.md").read_text(encoding="utf-8") == new + "\n"
    await session.run_turn("Hello")
    model.assert_complete()
    # No plan on a one-action request: the memory sits right after the system prompt.
    assert model.requests[2].messages[1] == SystemMessage(content=f"# Memory of ana\n{new}")
    assert [u.status for u in memory_of(session).updates] == ["written", "unchanged"]
    spans = exporter.get_finished_spans()
    chain = [s for s in spans if s.name == "memory.update"]
    assert len(chain) == 2
    assert (chain[0].attributes or {})["openinference.span.kind"] == "CHAIN"
    llm = [
        s for s in spans if s.parent is not None and s.parent.span_id == chain[0].context.span_id
    ]
    assert [(s.attributes or {})["openinference.span.kind"] for s in llm] == ["LLM"]
    details = [e["plangate.detail"] for e in events(spans, "memory_updated")]
    assert details[0].startswith("written: ") and details[1] == "unchanged"


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        ("Ana's key is sk-proj-abcdefghijklmnop1234", "an API key (sk-…)"),
        ("Use Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.abc", "a bearer token"),
        ("AWS key AKIAIOSFODNN7EXAMPLE for deploys", "an AWS access key"),
        ("DB at postgres://ana:hunter2@db.example.com/app", "a password in a URL"),
        ("-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----", "a private key"),
        ("x" * (MAX_CHARS + 1), "over the 8,000 limit"),
        ("Ana\x00likes tea", "control character U+0000"),
        ("Ana\x1b[31mlikes tea", "control character U+001B"),
        ("   ", "empty"),
    ],
)
async def test_unsafe_memory_writes_are_rejected_and_the_old_file_kept(
    tmp_path: Path, answer: str, reason: str
) -> None:
    provider, exporter = traced()
    path = tmp_path / "ana" / "default.md"
    path.parent.mkdir()
    path.write_text(MEMORY, encoding="utf-8")
    model = ScriptedModel([call("finish", "f", summary="done"), answer])
    agent = make_agent(model, {"memory": True}, memory_dir=tmp_path, tracer_provider=provider)
    session = agent.session(user_id="ana")
    result = await session.run_turn(ONE_TASK)
    model.assert_complete()
    assert result.stop_reason == "finished"
    assert path.read_text(encoding="utf-8") == MEMORY
    assert sorted(p.name for p in path.parent.iterdir()) == ["default.md"]  # no temp file left
    (update,) = memory_of(session).updates
    assert update.status == "rejected"
    assert update.detail.startswith("rejected: ") and reason in update.detail
    assert update.detail.endswith("the old memory is kept")
    assert "hunter2" not in update.detail and "AKIA" not in update.detail.replace("(AKIA…)", "")
    (event,) = events(exporter.get_finished_spans(), "memory_updated")
    assert event["plangate.detail"] == update.detail


async def test_a_failed_memory_model_call_keeps_the_file_and_does_not_raise(
    tmp_path: Path,
) -> None:
    model = ScriptedModel([call("finish", "f", summary="done"), ModelError("503")])
    session = make_agent(model, {"memory": True}, memory_dir=tmp_path).session(user_id="ana")
    result = await session.run_turn(ONE_TASK)
    assert result.stop_reason == "finished"
    (update,) = memory_of(session).updates
    assert update.status == "failed" and "503" in update.detail
    assert not (tmp_path / "ana").exists()


async def test_an_unreadable_memory_file_is_skipped_and_not_overwritten(tmp_path: Path) -> None:
    (tmp_path / "ana" / "default.md").mkdir(parents=True)  # a folder where the file should be
    model = ScriptedModel([call("finish", "f", summary="done")])  # no update call is made
    session = make_agent(model, {"memory": True}, memory_dir=tmp_path).session(user_id="ana")
    result = await session.run_turn(ONE_TASK)
    model.assert_complete()
    assert result.stop_reason == "finished"
    assert not any("# Memory of" in m.content for m in model.requests[0].messages)
    (update,) = memory_of(session).updates
    assert update.status == "failed" and update.detail.startswith("failed: cannot read")
    assert (tmp_path / "ana" / "default.md").is_dir()


@pytest.mark.parametrize(
    ("user", "space"),
    [
        ("../x", "default"),
        ("a/b", "default"),
        ("..", "default"),
        (".", "default"),
        ("/etc/passwd", "default"),
        ("a\\b", "default"),
        ("a" * 65, "default"),
        ("", "default"),
        ("ana\x00", "default"),
        ("ana", "../bob/default"),
        ("ana", "a..b"),
        ("ana", "/tmp/x"),
        ("ana", 7),
    ],
)
def test_unsafe_user_and_space_ids_are_rejected(tmp_path: Path, user: str, space: Any) -> None:
    agent = make_agent(ScriptedModel([]), {"memory": True}, memory_dir=tmp_path)
    with pytest.raises(MemoryPathError, match="cannot name a memory file"):
        agent.session(user_id=user, metadata={"space": space})
    assert list(tmp_path.iterdir()) == []


def test_a_link_out_of_the_memory_folder_is_rejected(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    memory_dir = tmp_path / "memory"
    memory_dir.mkdir()
    (memory_dir / "eve").symlink_to(outside, target_is_directory=True)
    agent = make_agent(ScriptedModel([]), {"memory": True}, memory_dir=memory_dir)
    with pytest.raises(MemoryPathError, match="outside the memory folder"):
        agent.session(user_id="eve")


def test_memory_needs_a_memory_dir() -> None:
    with pytest.raises(ConfigError, match="memory_dir"):
        make_agent(ScriptedModel([]), {"memory": True}).session()


async def test_users_and_spaces_are_isolated(tmp_path: Path) -> None:
    owners = [("ana", "default"), ("ana", "work"), ("bob", "default")]
    for user, space in owners:
        model = ScriptedModel([call("finish", "f", summary="ok"), f"- {user} in {space}"])
        agent = make_agent(model, {"memory": True}, memory_dir=tmp_path)
        await agent.session(user_id=user, metadata={"space": space}).run_turn(ONE_TASK)
        model.assert_complete()
    for user, space in owners:
        path = tmp_path / user / f"{space}.md"
        assert path.read_text(encoding="utf-8") == f"- {user} in {space}\n"
        model = ScriptedModel([call("finish", "f", summary="ok"), "NO_CHANGE"])
        agent = make_agent(model, {"memory": True}, memory_dir=tmp_path)
        await agent.session(user_id=user, metadata={"space": space}).run_turn(ONE_TASK)
        shown = [m.content for m in model.requests[0].messages if "# Memory of" in m.content]
        where = "" if space == "default" else f" (space {space})"
        assert shown == [f"# Memory of {user}{where}\n- {user} in {space}"]
