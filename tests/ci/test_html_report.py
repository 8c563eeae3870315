"""The gate's HTML report: well-formed, escaped, both plots with the right marks, and rendered.

The browser test renders report.html in headless Chromium (no server: a file URL), keeps the
screenshot in out/test-artifacts/gate-report.png and checks the DOM Chromium built.
"""

from __future__ import annotations

import shutil
import struct
import subprocess
import xml.etree.ElementTree as ET
import zlib
from pathlib import Path

import pytest

from plangate.ci.gate._html_report import html_report
from plangate.ci.gate._reports import write_reports
from plangate.ci.gate._stats import Interval
from plangate.ci.gate._verdict import CaseResult, EvaluatorVerdict, Verdict
from tests.conftest import REPO, find_chromium

EXPLANATION = 'plan item left open <script>alert("x")</script> & it\'s gone'
ARTIFACT = REPO / "out" / "test-artifacts" / "gate-report.png"
WINDOW = (1280, 2000)


def case(evaluator: str, session: str, baseline: str, candidate: str, **kw: object) -> CaseResult:
    """A case from outcome marks: "11" passed twice, "10" passed then failed."""
    return CaseResult(
        dataset="observability-core",
        session_id=session,
        turn_index=0,
        evaluator=evaluator,
        baseline=tuple(m == "1" for m in baseline),
        candidate=tuple(m == "1" for m in candidate),
        explanation=str(kw.pop("explanation", "all done")),
        **kw,  # type: ignore[arg-type]
    )


def evaluator(name: str, *, failed: bool = False, **kw: object) -> EvaluatorVerdict:
    fields: dict[str, object] = {
        "regressed": 0, "improved": 0, "flaky": 0, "cases": 3, "p_value": 1.0,
        "baseline_pass_hat_k": 1.0, "candidate_pass_hat_k": 1.0, "candidate_pass_rate": 1.0,
        "min_pass_rate": None, "reason": "0 regressed, 0 improved, p = 1; pass rate 100.0%",
    }  # fmt: skip
    return EvaluatorVerdict(evaluator=name, failed=failed, **{**fields, **kw})  # type: ignore[arg-type]


LATENCY_CASES = [
    case("latency", f"obs-{i:03}", "11", "11", baseline_score=b, candidate_score=c)
    for i, (b, c) in enumerate([(1.2, 1.4), (0.8, 1.1), (2.5, 2.9), (1.0, None)], start=1)
]
CASES = [
    # A regression of the passing evaluator first: the failing evaluator's must come first.
    case("plan_adherence", "obs-004", "11", "00", explanation="item 2 dropped"),
    case("task_completion", "obs-008", "11", "00", explanation=EXPLANATION,
         baseline_score=1.0, candidate_score=0.0),
    case("task_completion", "obs-009", "11", "10", explanation="coin left item 3 open",
         baseline_score=1.0, candidate_score=0.5),
    case("task_completion", "obs-010", "11", "11", explanation="every item done: passing",
         baseline_score=1.0, candidate_score=1.0),
    *LATENCY_CASES,
]  # fmt: skip
EVALUATORS = [
    evaluator("plan_adherence", regressed=1, p_value=0.5),
    evaluator(
        "task_completion", failed=True, regressed=2, flaky=1, p_value=0.25, candidate_pass_hat_k=0.33,
        reason="2 case(s) regressed against 0 improved (p = 0.25 < 0.3)",
        score_difference=Interval(low=-1.0, high=0.0, mean=-0.5, n=3),
    ),
    evaluator(
        "latency", cases=4,
        score_difference=Interval(low=0.2, high=0.4, mean=0.3, n=3),
        ratio=Interval(low=1.1, high=1.3, mean=1.2, n=3),
    ),
]  # fmt: skip
VERDICT = Verdict(passed=False, repeats=2, alpha=0.3, evaluators=EVALUATORS, cases=CASES)


def parse(page: str) -> ET.Element:
    """The page as XML: it must be well-formed."""
    return ET.fromstring(page)


def svg(root: ET.Element, name: str) -> ET.Element:
    (found,) = [e for e in root.iter("svg") if e.get("class") == name]
    return found


def marks(element: ET.Element, tag: str, name: str) -> int:
    return sum(1 for e in element.iter(tag) if e.get("class") == name)


def test_the_report_shows_the_verdict_the_evaluators_and_escapes_explanations() -> None:
    page = html_report(VERDICT)
    root = parse(page)
    text = " ".join(root.itertext())
    assert "plangate: REGRESSION" in text and "2 repeats per side, α = 0.3" in text
    for name in ("task_completion", "plan_adherence", "latency"):
        assert name in text
    assert "-0.500 [-1.000, +0.000]" in text and "1.20× [1.10, 1.30]" in text
    # The explanation is shown as text, never as markup.
    assert EXPLANATION in text
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; it&#x27;s gone" in page
    assert "<script" not in page


def test_the_plots_have_one_mark_per_interval_and_per_case() -> None:
    root = parse(html_report(VERDICT))
    forest = svg(root, "forest")
    # task_completion and latency have intervals; plan_adherence has no scores.
    assert marks(forest, "line", "ci") == 2
    assert marks(forest, "circle", "dot") == 3 + 3  # cases with a score on both sides
    assert "no scores" in " ".join(forest.itertext())
    latency = svg(root, "latency")
    assert marks(latency, "rect", "box") == 2
    assert marks(latency, "circle", "dot") == 4 + 3
    assert {"baseline (4)", "candidate (3)"} <= set(latency.itertext())


