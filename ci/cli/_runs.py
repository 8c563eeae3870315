"""`plangate runs`, `plan` and `resume`: saved sessions, and plan approval."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
from pathlib import Path
from typing import Any

from plangate.ci.cli._options import DEFAULT_STORE, STORE_ENV
from plangate.ci.cli._printing import report_turn
from plangate.harness import (
    Agent,
    PlangateError,
    SessionStore,
    get_domain,
    load_variant,
    model_from_spec,
    read_text,
)


def store_path(args: argparse.Namespace) -> Path:
    """The store a command uses: `--store`, else $PLANGATE_STORE, else .plangate/runs.db."""
    return Path(args.store or os.environ.get(STORE_ENV) or DEFAULT_STORE)


def runs(args: argparse.Namespace) -> int:
    """`plangate runs`: the saved sessions, paused runs first."""
    store = _open(args, must_exist=True)
    rows = store.sessions(args.status)
    order = {"awaiting_approval": 0, "running": 1, "idle": 2}
    for row in sorted(rows, key=lambda r: (order[r.status], r.updated_at)):
        print(f"{row.session_id:30s} {row.status:18s} {row.variant:14s} {row.updated_at}")
    if not rows:
        print("no saved sessions" + (f" with status {args.status}" if args.status else ""))
    return 0


def plan(args: argparse.Namespace) -> int:
    """`plangate plan RUN`: a session's plan (the proposed one when it waits for approval)."""
    session = _session(args)
    proposal = session.proposed_plan()
    if args.json:
        items = [item.as_dict() for item in session.plan_items()]
        print(json.dumps({"status": session.status, "proposed": proposal, "plan": items}, indent=2))
        return 0
    print(f"{session.session_id}: {session.status.replace('_', ' ')}")
    if proposal is not None:
        print("proposed plan:")
        for step in proposal:
            after = (
                f" (after {', '.join(step.get('depends_on', []))})"
                if step.get("depends_on")
                else ""
            )
            print(f"  {step.get('name')}: {step.get('description')}{after}")
    for item in session.plan_items():
        print(f"  {item.status:11s} {item.id}. {item.text}")
    return 0


def resume(args: argparse.Namespace) -> int:
    """`plangate resume RUN`: approve, edit or reject a proposed plan, or continue a turn."""
    steps = _steps(Path(args.plan)) if args.plan else None  # the input first, then the store
    session = _session(args)
    if steps is not None:
        result = asyncio.run(session.approve(steps))
    elif args.approve:
        result = asyncio.run(session.approve())
    elif args.reject:
        result = asyncio.run(session.reject(args.reason))
    else:
        result = asyncio.run(session.resume())
    return report_turn(result, as_json=args.json)


def _open(args: argparse.Namespace, *, must_exist: bool) -> SessionStore:
    path = store_path(args)
    if must_exist and not path.is_file():
        raise PlangateError(
            f"no session store at {path}; runs are saved with `plangate run --store {path}`"
        )
    return SessionStore(path)


def _session(args: argparse.Namespace) -> Any:
    store = _open(args, must_exist=True)
    saved = store.load(args.session)
    if saved is None:
        known = ", ".join(s.session_id for s in store.sessions()[:10]) or "none"
        raise PlangateError(f"no saved session {args.session!r} in {store.path}; known: {known}")
    metadata = saved.state.get("metadata", {})
    domain = get_domain(metadata.get("domain", "observability"))
    agent = Agent(
        model=model_from_spec(
            metadata.get("model", "sim:diligent"), domain=domain, seed=metadata.get("seed", 0)
        ),
        variant=load_variant(metadata.get("variant_source", saved.variant)),
        tools=domain.make_tools,
        instructions=domain.instructions,
        store=store,
    )
    return agent.session(args.session, user_id=saved.user_id, metadata=metadata)


def _steps(path: Path) -> list[dict[str, Any]]:
    text = read_text(path, "plan file")
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise PlangateError(f"{path}: not valid JSON ({exc})") from exc
    steps = data.get("steps", data) if isinstance(data, dict) else data
    if not isinstance(steps, list) or not all(isinstance(s, dict) for s in steps):
        raise PlangateError(f"{path}: expected a list of steps {{name, description, depends_on}}")
    return steps
