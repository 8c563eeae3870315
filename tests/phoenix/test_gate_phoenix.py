"""`plangate gate --phoenix-url URL` against a real Phoenix server: spans, scores and links.

The gate replays two golden sessions with a baseline and a candidate that regresses one of them.
Every span arrives, the scores are annotations Phoenix can filter on, and the regressed case's
lines in the reports link to the candidate's trace in Phoenix.
"""

from __future__ import annotations

import json
import re
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
from phoenix.client.types.spans import SpanQuery

from plangate.ci.phoenix._server import PhoenixServer
from tests.conftest import REPO

pytestmark = pytest.mark.filterwarnings("ignore::pandas.errors.Pandas4Warning")

GATE = """
[gate]
repeats = 1
[[datasets]]
path = "{dataset}"
sessions = ["obs-001", "obs-008"]
[baseline]
variant = "alyx"
model = "sim:forgetful"
tools = "live"
[candidate]
variant = "naive"
model = "sim:forgetful"
tools = "live"
[evaluators.task_completion]
"""


def test_the_gate_exports_annotates_and_links(
    phoenix: PhoenixServer, phoenix_client: object, tmp_path: Path
) -> None:
    gate = tmp_path / "gate.toml"
    gate.write_text(GATE.format(dataset=REPO / "datasets" / "observability-core"))
    project = f"gate-{secrets.token_hex(3)}"
    done = subprocess.run(
        [sys.executable, "-m", "plangate", "gate", str(gate), "-o", str(tmp_path / "out"),
         "--phoenix-url", phoenix.url, "--phoenix-project", project],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    # One regressed case of two is no significant regression: the gate passes, and still
    # links that case to its trace.
    assert done.returncode == 0, done.stdout + done.stderr
    sent = re.search(r"(\d+) spans sent .*; (\d+) arrived", done.stderr)
    assert sent is not None and sent[1] == sent[2] and int(sent[1]) > 50, done.stderr
    assert "annotations not logged" not in done.stderr, done.stderr

    verdict = json.loads((tmp_path / "out" / "verdict.json").read_text())
    regressed = [c for c in verdict["cases"] if c["status"] == "regressed"]
    assert [c["session_id"] for c in regressed] == ["obs-008"]
    link = regressed[0]["trace_url"]
    assert link.startswith(f"{phoenix.url}/projects/") and "/traces/" in link
    assert f"[trace]({link})" in (tmp_path / "out" / "summary.md").read_text()
    assert link in (tmp_path / "out" / "report.html").read_text()

    # The candidate's failing turn is what Phoenix's annotation filter finds, on its trace.
    failing = phoenix_client.spans.get_spans_dataframe(  # type: ignore[attr-defined]
        query=SpanQuery()
        .where("annotations['task_completion'].score < 1")
        .select("name", "session.id", "trace_id"),
        project_identifier=project,
        limit=10_000,
        timeout=60,
    )
    sessions = set(failing["session.id"])
    assert any(s.endswith(":obs-008") and "candidate" in s for s in sessions), sessions
    assert link.rsplit("/", 1)[-1] in set(failing["context.trace_id"])