def test_regressed_cases_come_first_worst_first_then_flaky_ones() -> None:
    root = parse(html_report(VERDICT))
    tables = [t for t in root.iter("table") if "explanation" in " ".join(t.itertext())]
    regressed, flaky = ([row[1].text for row in table.iter("tr")][1:] for table in tables)
    assert regressed == ["obs-008", "obs-004"]  # the failing evaluator's regression first
    assert flaky == ["obs-009"]
    assert "every item done: passing" not in " ".join(root.itertext())


def test_without_latency_the_report_says_which_key_to_add() -> None:
    verdict = Verdict(
        passed=True, repeats=3, alpha=0.05, evaluators=EVALUATORS[:1], cases=CASES[:1]
    )
    root = parse(html_report(verdict))
    text = " ".join(root.itertext())
    assert "plangate: PASS" in text
    assert "Latency wasn't evaluated" in text and "[evaluators.latency]" in text
    assert [e.get("class") for e in root.iter("svg")] == ["forest"]


def test_missing_scores_and_empty_intervals_draw_nothing_rather_than_nan() -> None:
    nan = float("nan")
    verdict = Verdict(
        passed=True,
        repeats=1,
        alpha=0.05,
        evaluators=[
            evaluator(
                "latency",
                score_difference=Interval(low=nan, high=nan, mean=nan, n=0),
                ratio=Interval(low=nan, high=nan, mean=nan, n=0),
            ),
        ],  # fmt: skip
        cases=[case("latency", "obs-001", "1", "1", baseline_score=nan, candidate_score=None)],
    )
    page = html_report(verdict)
    root = parse(page)
    assert "nan" not in page.lower()
    assert marks(svg(root, "forest"), "line", "ci") == 0
    assert marks(svg(root, "latency"), "rect", "box") == 0


def test_write_reports_writes_the_page_atomically(tmp_path: Path) -> None:
    files = write_reports(VERDICT, tmp_path)
    assert files["html"] == tmp_path / "report.html"
    assert files["html"].read_text(encoding="utf-8") == html_report(VERDICT)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "junit.xml", "report.html", "summary.md", "verdict.json",
    ]  # fmt: skip


def browse(chromium: Path, profile: Path, *args: str) -> str:
    """Run headless Chromium once; its stdout."""
    done = subprocess.run(
        [
            str(chromium), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
            "--no-first-run", "--disable-background-networking", "--disable-component-update",
            "--disable-sync", "--hide-scrollbars", f"--user-data-dir={profile}",
            f"--window-size={WINDOW[0]},{WINDOW[1]}", *args,
        ],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def png(path: Path) -> tuple[int, int, bytes]:
    """Width, height (from IHDR) and the inflated image data of a PNG."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    length, kind, width, height = struct.unpack(">I4sII", data[8:24])
    assert kind == b"IHDR" and length == 13
    chunks, offset = [], 8
    while offset < len(data):
        (size,) = struct.unpack(">I", data[offset : offset + 4])
        if data[offset + 4 : offset + 8] == b"IDAT":
            chunks.append(data[offset + 8 : offset + 8 + size])
        offset += 12 + size
    return width, height, zlib.decompress(b"".join(chunks))


def test_the_report_renders_in_headless_chromium(chromium: Path, tmp_path: Path) -> None:
    page = write_reports(VERDICT, tmp_path / "gate")["html"]
    blank = tmp_path / "blank.html"
    blank.write_text("<!DOCTYPE html><html><body></body></html>", encoding="utf-8")
    shots = {name: tmp_path / f"{name}.png" for name in ("report", "blank")}
    for name, source in (("report", page), ("blank", blank)):
        browse(chromium, tmp_path / "profile", f"--screenshot={shots[name]}", source.as_uri())
    ARTIFACT.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(shots["report"], ARTIFACT)

    width, height, pixels = png(shots["report"])
    assert (width, height) == WINDOW
    # A blank page is one colour: few distinct bytes and a tiny file. The report is neither.
    _, _, blank_pixels = png(shots["blank"])
    assert len(set(blank_pixels)) < 10 < 100 < len(set(pixels))
    assert shots["report"].stat().st_size > 5 * shots["blank"].stat().st_size

    dom = browse(chromium, tmp_path / "profile", "--dump-dom", page.as_uri())
    assert "plangate: REGRESSION" in dom
    assert dom.count("<svg") == 2 and 'class="forest"' in dom and 'class="latency"' in dom
    assert "&lt;script&gt;" in dom and "<script" not in dom


def test_a_missing_browser_fails_with_how_to_install_one(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("PLANGATE_CHROMIUM", raising=False)
    with pytest.raises(pytest.fail.Exception, match="apt-get install chromium"):
        find_chromium()
    monkeypatch.setenv("PLANGATE_CHROMIUM", str(tmp_path / "no-such-browser"))
    with pytest.raises(pytest.fail.Exception, match="PLANGATE_CHROMIUM="):
        find_chromium()
