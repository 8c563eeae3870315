"""Golden datasets as Phoenix datasets: one example per golden turn, linked to its spans.

A turn's example links to the turn's AGENT span in Phoenix (`span_id_key`), so the turn's
spans must be there first. They are uploaded from the dataset's own recording (`spans.parquet`,
through the REST `log_spans`), not re-created by a replay: what Phoenix shows is exactly what
the golden dataset holds. Phoenix ids are global, so the uploaded spans get fresh trace and span
ids (parent links kept) and a namespaced `session.id` (`DATASET:recorded:RUN:SESSION`).
"""

from __future__ import annotations

import hashlib
import json
import secrets
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from plangate.ci.phoenix._client import (
    PhoenixRequestError,
    check_project_name,
    chunks,
    client_url,
    phoenix_errors,
    wait_for_spans,
)
from plangate.ci.phoenix.names import GOLDEN_PROJECT, joined, namespace
from plangate.harness import PlangateError, semconv
from plangate.replay import GoldenDataset, read_dataset
from plangate.replay.schema import (
    ATTRIBUTE_OF_COLUMN,
    ATTRIBUTES,
    END_TIME,
    EVENTS,
    NAME,
    PARENT_SPAN_ID,
    SESSION_ID,
    SPAN_ID,
    SPAN_KIND,
    START_TIME,
    STATUS_CODE,
    STATUS_MESSAGE,
    STOP_REASON,
    TRACE_ID,
    TURN_INDEX,
)

if TYPE_CHECKING:
    from phoenix.client import Client
    from phoenix.client.resources.datasets import Dataset


RECORDED = "recorded"
"""The variant part of the session ids of uploaded recordings."""
SPANS_PER_UPLOAD = 500


class PhoenixDatasetError(PlangateError):
    """A Phoenix dataset is missing, or its examples are not golden turns."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PhoenixDataset:
    """A golden dataset mirrored as a Phoenix dataset."""

    name: str
    id: str
    version_id: str
    """The version holding the golden turns (a reused dataset keeps its latest version)."""
    examples: int
    """Examples in that version: one per golden turn."""
    created: int
    """Examples this call added (0: the Phoenix dataset already mirrored the golden one)."""
    linked: int
    """Examples linked to their turn's AGENT span."""
    spans: int
    """Spans this call uploaded (the recorded spans of the added examples' turns)."""
    project: str
    """The project holding those spans."""
    url: str
    """The dataset's Phoenix page."""


def mirror_dataset(
    client: Client,
    dataset_path: str | Path,
    *,
    name: str | None = None,
    project: str = GOLDEN_PROJECT,
    sessions: Sequence[str] | None = None,
    timeout: float = 60.0,
) -> PhoenixDataset:
    """Mirror a golden dataset as a Phoenix dataset: one example per golden turn.

    An example's input is the request with its session and turn, its output the recorded
    answer, stop reason and steps, its metadata the session, turn, dataset, variant, model and
    rubric. Each example links to its turn's AGENT span: the turn's recorded spans (the
    dataset's `spans.parquet`) are uploaded to `project` first, with fresh ids and a namespaced
    `session.id`, since Phoenix ids are global.

    Example ids are `session:turn:digest` (the digest covers input, output and metadata). A
    second call with the same name reuses the Phoenix dataset when every example is already
    there, with nothing uploaded and no new version; otherwise it writes a new version where
    changed or new turns are new examples (linked to freshly uploaded spans), unchanged ones
    are kept, and turns no longer selected are removed.

    Args:
        client: A Phoenix client.
        dataset_path: The golden dataset folder.
        name: The Phoenix dataset's name (default: the golden dataset's name).
        project: The Phoenix project for the recorded spans.
        sessions: Only these sessions (default: all).
        timeout: Seconds to wait for the uploaded spans to be ingested.
    """
    golden = read_dataset(dataset_path)
    title = name or golden.name
    examples = golden_examples(golden, sessions)
    check_project_name(project)
    with phoenix_errors(client, f"mirroring {dataset_path} as Phoenix dataset {title!r}"):
        existing = _example_ids(client, title)
        new = [e for e in examples if e["id"] not in existing]
        if existing and not new and len(existing) == len(examples):
            dataset = client.datasets.get_dataset(dataset=title, timeout=60)
            return _dataset_record(client, dataset, created=0, spans=0, project=project)
        turns = {(e["metadata"]["session_id"], e["metadata"]["turn_index"]) for e in new}
        agent_spans, uploaded = _upload_turn_spans(client, golden, turns, project, timeout)
        wait_for_spans(client, project, agent_spans.values(), timeout=timeout)
        payload = [_with_span(e, agent_spans) for e in examples]
        dataset = _create_dataset(client, title, payload, golden)
    return _dataset_record(client, dataset, created=len(new), spans=uploaded, project=project)


