"""`plangate agreement SCORES LABELS`: how far an evaluator's verdicts agree with labels.

LABELS is a label file (CSV or Parquet: `session_id`, `turn_index`, `label`, optionally
`trial`) or a trace table whose AGENT rows carry the source's own judgement in `reward`
(tau-bench's: 1.0 pass, anything else fail; a turn without a reward has no label).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from plangate.ci._agreement import (
    UNDEFINED_KAPPA,
    AgreementError,
    KappaInterval,
    Key,
    Pair,
    Pairing,
    Verdict,
    confusion,
    kappa_interval,
    kappa_of,
    pair_up,
)
from plangate.ci.cli._printing import short
from plangate.evaluators import checked_chunks, object_uri, trace_source
from plangate.evaluators.scores import EVALUATOR, EXPLANATION, OUTCOME, read_scores
from plangate.replay.schema import (
    REWARD,
    SCHEMA,
    SESSION_ID,
    SPAN_KIND,
    TRIAL,
    TURN_INDEX,
    read_parquet,
    read_table,
)

LABEL_COLUMNS = (SESSION_ID, TURN_INDEX, "label")
"""What a label file must have (`trial` is optional)."""
LABEL_VALUES = {"pass": True, "true": True, "1": True, "fail": False, "false": False, "0": False}
"""A label's spellings, case and surrounding blanks ignored."""
SHOWN = 20
"""Disagreeing turns printed as text (`--json` gives them all)."""
LABEL_FILE = "label file"
TRACE_REWARDS = "the source's own judgement (the reward of the trace table's AGENT rows)"


def agreement(args: argparse.Namespace) -> int:
    """`plangate agreement SCORES LABELS [--evaluator NAME] [--json]`."""
    if shown := object_uri(args.scores):
        raise AgreementError(
            f"{shown}: SCORES is read from disk (a score file or a folder of parts, as "
            "`plangate eval -o` writes them), not from a URI; copy it here first"
        )
    scores = read_scores(args.scores)
    kind, labels, trial_known = read_labels(args.labels)
    named = object_uri(args.labels) or args.labels  # a URI's credentials are never shown
    use_trial = trial_known and TRIAL in scores.column_names
    if trial_known and not use_trial:
        labels = _without_trials(labels, named)
    pairing = pair_up(_verdicts(scores, args.evaluator, args.scores, use_trial), labels)
    if not pairing.pairs:
        raise AgreementError(
            f"no turn of {args.scores} is both judged by {args.evaluator} and labelled in "
            f"{named} ({pairing.not_judged} not judged, {pairing.unlabelled} without a "
            f"label, {pairing.unscored} labels without a score); check that both name the "
            "same sessions and turns"
        )
    report = _report(args, named, kind, pairing)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        _print(report)
    return 0


def _without_trials(labels: dict[Key, bool], path: str) -> dict[Key, bool]:
    """The labels keyed by session and turn only: the score table has no trials to match."""
    kept: dict[Key, bool] = {}
    for (session_id, turn_index, _), label in labels.items():
        key = (session_id, turn_index, None)
        if key in kept:
            raise AgreementError(
                f"{path}: session {session_id!r} turn {turn_index} has labels for several "
                "trials, but the score table has no trial column; keep one label per turn"
            )
        kept[key] = label
    return kept


def _verdicts(scores: pa.Table, evaluator: str, path: str, use_trial: bool) -> Iterator[Verdict]:
    names = set(scores[EVALUATOR].to_pylist())
    if evaluator not in names:
        raise AgreementError(
            f"{path}: no scores of evaluator {evaluator!r}; choose one of the evaluators it "
            f"holds with --evaluator: {', '.join(sorted(names)) or '(none: the table is empty)'}"
        )
    rows = scores.filter(pc.equal(scores[EVALUATOR], evaluator))
    trials = rows[TRIAL].to_pylist() if use_trial else [None] * rows.num_rows
    explanations = (
        rows[EXPLANATION].to_pylist() if EXPLANATION in rows.column_names else [""] * rows.num_rows
    )
    for session_id, turn_index, trial, outcome, explanation in zip(
        rows[SESSION_ID].to_pylist(), rows[TURN_INDEX].to_pylist(), trials,
        rows[OUTCOME].to_pylist(), explanations, strict=True,
    ):  # fmt: skip
        key = (str(session_id), int(turn_index), trial)
        yield Verdict(key=key, outcome=str(outcome), explanation=explanation or "")


# -- the labels ---------------------------------------------------------------------------------


