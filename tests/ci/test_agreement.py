"""`plangate agreement`: an evaluator's verdicts against labels, on real files, run in-process."""

from __future__ import annotations

import csv
import json
from fractions import Fraction
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from plangate.ci._agreement import cohen_kappa, kappa_interval
from plangate.ci.cli import main
from tests.ci.bad_inputs import FILE_KINDS, GOOD, assert_one_line_naming, make_good_files
from tests.object_store import object_store


@pytest.fixture(scope="module")
def tau(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """tau-bench's gpt-4o airline run as a trace table, and its score table."""
    folder = tmp_path_factory.mktemp("tau")
    table, scores = folder / "table.parquet", folder / "scores.parquet"
    source = corpus / "tau-bench" / "gpt-4o-airline.json"
    assert main(["import", "tau-bench", str(source), "-o", str(table)]) == 0
    assert main(["eval", str(table), "-o", str(scores), "--json"]) == 0
    return table, scores


def agreement(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()  # what the fixture's commands printed
    code = main(["agreement", *args])
    shown = capsys.readouterr()
    return code, shown.out, shown.err


def agent_rows(table: Path) -> list[dict[str, Any]]:
    """Every turn of the trace table with its reward, in a fixed order."""
    spans = pq.read_table(table)
    agents = spans.filter(pc.equal(spans["span_kind"], "AGENT"))
    rows = agents.select(["session_id", "turn_index", "trial", "reward"]).to_pylist()
    return sorted(rows, key=lambda r: (r["session_id"], r["turn_index"], r["trial"]))


def test_the_source_reward_agrees_with_task_completion(
    tau: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    table, scores = tau
    code, out, err = agreement(capsys, str(scores), str(table), "--json")
    assert (code, err) == (0, "")
    report = json.loads(out)
    assert report["labels_kind"].startswith("the source's own judgement")
    assert report["pairs"] == 200
    assert report["confusion"] == {
        "evaluator_pass": {"label_pass": 84, "label_fail": 0},
        "evaluator_fail": {"label_pass": 0, "label_fail": 116},
    }
    assert (report["accuracy"], report["kappa"]) == (1.0, 1.0)
    interval = report["kappa_interval"]
    assert (interval["low"], interval["high"], interval["resamples"]) == (1.0, 1.0, 2000)
    assert (report["disagreements_total"], report["disagreements"]) == (0, [])

    code, out, _ = agreement(capsys, str(scores), str(table))
    assert code == 0
    assert "labels: the source's own judgement" in out
    assert "Cohen's kappa: 1.000" in out
    assert "disagreements: none" in out

    # The same trace table in a folder of files, as `plangate eval` reads one.
    spans = pq.read_table(table)
    folder = table.parent / "in-parts"
    folder.mkdir(exist_ok=True)
    for part, start in enumerate(range(0, spans.num_rows, 1_000)):
        pq.write_table(spans.slice(start, 1_000), folder / f"part-{part}.parquet")
    for labels in (folder, f"{folder}/*.parquet"):
        code, out, err = agreement(capsys, str(scores), str(labels), "--json")
        assert (code, err) == (0, "")
        assert json.loads(out) | {"labels": "-"} == report | {"labels": "-"}

    # And in a bucket, named with credentials that are never shown.
    with object_store() as store:
        uri = store.upload(folder, "tau").replace("s3://", "s3://test:hunter2-secret@")
        code, out, err = agreement(capsys, str(scores), uri, "--json")
    assert (code, err) == (0, "")
    assert json.loads(out) == report | {"labels": "s3://lake/tau"}
    assert "hunter2" not in out


def test_noisy_labels_give_the_hand_computed_kappa_and_the_flipped_turns(
    tau: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table, scores = tau
    rows = agent_rows(table)
    flipped = {(r["session_id"], r["turn_index"], r["trial"]) for r in rows[::7]}
    labels = tmp_path / "labels.csv"
    with labels.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["session_id", "turn_index", "trial", "label"])
        for r in rows:
            passed = (r["reward"] == 1.0) != (
                (r["session_id"], r["turn_index"], r["trial"]) in flipped
            )
            writer.writerow(
                [r["session_id"], r["turn_index"], r["trial"], "pass" if passed else "fail"]
            )

    code, out, err = agreement(capsys, str(scores), str(labels), "--json")
    assert (code, err) == (0, "")
    report = json.loads(out)
    assert report["labels_kind"] == "label file"
    # 200 turns, 84 passed (reward 1). Every 7th turn flipped: 29 turns, 10 passes and 19 fails.
    both_pass, only_evaluator, only_label, both_fail = 84 - 10, 10, 19, 116 - 19
    assert report["confusion"] == {
        "evaluator_pass": {"label_pass": both_pass, "label_fail": only_evaluator},
        "evaluator_fail": {"label_pass": only_label, "label_fail": both_fail},
    }
    n = 200
    p_o = (both_pass + both_fail) / n  # 171 / 200
    evaluator_pass = (both_pass + only_evaluator) / n  # 84 / 200
    label_pass = (both_pass + only_label) / n  # 93 / 200
    p_e = evaluator_pass * label_pass + (1 - evaluator_pass) * (1 - label_pass)
    kappa = (p_o - p_e) / (1 - p_e)
    assert kappa == pytest.approx(0.70671, abs=1e-5)
    assert report["kappa"] == pytest.approx(kappa, rel=1e-12)
    assert report["accuracy"] == p_o
    interval = report["kappa_interval"]
    assert interval["low"] < report["kappa"] < interval["high"]
    listed = {(d["session_id"], d["turn_index"], d["trial"]) for d in report["disagreements"]}
    assert listed == flipped
    assert report["disagreements_total"] == 29
    assert all(d["explanation"].startswith("tau-bench judged") for d in report["disagreements"])

    code, out, _ = agreement(capsys, str(scores), str(labels))
    assert code == 0
    assert "disagreements: 29 (the first 20)" in out
    assert len([line for line in out.splitlines() if line.startswith("  tau-bench/")]) == 20
    assert f"Cohen's kappa: {kappa:.3f}" in out


def test_labels_without_trial_and_turns_without_a_label_are_counted(
    tau: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table, scores = tau
    rows = [r for r in agent_rows(table) if r["trial"] == 0]
    labels = tmp_path / "labels.csv"
    lines = ["session_id,turn_index,trial,label"]
    lines += [f"{r['session_id']},0,0,{int(r['reward'] == 1.0)}" for r in rows]
    lines.append("no-such-session,0,0,true")
    labels.write_text("\n".join(lines) + "\n")
    code, out, _ = agreement(capsys, str(scores), str(labels), "--json")
    report = json.loads(out)
    assert code == 0
    assert (report["pairs"], report["unlabelled"], report["labels_without_score"]) == (50, 150, 1)
    assert report["kappa"] == 1.0
    code, out, _ = agreement(capsys, str(scores), str(table), "--evaluator", "latency", "--json")
    assert code == 2  # latency is n/a on every tau-bench turn: no pair
    _, _, err = agreement(capsys, str(scores), str(table), "--evaluator", "latency")
    assert err.count("\n") == 1 and "200 not judged" in err


def test_a_score_folder_and_a_parquet_label_file_without_trials(
    tau: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table, _ = tau
    source = tmp_path / "traces"
    source.mkdir()
    (source / "part.parquet").write_bytes(table.read_bytes())
    scores = tmp_path / "scores"
    assert main(["eval", str(source), "-o", str(scores), "--evaluator", "task_completion"]) == 0
    assert (scores / "part-00000.parquet").is_file()  # a folder of parts
    first = [r for r in agent_rows(table) if r["trial"] == 0]
    labels = tmp_path / "labels.parquet"
    pq.write_table(
        pa.table(
            {
                "session_id": [r["session_id"] for r in first],
                "turn_index": [0] * len(first),
                "label": [r["reward"] != 1.0 for r in first],  # every label wrong
            }
        ),
        labels,
    )
    code, out, _ = agreement(capsys, str(scores), str(labels), "--json")
    report = json.loads(out)
    # Without a trial column the labels pair by session and turn: one trial per session here.
    assert (code, report["pairs"], report["accuracy"]) == (0, 50, 0.0)
    passes = sum(r["reward"] == 1.0 for r in first) / 50  # the evaluator's; the labels' is 1 - it
    p_e = 2 * passes * (1 - passes)  # chance agreement; observed agreement p_o is 0
    assert report["kappa"] == pytest.approx(-p_e / (1 - p_e), rel=1e-12)
    assert report["disagreements_total"] == 50


@pytest.mark.parametrize(
    ("content", "named"),
    [
        ("session_id,turn_index,verdict\ns,0,pass\n", "'label'"),
        ("session_id,turn_index,label\ns,0,pass\ns,1,maybe\n", "line 3: label 'maybe'"),
        ("session_id,turn_index,label\ns,zero,pass\n", "turn_index 'zero'"),
    ],
    ids=["no label column", "label maybe", "bad turn"],
)
def test_bad_label_files_exit_2_naming_the_problem(
    tau: tuple[Path, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    content: str,
    named: str,
) -> None:
    labels = tmp_path / "labels.csv"
    labels.write_text(content)
    code, out, err = agreement(capsys, str(tau[1]), str(labels))
    assert (code, out) == (2, "")
    assert err.count("\n") == 1 and str(labels) in err and named in err, err


def test_bad_scores_and_evaluator_exit_2_naming_them(
    tau: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table, scores = tau
    missing = tmp_path / "nowhere.parquet"
    code, _, err = agreement(capsys, str(missing), str(table))
    assert code == 2 and err.count("\n") == 1 and str(missing) in err and "no such file" in err

    code, _, err = agreement(capsys, str(scores), str(table), "--evaluator", "oracle")
    assert code == 2 and err.count("\n") == 1 and "'oracle'" in err
    assert "task_completion" in err and "tool_call_loops" in err

    unreadable = tmp_path / "labels.parquet"
    unreadable.write_bytes(b"not parquet")
    code, _, err = agreement(capsys, str(scores), str(unreadable))
    assert code == 2 and err.count("\n") == 1 and str(unreadable) in err


@pytest.fixture(scope="module")
def good_files(tmp_path_factory: pytest.TempPathFactory) -> None:
    make_good_files(tmp_path_factory.mktemp("good"))


@pytest.mark.usefixtures("good_files")
@pytest.mark.parametrize("role", ["SCORES", "LABELS", "LABELS.csv"])
@pytest.mark.parametrize("kind", sorted(FILE_KINDS))
def test_every_kind_of_bad_file_is_exit_2_and_one_line_naming_it(
    kind: str, role: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    suffix = ".csv" if role.endswith(".csv") else ""
    path = FILE_KINDS[kind](tmp_path / f"input{suffix}", b"\x00noise,\n")
    argv = [str(path), str(GOOD["table"])] if role == "SCORES" else [str(GOOD["scores"]), str(path)]
    code, _, err = agreement(capsys, *argv)
    assert_one_line_naming(code, err, path, f"{role} {kind}")


# -- the statistics -----------------------------------------------------------------------------

verdicts = st.lists(st.booleans(), min_size=1, max_size=40)
rater_pairs = st.integers(1, 40).flatmap(
    lambda n: st.tuples(
        st.lists(st.booleans(), min_size=n, max_size=n),
        st.lists(st.booleans(), min_size=n, max_size=n),
    )
)


def chance_agreement(a: list[bool], b: list[bool]) -> Fraction:
    n = len(a)
    pa, pb = Fraction(sum(a), n), Fraction(sum(b), n)
    return pa * pb + (1 - pa) * (1 - pb)


@given(verdicts)
def test_kappa_is_1_for_identical_non_constant_ratings(ratings: list[bool]) -> None:
    if len(set(ratings)) == 2:
        assert cohen_kappa(ratings, ratings) == 1.0
    else:
        assert cohen_kappa(ratings, ratings) is None  # one verdict throughout: p_e == 1


@given(rater_pairs)
def test_kappa_is_symmetric_bounded_and_undefined_exactly_when_p_e_is_1(
    raters: tuple[list[bool], list[bool]],
) -> None:
    a, b = raters
    kappa = cohen_kappa(a, b)
    assert kappa == cohen_kappa(b, a)
    assert (kappa is None) == (chance_agreement(a, b) == 1)
    if kappa is not None:
        assert -1.0 <= kappa <= 1.0
        p_o = Fraction(sum(x == y for x, y in zip(a, b, strict=True)), len(a))
        p_e = chance_agreement(a, b)
        assert kappa == pytest.approx(float((p_o - p_e) / (1 - p_e)), rel=1e-12)


@settings(max_examples=50)
@given(rater_pairs)
def test_the_bootstrap_interval_is_ordered_and_deterministic(
    raters: tuple[list[bool], list[bool]],
) -> None:
    a, b = raters
    interval = kappa_interval(a, b, resamples=200)
    assert interval == kappa_interval(a, b, resamples=200)
    assert 0 <= interval.dropped <= 200
    if interval.low is None:
        assert interval.dropped == 200
    else:
        assert interval.high is not None and -1.0 <= interval.low <= interval.high <= 1.0


@settings(max_examples=50)
@given(verdicts)
def test_identical_ratings_give_the_interval_1_1(ratings: list[bool]) -> None:
    interval = kappa_interval(ratings, ratings, resamples=200)
    if len(set(ratings)) == 2:
        assert (interval.low, interval.high) == (1.0, 1.0)
    else:
        assert (interval.low, interval.high, interval.dropped) == (None, None, 200)


def test_labels_in_a_folder_are_checked_and_a_file_with_glob_characters_is_a_file(
    tau: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table, scores = tau
    spans = pq.read_table(table)
    turns = spans["turn_index"].to_pylist()
    turns[1_500] = None  # a required column null in the second file, row 500
    broken = tmp_path / "broken"
    broken.mkdir()
    bad = spans.set_column(1, "turn_index", pa.array(turns, pa.int32()))
    pq.write_table(bad.slice(0, 1_000), broken / "part-0.parquet")
    pq.write_table(bad.slice(1_000), broken / "part-1.parquet")
    code, _, err = agreement(capsys, str(scores), str(broken))
    assert_one_line_naming(code, err, broken / "part-1.parquet", "null turn")
    assert "row 500, column 'turn_index' is null" in err

    empty = tmp_path / "empty"
    empty.mkdir()
    pq.write_table(spans.slice(0, 0), empty / "part-0.parquet")
    code, _, err = agreement(capsys, str(scores), str(empty))
    assert code == 2 and "no turn of" in err and "Traceback" not in err

    rows = agent_rows(table)
    odd = tmp_path / "labels[v2].csv"  # glob characters in a file's name: still that file
    with odd.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["session_id", "turn_index", "trial", "label"])
        for row in rows:
            label = "pass" if row["reward"] == 1.0 else "fail"
            writer.writerow([row["session_id"], row["turn_index"], row["trial"], label])
    code, out, err = agreement(capsys, str(scores), str(odd), "--json")
    assert (code, err) == (0, "")
    assert json.loads(out)["labels_kind"] == "label file"
