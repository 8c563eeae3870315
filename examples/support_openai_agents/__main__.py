"""The Agents SDK support desk as a `command:` agent: one JSON turn per line, one reply per line.

    plangate record --agent "command:python -m examples.support_openai_agents" ...
    plangate gate gate.toml   # a side with args = ["--max-turns", "6"] or ["--no-task-list"]

Each line on standard input is a turn (plangate's `TurnInput` as JSON); each line on standard
output is the reply (`{"answer", "state", "messages"}`, or `{"error"}` when the turn failed).
Logs go to standard error. The model endpoint is the turn's `model.base_url` (plangate sets it
per turn), else `OPENAI_BASE_URL` and `OPENAI_API_KEY` (which plangate sets for the process).
The turn's spans go to its `telemetry.otlp_endpoint`, else `OTEL_EXPORTER_OTLP_ENDPOINT`;
without either, nowhere.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import Sequence
from typing import Any

from examples.support_openai_agents.agent import make
from plangate.replay.agents import LOCAL_API_KEY, TurnInput

OTLP_ENDPOINT = "OTEL_EXPORTER_OTLP_ENDPOINT"


def main(argv: Sequence[str] | None = None) -> int:
    """Serve turns until standard input closes."""
    parser = argparse.ArgumentParser(prog="python -m examples.support_openai_agents")
    parser.add_argument("--max-turns", type=int, default=30, help="model calls per turn, at most")
    parser.add_argument("--no-task-list", action="store_true", help="no todo list in the context")
    args = parser.parse_args(argv)
    turn = make(max_turns=args.max_turns, task_list=not args.no_task_list)
    with asyncio.Runner() as runner:
        for line in sys.stdin:
            if not line.strip():
                continue
            try:
                output = runner.run(turn(turn_input(json.loads(line))))
                reply: dict[str, Any] = {"answer": output.answer, "state": output.state}
                if output.messages is not None:
                    reply["messages"] = list(output.messages)
            except Exception as exc:  # the turn fails; the process serves the next one
                print(f"turn failed: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
                reply = {"error": f"{type(exc).__name__}: {exc}"}
            print(json.dumps(reply, ensure_ascii=False), flush=True)
        runner.run(turn.aclose())
    return 0


def turn_input(data: dict[str, Any]) -> TurnInput:
    """A turn's JSON object as a `TurnInput`, its model endpoint filled from the environment."""
    model = data.get("model") or {}
    telemetry = data.get("telemetry") or {}
    return TurnInput(
        session_id=data["session_id"],
        turn_index=data["turn_index"],
        request=data["request"],
        history=tuple(data.get("history") or ()),
        user_id=data.get("user_id", "user"),
        state=data.get("state"),
        model_base_url=model.get("base_url") or os.environ["OPENAI_BASE_URL"],
        model_api_key=model.get("api_key") or os.environ.get("OPENAI_API_KEY", LOCAL_API_KEY),
        model_name=model.get("name") or "plangate",  # the endpoint serves its route's model
        tools_url=data.get("tools_url"),
        otlp_endpoint=telemetry.get("otlp_endpoint") or os.environ.get(OTLP_ENDPOINT),
    )


if __name__ == "__main__":
    sys.exit(main())