def read_labels(given: str | Path) -> tuple[str, dict[Key, bool], bool]:
    """The labels at `given`: their kind, the label of each turn, and whether they have trials.

    A trace table may be in object storage (`s3://…`), as `eval` reads one; a label file is
    read from disk.

    Raises:
        AgreementError: The file is missing or unreadable, lacks a column, or holds a label
            that is not pass/fail, true/false or 1/0 (the message names the row and value).
    """
    path = Path(given)
    if object_uri(str(given)) or (
        not path.is_file() and (path.is_dir() or any(c in str(path) for c in "*?["))
    ):
        return TRACE_REWARDS, _rewards(_trace_files(str(given))), True  # in many files
    if not path.is_file():
        raise AgreementError(
            f"{path}: no such file; expected LABELS: a label file (.csv or .parquet with "
            "session_id, turn_index and label) or a trace table (a file, a folder or a glob)"
        )
    if path.suffix.lower() == ".csv":
        return LABEL_FILE, *_from_rows(path, _csv_rows(path), first=2, unit="line")
    table = read_parquet(path, "a label file or a trace table", AgreementError)
    if SPAN_KIND in table.column_names and REWARD in table.column_names:
        return TRACE_REWARDS, _rewards(read_table(path)), True
    return LABEL_FILE, *_from_rows(path, _parquet_rows(path, table), first=1, unit="row")


def _trace_files(path: str) -> pa.Table:
    """The AGENT rows of a trace table in a folder, a glob or a bucket, each chunk checked."""
    chunks = checked_chunks(trace_source(path))
    agents = [chunk.filter(pc.equal(chunk[SPAN_KIND], "AGENT")) for chunk in chunks]
    return pa.concat_tables(agents) if agents else SCHEMA.empty_table()


def _rewards(table: pa.Table) -> dict[Key, bool]:
    agents = table.filter(pc.equal(table[SPAN_KIND], "AGENT"))
    labels: dict[Key, bool] = {}
    for session_id, turn_index, trial, reward in zip(
        *(agents[c].to_pylist() for c in (SESSION_ID, TURN_INDEX, TRIAL, REWARD)), strict=True
    ):
        if reward is not None and not math.isnan(reward):
            labels[(session_id, int(turn_index), trial)] = reward == 1.0
    return labels


def _csv_rows(path: Path) -> tuple[list[str], Iterator[Mapping[str, Any]]]:
    try:
        with path.open(newline="", encoding="utf-8-sig") as handle:
            reader = csv.DictReader(handle)
            rows = list(reader)
            columns = [c.strip() for c in reader.fieldnames or []]
    except (UnicodeDecodeError, csv.Error) as exc:
        raise AgreementError(
            f"{path}: not a readable CSV file ({exc}); write it as UTF-8 CSV with a header line"
        ) from exc
    return columns, ({k.strip(): v for k, v in row.items() if k is not None} for row in rows)


def _parquet_rows(path: Path, table: pa.Table) -> tuple[list[str], Iterator[Mapping[str, Any]]]:
    return table.column_names, iter(table.to_pylist())


def _from_rows(
    path: Path,
    read: tuple[list[str], Iterator[Mapping[str, Any]]],
    *,
    first: int,
    unit: str,
) -> tuple[dict[Key, bool], bool]:
    columns, rows = read
    for column in LABEL_COLUMNS:
        if column not in columns:
            raise AgreementError(
                f"{path}: column {column!r} is missing; a label file needs the columns "
                "session_id, turn_index and label (pass/fail), and may have trial"
            )
    with_trial = TRIAL in columns
    labels: dict[Key, bool] = {}
    for number, row in enumerate(rows, start=first):
        where = f"{path}: {unit} {number}"
        key = (
            str(row[SESSION_ID]),
            _integer(row[TURN_INDEX], where, TURN_INDEX),
            _trial(row[TRIAL], where) if with_trial else None,
        )
        if key in labels:
            raise AgreementError(f"{where}: a second label for the same turn; keep one")
        labels[key] = _label(row["label"], where)
    return labels, with_trial


def _label(value: Any, where: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float) and value in (0, 1):
        return bool(value)
    spelled = LABEL_VALUES.get(str(value).strip().lower()) if isinstance(value, str) else None
    if spelled is None:
        raise AgreementError(
            f"{where}: label {value!r} is not a verdict; write pass/fail, true/false or 1/0"
        )
    return spelled


