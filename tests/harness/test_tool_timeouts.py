"""A tool's environment failing: timeouts and `ToolSourceError` stop the turn as `tool_error`.

A tool's own failure (an exception, even its own `TimeoutError`) is the model's to handle and
the turn goes on; a failure of what serves the tools (a hang past the variant's timeout, a
source that raises `ToolSourceError`) is infrastructure: the turn stops with `tool_error`,
which every evaluator counts as an error and never as a pass or a fail.
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
from collections.abc import Iterator

import pyarrow as pa
import pytest

from plangate.ci.cli._printing import report_turn
from plangate.evaluators import evaluate
from plangate.harness import (
    ERROR_STOP_REASONS,
    Agent,
    ConfigError,
    ScriptedModel,
    Tool,
    ToolSourceError,
    TurnResult,
    load_variant,
    parse_variant,
    tool,
)
from plangate.harness._variant import ToolSettings
from plangate.replay import trace_table_provider
from plangate.replay._cassette import Recorder, ToolRecord, cassette_tools, recording_tools
from tests.helpers import add, agent, call

RELEASE = threading.Event()
"""Set at the end of each test: lets an abandoned tool thread finish."""


@pytest.fixture(autouse=True)
def _release_hung_threads() -> Iterator[None]:
    RELEASE.clear()
    yield
    RELEASE.set()


@tool
def hang_sync(query: str) -> str:
    """A sync tool that never answers (until the test ends).

    Args:
        query: Anything.
    """
    RELEASE.wait(30)
    return "late"


@tool
async def hang_async(query: str) -> str:
    """An async tool that never answers.

    Args:
        query: Anything.
    """
    await asyncio.sleep(30)
    return "late"


@tool
def own_timeout(query: str) -> str:
    """A tool whose own client times out, at once: the model's to handle.

    Args:
        query: Anything.
    """
    raise TimeoutError("the search backend timed out")


@tool
def source_down(query: str) -> str:
    """A tool whose server is down: what serves the tool failed.

    Args:
        query: Anything.
    """
    raise ToolSourceError("the tool server at 127.0.0.1:9 refused the connection")


async def run_one(
    tools: tuple[Tool, ...], script: list[object], seconds: float = 0.2
) -> tuple[TurnResult, pa.Table]:
    """One turn of the naive variant with a tool timeout; the turn and its trace table."""
    provider, exporter = trace_table_provider()
    model = ScriptedModel(script)
    variant = dataclasses.replace(load_variant("naive"), tools=ToolSettings(timeout=seconds))
    built = Agent(model=model, variant=variant, tools=lambda: tools, tracer_provider=provider)
    result = await built.session("s").run_turn("look it up")
    model.assert_complete()
    return result, exporter.table()


@pytest.mark.parametrize("hanging", [hang_sync, hang_async], ids=["sync", "async"])
async def test_a_tool_that_hangs_past_the_timeout_stops_the_turn_as_tool_error(
    hanging: Tool,
) -> None:
    began = time.perf_counter()
    result, table = await run_one((hanging,), [call(hanging.name, "c1", query="x")])
    waited = time.perf_counter() - began

    assert result.stop_reason == "tool_error"
    assert "did not answer within 0.2 s" in result.stop_detail
    assert waited < 10  # the loop stopped waiting: it did not wait the tool's 30 s out
    (record,) = result.tool_calls
    assert (record.name, record.status) == (hanging.name, "error")
    assert [e.kind for e in result.events if e.kind == "tool_error"] == ["tool_error"]
    agents = [r for r in table.to_pylist() if r["span_kind"] == "AGENT"]
    assert [(a["stop_reason"], a["status_code"]) for a in agents] == [("tool_error", "ERROR")]
    scores = evaluate(table).to_pylist()
    assert scores and {s["outcome"] for s in scores} == {"error"}
    assert all("tool_error" in s["explanation"] for s in scores)


async def test_a_tool_within_its_timeout_answers_as_usual_sync_and_async() -> None:
    @tool
    async def double(n: int) -> int:
        """Double a number.

        Args:
            n: The number.
        """
        return 2 * n

    script = [call("add", "a", a=1, b=2), call("double", "d", n=4), "3 and 8"]
    result, _ = await run_one((add, double), script, seconds=5)

    assert result.stop_reason == "finished"
    assert [(c.name, c.status, c.content) for c in result.tool_calls] == [
        ("add", "ok", "3"),
        ("double", "ok", "8"),
    ]


async def test_a_tools_own_timeout_error_is_the_models_to_handle() -> None:
    script = [call("own_timeout", "c1", query="x"), "the search is down, sorry"]
    result, table = await run_one((own_timeout,), script, seconds=5)

    assert result.stop_reason == "finished"
    (record,) = result.tool_calls
    assert record.status == "error"
    assert "TimeoutError: the search backend timed out" in record.content
    assert "error" not in {s["outcome"] for s in evaluate(table).to_pylist()}


async def test_a_tool_source_error_stops_the_turn_without_any_timeout() -> None:
    script = [call("source_down", "c1", query="x"), call("source_down", "c2", query="y")]
    model = ScriptedModel([script[0]])
    result = await agent(model, tools=(source_down,), variant="naive").session("s").run_turn("q")
    model.assert_complete()

    assert result.stop_reason == "tool_error"
    assert result.stop_detail == "the tool server at 127.0.0.1:9 refused the connection"
    assert result.tool_calls[0].content.startswith("Not run: the tool server")
    assert "tool_error" in ERROR_STOP_REASONS


async def test_run_exits_2_on_a_tool_error(capsys: pytest.CaptureFixture[str]) -> None:
    model = ScriptedModel([call("source_down", "c1", query="x")])
    result = await agent(model, tools=(source_down,), variant="naive").session("s").run_turn("q")

    assert report_turn(result, as_json=True) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "plangate: error: the tools failed: the tool server at 127.0.0.1:9 refused the connection"
    ]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('timeout = "soon"', "'tools.timeout' must be a number >= 0, not 'soon'"),
        ("timeout = -1", "'tools.timeout' must be a number >= 0, not -1"),
        ("timeout = true", "'tools.timeout' must be a number >= 0, not True"),
        ("timeout = nan", "'tools.timeout' must be a number >= 0, not nan"),
        ("retries = 2", "unknown key 'tools.retries'"),
    ],
)
def test_a_bad_tool_timeout_is_named(text: str, problem: str) -> None:
    with pytest.raises(ConfigError, match=problem.replace("(", r"\(")):
        parse_variant(f'name = "v"\n[tools]\n{text}\n', "v.toml")


def test_a_whole_number_timeout_reads_as_seconds() -> None:
    variant = parse_variant('name = "v"\n[tools]\ntimeout = 2\n', "v.toml")
    assert variant.tools.timeout == 2.0
    assert load_variant("alyx").tools.timeout == 0  # no limit unless a variant sets one


def test_recording_keeps_a_sync_tool_sync_so_a_timeout_can_stop_it() -> None:
    recorder = Recorder()
    (recorded,) = recording_tools([add], recorder)
    assert recorded.is_async is False
    assert recorded.function(a=1, b=2) == 3
    assert [(r.tool_name, r.tool_args, r.result) for r in recorder.tool_records] == [
        ("add", '{"a":1,"b":2}', "3")
    ]


async def test_a_tool_source_error_recorded_with_allow_errors_replays_as_one() -> None:
    record = ToolRecord(
        session_id="s", turn_index=0, position=0, tool_name="source_down",
        tool_args='{"query":"x"}', status="error", result="the tool server is down",
        error_type="ToolSourceError",
    )  # fmt: skip
    model = ScriptedModel([call("source_down", "c1", query="x")])
    served = cassette_tools([source_down], [record])
    result = await agent(model, tools=tuple(served), variant="naive").session("s").run_turn("q")

    assert (result.stop_reason, result.stop_detail) == ("tool_error", "the tool server is down")
