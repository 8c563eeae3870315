"""Headless Chromium on Phoenix's trace view of a replayed session, with a plangate annotation.

The UI route of a trace is `/projects/<project id>/traces/<trace id>`, where the project id is
the GraphQL node id (`client.projects.get(...)["id"]`, base64 of `Project:N`) and the trace id
the OpenTelemetry one (read from the server's UI bundle, which navigates there from a span's
"View Trace in Project"). The page is a single-page app: `--virtual-time-budget` gives its
scripts time to fetch and render before the DOM is dumped and the screenshot taken. Every host
name but 127.0.0.1 resolves to nothing, so the page can only show what the local server has.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

from plangate.ci.phoenix._server import PhoenixServer
from tests.conftest import REPO
from tests.phoenix.sending import send_replayed_turn

PROJECT = "browser"
ARTIFACT = REPO / "out" / "test-artifacts" / "phoenix-trace.png"
WINDOW = (1600, 1000)


def browse(chromium: Path, profile: Path, url: str, screenshot: Path) -> str:
    """Load `url` once, give its scripts 15 s of virtual time; the DOM then, and a screenshot."""
    done = subprocess.run(
        [
            str(chromium), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
            "--no-first-run", "--disable-background-networking", "--disable-component-update",
            "--disable-sync", "--hide-scrollbars", f"--user-data-dir={profile}",
            f"--window-size={WINDOW[0]},{WINDOW[1]}",
            "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
            "--virtual-time-budget=15000", f"--screenshot={screenshot}", "--dump-dom", url,
        ],
        capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_the_trace_view_shows_the_turns_spans_and_its_annotation(
    phoenix: PhoenixServer, phoenix_client: Any, chromium: Path, tmp_path: Path
) -> None:
    sent = send_replayed_turn(phoenix, PROJECT, "obs-008", 0)
    [agent] = phoenix_client.spans.get_spans(
        project_identifier=PROJECT, trace_ids=[sent.trace_id], span_kind="AGENT"
    )
    phoenix_client.spans.add_span_annotation(
        span_id=agent["context"]["span_id"], annotation_name="task_completion",
        annotator_kind="CODE", label="pass", score=1.0, explanation="every task done", sync=True,
    )  # fmt: skip
    project_id = phoenix_client.projects.get(project_name=PROJECT)["id"]
    url = f"{phoenix.url}/projects/{project_id}/traces/{sent.trace_id}"
    shot = tmp_path / "trace.png"

    dom = browse(chromium, tmp_path / "profile", url, shot)
    ARTIFACT.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(shot, ARTIFACT)

    assert sent.result.result is not None
    calls = sent.result.result.tool_calls
    # The trace tree: one node per span, its kind as an icon titled with it.
    assert dom.count('title="agent"') == 1
    assert dom.count('title="llm"') == sent.result.result.iterations
    assert dom.count('title="tool"') == len(calls)
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", dom))
    assert sent.trace_id in text and "agent.turn" in text
    for name in {call.name for call in calls}:
        assert f"tool.{name}" in text
    assert "task_completion" in text and "1.00" in text  # the annotation, on the AGENT span
    assert shot.stat().st_size > 50_000  # a rendered page, not a blank one