def _integer(value: Any, where: str, column: str) -> int:
    try:
        number = int(str(value).strip()) if not isinstance(value, int) else value
    except ValueError:
        raise AgreementError(f"{where}: {column} {value!r} is not a whole number") from None
    return number


def _trial(value: Any, where: str) -> int | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    return _integer(value, where, TRIAL)


# -- the report ---------------------------------------------------------------------------------


def _report(args: argparse.Namespace, labels: str, kind: str, pairing: Pairing) -> dict[str, Any]:
    evaluator = [p.evaluator_passed for p in pairing.pairs]
    label = [p.label_passed for p in pairing.pairs]
    counts = confusion(evaluator, label)
    kappa = kappa_of(counts)
    interval = kappa_interval(evaluator, label)
    disagreements = pairing.disagreements
    return {
        "scores": args.scores,
        "labels": labels,
        "labels_kind": kind,
        "evaluator": args.evaluator,
        "pairs": counts.n,
        "not_judged": pairing.not_judged,
        "unlabelled": pairing.unlabelled,
        "labels_without_score": pairing.unscored,
        "confusion": {
            "evaluator_pass": {
                "label_pass": counts.both_pass,
                "label_fail": counts.only_evaluator_passes,
            },
            "evaluator_fail": {
                "label_pass": counts.only_label_passes,
                "label_fail": counts.both_fail,
            },
        },
        "accuracy": counts.accuracy,
        "kappa": kappa,
        "kappa_undefined": None if kappa is not None else UNDEFINED_KAPPA,
        "kappa_interval": _interval(interval),
        "disagreements_total": len(disagreements),
        "disagreements": [_disagreement(p) for p in disagreements],
    }


def _interval(interval: KappaInterval) -> dict[str, Any]:
    return {
        "confidence": interval.confidence,
        "low": interval.low,
        "high": interval.high,
        "resamples": interval.resamples,
        "dropped_undefined": interval.dropped,
        "seed": interval.seed,
    }


def _disagreement(pair: Pair) -> dict[str, Any]:
    return {
        "session_id": pair.session_id,
        "turn_index": pair.turn_index,
        "trial": pair.trial,
        "evaluator": "pass" if pair.evaluator_passed else "fail",
        "label": "pass" if pair.label_passed else "fail",
        "explanation": pair.explanation,
    }


def _print(report: dict[str, Any]) -> None:
    grid = report["confusion"]
    print(f"agreement of {report['evaluator']} ({report['scores']}) with {report['labels']}")
    print(f"labels: {report['labels_kind']}")
    print(
        f"pairs: {report['pairs']} (left out: {report['not_judged']} not judged (n/a or error), "
        f"{report['unlabelled']} without a label, {report['labels_without_score']} labels "
        "without a score)"
    )
    print(f"{'':16}{'label pass':>12}{'label fail':>12}")
    for side in ("pass", "fail"):
        row = grid[f"evaluator_{side}"]
        print(f"{'evaluator ' + side:16}{row['label_pass']:>12}{row['label_fail']:>12}")
    print(f"accuracy: {report['accuracy']:.3f}")
    _print_kappa(report)
    _print_disagreements(report)


def _print_kappa(report: dict[str, Any]) -> None:
    interval = report["kappa_interval"]
    if report["kappa"] is None:
        print(f"Cohen's kappa: undefined ({report['kappa_undefined']})")
    else:
        print(f"Cohen's kappa: {report['kappa']:.3f}")
    percent = f"{interval['confidence']:.0%}"
    drawn = (
        f"{interval['resamples']:,} resamples, seed {interval['seed']}, "
        f"{interval['dropped_undefined']} dropped as undefined"
    )
    if interval["low"] is None:
        print(f"{percent} bootstrap interval: none, kappa is undefined in every resample ({drawn})")
    else:
        print(
            f"{percent} bootstrap interval: [{interval['low']:.3f}, {interval['high']:.3f}] "
            f"({drawn})"
        )


def _print_disagreements(report: dict[str, Any]) -> None:
    total = report["disagreements_total"]
    if not total:
        print("disagreements: none")
        return
    shown = report["disagreements"][:SHOWN]
    print(f"disagreements: {total}" + (f" (the first {len(shown)})" if total > len(shown) else ""))
    for d in shown:
        trial = "" if d["trial"] is None else f" trial {d['trial']}"
        print(
            f"  {d['session_id']} turn {d['turn_index']}{trial}: evaluator {d['evaluator']}, "
            f"label {d['label']}: {short(d['explanation'], 80)}"
        )
