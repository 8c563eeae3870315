"""Saved sessions: every change saved in one transaction, resumed after a crash, isolated."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from plangate.harness import ScriptedModel, SessionError, UserMessage
from plangate.harness._store import SessionStore, StoreError
from tests.conftest import REPO
from tests.helpers import agent, call

TWO_TASKS = "Add 1 and 2, then add 3 and 4"
PLAN = call("todo_write", "w", todos=[{"content": "Add 1 and 2"}, {"content": "Add 3 and 4"}])


def first_half() -> list[object]:
    return [
        PLAN,
        call("todo_update", "u1", item_id=1, status="in_progress"),
        call("add", "a1", a=1, b=2),
    ]


def second_half() -> list[object]:
    return [
        call("todo_update", "u2", item_id=1, status="completed"),
        call("todo_update", "u3", item_id=2, status="in_progress"),
        call("add", "a2", a=3, b=4),
        call("todo_update", "u4", item_id=2, status="completed"),
        call("finish", "f", summary="3 and 7"),
    ]


async def test_a_finished_session_is_restored_whole(tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "runs.db")
    model = ScriptedModel(
        [
            *first_half(),
            *second_half(),
            call("todo_read", "r"),
            call("finish", "g", summary="still"),
        ]
    )
    session = agent(model, store=store).session("s1", user_id="ana")
    await session.run_turn(TWO_TASKS)

    saved = store.load("s1")
    assert (
        saved is not None
        and saved.status == "idle"
        and saved.user_id == "ana"
        and saved.variant == "alyx"
    )
    again = agent(model, store=store).session("s1")
    assert again.turns == 1
    assert again.history == session.history
    assert [i.status for i in again.plan_items()] == ["completed", "completed"]
    second = await again.run_turn("Show me the plan, then summarize it")
    assert "[x] 2. Add 3 and 4" in second.tool_calls[0].content
    model.assert_complete()


async def test_every_change_is_saved(tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "runs.db")
    seen: list[tuple[str, int, int]] = []
    original = store.save

    def spy(session_id, status, state, **kw):  # type: ignore[no-untyped-def]
        turn = state["turn"]
        seen.append((status, len(turn["messages"]) if turn else -1, len(state["history"])))
        original(session_id, status, state, **kw)

    store.save = spy  # type: ignore[method-assign]
    model = ScriptedModel([*first_half(), *second_half()])
    await agent(model, store=store).session("s1").run_turn(TWO_TASKS)
    # The start, then each model reply and each tool call, then the end.
    assert seen[0] == ("running", 1, 0)
    assert seen[1:3] == [("running", 2, 0), ("running", 3, 0)]
    assert seen[-1] == ("idle", -1, 17)
    assert len(seen) == 2 + 2 * 8


CRASHING_RUN = textwrap.dedent(
    """
    import asyncio, os, sys
    from plangate.harness import AssistantMessage
    from plangate.harness.models import FunctionModel
    from plangate.harness._store import SessionStore
    from tests.helpers import agent, call

    script = [
        call("todo_write", "w", todos=[{"content": "Add 1 and 2"}, {"content": "Add 3 and 4"}]),
        call("todo_update", "u1", item_id=1, status="in_progress"),
        call("add", "a1", a=1, b=2),
    ]

    def answer(messages, tools):
        if not script:
            os._exit(9)  # the process dies mid-turn, between two model calls
        return AssistantMessage(tool_calls=(script.pop(0),))

    store = SessionStore(sys.argv[1])
    asyncio.run(agent(FunctionModel(answer), store=store).session("crashy").run_turn(
        "Add 1 and 2, then add 3 and 4"))
    """
)


async def test_a_run_killed_mid_turn_resumes_from_its_last_saved_state(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    died = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-c", CRASHING_RUN, str(path)],
        cwd=REPO,
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert died.returncode == 9, died.stderr.decode()

    store = SessionStore(path)
    assert store.load("crashy").status == "running"  # type: ignore[union-attr]
    model = ScriptedModel(second_half())
    session = agent(model, store=store).session("crashy")
    assert session.status == "running"
    with pytest.raises(SessionError, match="has a turn running"):
        await session.run_turn("something else")
    result = await session.resume()
    model.assert_complete()

    assert result.stop_reason == "finished" and result.answer == "3 and 7"
    assert [c.name for c in result.tool_calls][:3] == ["todo_write", "todo_update", "add"]
    assert [e.kind for e in result.events].count("resumed") == 1
    # The model picked up exactly where the dead process left off.
    assert model.requests[0].messages[-1].role == "tool"
    assert store.load("crashy").status == "idle"  # type: ignore[union-attr]
    with pytest.raises(SessionError, match="nothing to resume"):
        await session.resume()


async def test_sessions_never_see_each_others_state(tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "runs.db")
    one = agent(ScriptedModel([*first_half(), *second_half()]), store=store).session("one")
    two = agent(ScriptedModel([call("finish", "f", summary="hi")]), store=store).session("two")
    await one.run_turn(TWO_TASKS)
    await two.run_turn("Say hi")
    restored_two = agent(ScriptedModel([]), store=store).session("two")
    assert restored_two.plan_items() == ()
    assert restored_two.history[0] == UserMessage(content="Say hi")
    assert {s.session_id for s in store.sessions()} == {"one", "two"}
    assert [s.session_id for s in store.sessions("awaiting_approval")] == []


async def test_a_failed_write_leaves_the_previous_state_intact(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    store = SessionStore(path)
    await (
        agent(ScriptedModel([call("finish", "f", summary="one")]), store=store)
        .session("s")
        .run_turn("first")
    )
    before = store.load("s")
    assert before is not None

    # The database refuses the next update, as a full disk would.
    sqlite3.connect(path).executescript(
        "create trigger refuse before update on sessions begin select raise(abort, 'disk full'); end;"
    )
    with pytest.raises(StoreError, match="could not save session 's'.*disk full"):
        await (
            agent(ScriptedModel([call("finish", "f", summary="two")]), store=store)
            .session("s")
            .run_turn("second")
        )
    after = store.load("s")
    assert after is not None and after.state == before.state and after.status == "idle"

    # A state that cannot be serialized never reaches the database either.
    with pytest.raises(TypeError):
        store.save("s", "idle", {"bad": object()}, variant="x", user_id="u")
    assert store.load("s").state == before.state  # type: ignore[union-attr]


def test_a_store_that_cannot_be_opened_is_a_clear_error(tmp_path: Path) -> None:
    folder = tmp_path / "a-folder.db"
    folder.mkdir()
    with pytest.raises(StoreError, match="cannot open the session store"):
        SessionStore(folder)


def test_saved_state_is_plain_json(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    store = SessionStore(path)
    import asyncio

    asyncio.run(
        agent(ScriptedModel([call("finish", "f", summary="ok")]), store=store)
        .session("s")
        .run_turn("hi")
    )
    (text,) = sqlite3.connect(path).execute("select state from sessions").fetchone()
    state = json.loads(text)
    assert state["version"] == 1 and state["turn"] is None and state["turns"] == 1


async def test_a_session_id_saved_by_another_variant_is_a_clear_error(tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "runs.db")
    model = ScriptedModel([*first_half(), *second_half()])
    await agent(model, store=store).session("s1").run_turn(TWO_TASKS)
    with pytest.raises(SessionError, match="session 's1' was saved by variant 'alyx'"):
        agent(ScriptedModel([]), "flux", store=store).session("s1")