def golden_examples(golden: GoldenDataset, sessions: Sequence[str] | None = None) -> list[Any]:
    """The Phoenix examples of a golden dataset's turns (of `sessions`, default all)."""
    if sessions:
        for session in sessions:
            golden.session(session)  # an unknown session is an error naming the known ones
    chosen = set(sessions or [])
    by_session = {row[SESSION_ID]: row for row in golden.sessions.to_pylist()}
    return [
        _example(golden.name, by_session[turn[SESSION_ID]], turn)
        for turn in golden.turns.to_pylist()
        if not chosen or turn[SESSION_ID] in chosen
    ]


def _example(dataset: str, session: Mapping[str, Any], turn: Mapping[str, Any]) -> Any:
    session_id, turn_index = str(turn[SESSION_ID]), int(turn[TURN_INDEX])
    content = {
        "input": {"request": turn["request"], "session_id": session_id, "turn_index": turn_index},
        "output": {
            "answer": turn["answer"],
            "stop_reason": turn[STOP_REASON],
            "steps": json.loads(turn["steps"]),
        },
        "metadata": {
            "session_id": session_id,
            "turn_index": turn_index,
            "dataset": dataset,
            "variant": session["variant"],
            "model": session["model"],
            "domain": session["domain"],
            "rubric": json.loads(turn["rubric"]) if turn["rubric"] else None,
        },
    }
    text = json.dumps(content, sort_keys=True, ensure_ascii=False)
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]
    return {"id": f"{session_id}:{turn_index}:{digest}", **content}


def _with_span(example: Any, agent_spans: Mapping[tuple[str, int], str]) -> Any:
    key = (example["metadata"]["session_id"], example["metadata"]["turn_index"])
    return {**example, "span_id": agent_spans.get(key)}


def _example_ids(client: Client, name: str) -> set[str]:
    """The example ids of the Phoenix dataset `name` (empty when there is none)."""
    try:
        dataset = client.datasets.get_dataset(dataset=name, timeout=60)
    except ValueError:  # the client's "Dataset not found"
        return set()
    return {str(example["id"]) for example in dataset.examples}


def _create_dataset(
    client: Client, name: str, examples: list[Any], golden: GoldenDataset
) -> Dataset:
    from phoenix.client.resources.datasets import DatasetUploadError

    description = f"plangate golden dataset {golden.name!r}: {golden.description}".strip()
    try:
        return client.datasets.create_dataset(
            name=name, examples=examples, dataset_description=description, timeout=120
        )
    except DatasetUploadError as exc:
        raise PhoenixRequestError(
            f"Phoenix at {client_url(client)} refused dataset {name!r}: {exc}"
        ) from exc


def _dataset_record(
    client: Client, dataset: Dataset, *, created: int, spans: int, project: str
) -> PhoenixDataset:
    return PhoenixDataset(
        name=dataset.name,
        id=dataset.id,
        version_id=dataset.version_id,
        examples=len(dataset.examples),
        created=created,
        linked=sum(1 for example in dataset.examples if example.get("source")),
        spans=spans,
        project=project,
        url=f"{client_url(client)}/datasets/{quote(dataset.id, safe='=')}",
    )


def _upload_turn_spans(
    client: Client,
    golden: GoldenDataset,
    turns: set[tuple[str, int]],
    project: str,
    timeout: float,
) -> tuple[dict[tuple[str, int], str], int]:
    """Upload the recorded spans of `turns`; their AGENT span ids and the number uploaded."""
    rows = [row for row in golden.spans.to_pylist() if (row[SESSION_ID], row[TURN_INDEX]) in turns]
    spans = phoenix_spans(rows, namespace=namespace(golden.name, RECORDED))
    deadline = time.monotonic() + timeout
    for chunk in chunks(spans, SPANS_PER_UPLOAD):
        _log_spans(client, project, chunk, deadline)
    agents = {
        (str(row[SESSION_ID]), int(row[TURN_INDEX])): span["context"]["span_id"]
        for row, span in zip(rows, spans, strict=True)
        if row[SPAN_KIND] == "AGENT"
    }
    return agents, len(spans)


def _log_spans(client: Client, project: str, spans: list[Any], deadline: float) -> None:
    """Upload spans, waiting while the server's span queue is full (503)."""
    import httpx

    while True:
        try:
            client.spans.log_spans(project_identifier=project, spans=spans, timeout=60)
            return
        except httpx.HTTPStatusError as exc:
            if exc.response.status_code != 503 or time.monotonic() > deadline:
                raise
        time.sleep(1.0)


def phoenix_spans(rows: Sequence[Mapping[str, Any]], *, namespace: str) -> list[Any]:
    """Trace-table rows as spans for Phoenix's REST API, with fresh trace and span ids.

    Parent links are kept (through the new ids); `session.id` is the row's session id under
    `namespace` (see `names.namespace`), and the row's own goes to `plangate.session_id`.
    """
    traces = {row[TRACE_ID]: secrets.token_hex(16) for row in rows}
    ids = {(row[TRACE_ID], row[SPAN_ID]): secrets.token_hex(8) for row in rows}
    spans = []
    for row in rows:
        parent = ids.get((row[TRACE_ID], row[PARENT_SPAN_ID]))
        start = _iso(row[START_TIME] or row[END_TIME])
        span: dict[str, Any] = {
            "name": row[NAME],
            "context": {
                "trace_id": traces[row[TRACE_ID]],
                "span_id": ids[(row[TRACE_ID], row[SPAN_ID])],
            },
            "span_kind": row[SPAN_KIND],
            "start_time": start,
            "end_time": _iso(row[END_TIME] or row[START_TIME]),
            "status_code": row[STATUS_CODE],
            "status_message": row[STATUS_MESSAGE] or "",
            "attributes": _span_attributes(row, namespace),
            "events": _span_events(row[EVENTS], start),
        }
        if parent is not None:
            span["parent_id"] = parent
        spans.append(span)
    return spans


def _span_attributes(row: Mapping[str, Any], prefix: str) -> dict[str, Any]:
    attributes: dict[str, Any] = json.loads(row[ATTRIBUTES] or "{}")
    for column, key in ATTRIBUTE_OF_COLUMN.items():
        if row.get(column) is not None:
            attributes[key] = row[column]
    attributes[semconv.SESSION_ID] = joined(prefix, str(row[SESSION_ID]))
    attributes[semconv.ORIGINAL_SESSION_ID] = row[SESSION_ID]
    return attributes


def _span_events(text: str | None, fallback: str) -> list[dict[str, Any]]:
    return [
        {
            "name": event["name"],
            "timestamp": event.get("time") or fallback,
            "attributes": event.get("attributes") or {},
        }
        for event in json.loads(text or "[]")
    ]


def _iso(moment: datetime | None) -> str:
    if moment is None:  # Phoenix requires times; a source without them gets the epoch
        return "1970-01-01T00:00:00+00:00"
    return moment.isoformat()
