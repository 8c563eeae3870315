"""A session seen in Phoenix becomes a golden dataset: `plangate dataset from-phoenix`.

Phoenix's readers truncate silently: `get_spans_dataframe` returns at most `limit` spans (1000 by
default), newest first, and `get_spans` at most 100. `fetch_spans` pages through the span query by
time windows instead: each page asks for the spans that started before the oldest start of the
page before (Phoenix orders by start time, newest first, and its end bound is exclusive), keeping
the spans that started in that same microsecond, which may straddle the cut; a page that started
entirely within one microsecond is asked again twice as large. The result is then checked against
an independent listing, the cursor-paged REST list of span ids (and, for sessions, each session's
list of traces): if the two disagree, `fetch_spans` fails and says by how much, rather than
building a golden from part of a trajectory.

Sessions may have been exported under a namespaced id (`DATASET:VARIANT:RUN:SESSION`, since
Phoenix session ids are unique across projects) with the original id in the span attribute
`plangate.session_id`. `--session` matches either, and the golden keeps the original id, unless
two of the fetched sessions share it (two runs of one golden session), which then keep their
Phoenix ids.

The Phoenix client is imported on first use: `import plangate.ci` stays free of it.
"""

from __future__ import annotations

import sys
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from plangate.ci.phoenix._client import PhoenixError, chunks
from plangate.harness.semconv import ORIGINAL_SESSION_ID
from plangate.replay import dataset_from_traces, from_phoenix_dataframe, write_dataset

if TYPE_CHECKING:
    import pandas as pd
    from phoenix.client import Client

PAGE = 1000
"""Spans asked for per page (Phoenix's own default limit)."""
TRACES_PER_QUERY = 100
"""Trace ids per span query when fetching chosen sessions (keeps the query text short)."""
PHOENIX_SPAN_ID = "context.span_id"
PHOENIX_TRACE_ID = "context.trace_id"
SESSION_COLUMN = "attributes.session.id"
_ALL = sys.maxsize
"""`limit` for the client's cursor-paged lists: every page."""


def fetch_spans(
    client: Client,
    project: str,
    sessions: Sequence[str] | None = None,
    *,
    page_size: int = PAGE,
) -> pd.DataFrame:
    """Every span of a Phoenix project, or of its chosen sessions, as one spans dataframe.

    Args:
        client: A `phoenix.client.Client`.
        project: The project's name.
        sessions: Only these sessions: Phoenix session ids, or original ids (the
            `plangate.session_id` attribute of a namespaced export).
        page_size: Spans per request.

    Returns:
        The frame `client.spans.get_spans_dataframe` would return were it not truncated: one
        row per span, index `context.span_id`.

    Raises:
        PhoenixError: The project or a session is unknown, a session name is ambiguous, or the
            spans fetched disagree with Phoenix's own listing.
    """
    from phoenix.client.types.spans import SpanQuery

    _require_project(client, project)
    if sessions is None:
        frame = _paged(client, project, SpanQuery(), page_size)
        _verify(frame, _listed(client, project, None), f"project {project!r}")
        return frame
    traces = _session_traces(client, project, sessions)
    wanted = sorted({trace for ids in traces.values() for trace in ids})
    frames = [
        _paged(client, project, SpanQuery().where(f"trace_id in {chunk!r}"), page_size)
        for chunk in chunks(wanted, TRACES_PER_QUERY)
    ]
    frame = _concat(frames)
    _verify(frame, _listed(client, project, wanted), f"sessions {', '.join(sessions)}")
    found = set(frame[PHOENIX_TRACE_ID]) if len(frame) else set()
    for session, ids in traces.items():
        missing = [trace for trace in ids if trace not in found]
        if missing:
            raise PhoenixError(
                f"session {session!r} lists {len(ids)} traces but {len(missing)} of them have no "
                f"span in project {project!r} (e.g. {missing[0]}); spans may still be arriving: "
                "wait and run again"
            )
    return frame


def golden_from_phoenix(
    url: str,
    project: str,
    sessions: Sequence[str] | None,
    out: str | Path,
    *,
    name: str | None = None,
    page_size: int = PAGE,
    redact: Sequence[str] = (),
) -> Path:
    """Fetch sessions from Phoenix and write them as a golden dataset (atomically) to `out`.

    Secrets are redacted (the built-in policy and `redact`) before anything is written.

    Args:
        url: The Phoenix base URL (`http://127.0.0.1:6006`).
        project: The project's name.
        sessions: Only these sessions (Phoenix or original ids); None for all of the project.
        out: The dataset folder; an existing dataset there is replaced whole.
        name: The dataset's name (default: the folder's name).
        page_size: Spans per request.
        redact: The user's own secret patterns, besides the built-in ones.

    Returns:
        The folder written.

    Raises:
        PhoenixError: Phoenix cannot be reached or answers with an error, or see `fetch_spans`.
        DatasetError: The spans hold no turn to make a dataset of.
    """
    import httpx
    from phoenix.client import Client

    client = Client(base_url=url)
    try:
        frame = fetch_spans(client, project, sessions, page_size=page_size)
    except httpx.HTTPStatusError as exc:
        raise PhoenixError(f"Phoenix at {url} answered {exc.response.status_code}: {exc}") from exc
    except httpx.HTTPError as exc:
        raise PhoenixError(
            f"cannot reach Phoenix at {url} ({exc}): is it running? (`plangate phoenix status`)"
        ) from exc
    if frame.empty:
        raise PhoenixError(f"project {project!r} at {url} has no spans yet")
    table = from_phoenix_dataframe(with_original_sessions(frame))
    dataset = dataset_from_traces(
        table,
        name=name or Path(out).name,
        description=f"from Phoenix project {project!r} at {url}",
    )
    return write_dataset(dataset, out, redact=redact)


def with_original_sessions(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame with each namespaced `session.id` replaced by its original, where unambiguous.

    A trace's original id is the first `plangate.session_id` on its spans. Two Phoenix sessions
    with the same original (two runs of one golden session) both keep their Phoenix ids.
    """
    originals = _originals(frame)
    if not originals:
        return frame
    phoenix_ids: dict[str, set[str]] = defaultdict(set)
    for trace, session in _trace_sessions(frame).items():
        if trace in originals:
            phoenix_ids[originals[trace]].add(session)
    renamed = {t: o for t, o in originals.items() if len(phoenix_ids[o]) == 1}
    out = frame.copy()
    if SESSION_COLUMN not in out.columns:
        out[SESSION_COLUMN] = None
    traces = out[PHOENIX_TRACE_ID]
    chosen = traces.isin(list(renamed))
    out.loc[chosen, SESSION_COLUMN] = traces[chosen].map(renamed)
    return out


def _require_project(client: Client, project: str) -> None:
    import httpx

    try:
        client.projects.get(project_name=project)
    except httpx.HTTPStatusError as exc:
        if exc.response.status_code != 404:
            raise
        names = [p["name"] for p in client.projects.list()]
        raise PhoenixError(
            f"no project {project!r} in Phoenix; projects: {', '.join(names) or 'none'}"
        ) from exc


def _paged(client: Client, project: str, query: Any, page_size: int) -> pd.DataFrame:
    """All spans the query matches, newest first, by time windows of `page_size` spans."""
    import pandas as pd

    frames: list[pd.DataFrame] = []
    seen: set[str] = set()
    end: pd.Timestamp | None = None
    size = page_size
    while True:
        page = client.spans.get_spans_dataframe(
            query=query,
            project_identifier=project,
            end_time=None if end is None else end.to_pydatetime(),
            limit=size,
        )
        if page.empty:
            break
        fresh = page[~page[PHOENIX_SPAN_ID].isin(seen)]
        seen.update(fresh[PHOENIX_SPAN_ID])
        frames.append(fresh)
        if len(page) < size:
            break
        # Spans that started in the page's oldest microsecond may straddle the cut: the next
        # window ends just after it and asks for them again (they are kept once).
        following = page["start_time"].min() + pd.Timedelta(microseconds=1)
        if end is not None and following >= end:
            size *= 2  # the whole page started within one microsecond
            continue
        end, size = following, page_size
    return _concat(frames)


def _concat(frames: list[pd.DataFrame]) -> pd.DataFrame:
    import pandas as pd

    frames = [f for f in frames if not f.empty]
    if not frames:
        return pd.DataFrame()
    return frames[0] if len(frames) == 1 else pd.concat(frames)


def _listed(client: Client, project: str, traces: Sequence[str] | None) -> set[str]:
    """Span ids from the cursor-paged REST list: the independent count."""
    if traces is None:
        spans = client.spans.get_spans(project_identifier=project, limit=_ALL)
        return {s["context"]["span_id"] for s in spans}
    listed: set[str] = set()
    for chunk in chunks(traces, TRACES_PER_QUERY):
        spans = client.spans.get_spans(project_identifier=project, trace_ids=chunk, limit=_ALL)
        listed.update(s["context"]["span_id"] for s in spans)
    return listed


def _verify(frame: pd.DataFrame, listed: set[str], what: str) -> None:
    fetched = set(frame[PHOENIX_SPAN_ID]) if len(frame) else set()
    if len(frame) != len(fetched):
        raise PhoenixError(f"{what}: {len(frame) - len(fetched)} spans were fetched twice")
    if fetched == listed:
        return
    lost, extra = listed - fetched, fetched - listed
    raise PhoenixError(
        f"{what}: fetched {len(fetched)} spans but Phoenix lists {len(listed)} "
        f"({len(lost)} not fetched, e.g. {sorted(lost)[:3]}; {len(extra)} not listed, e.g. "
        f"{sorted(extra)[:3]}); spans may still be arriving: wait and run again"
    )


def _session_traces(client: Client, project: str, sessions: Sequence[str]) -> dict[str, list[str]]:
    """The trace ids of each chosen session, found by Phoenix session id or original id."""
    known = {s["session_id"]: s for s in client.sessions.list(project_name=project)}
    session_of = {t["trace_id"]: s for s, data in known.items() for t in data["traces"]}
    out: dict[str, list[str]] = {}
    for wanted in sessions:
        if wanted in known:
            out[wanted] = [t["trace_id"] for t in known[wanted]["traces"]]
            continue
        spans = client.spans.get_spans(
            project_identifier=project, attributes={ORIGINAL_SESSION_ID: wanted}, limit=_ALL
        )
        found = {s["context"]["trace_id"] for s in spans}
        owners = {session_of.get(trace, "") for trace in found}
        if not found:
            raise PhoenixError(
                f"no session {wanted!r} in project {project!r} (neither a Phoenix session id nor "
                f"a {ORIGINAL_SESSION_ID}); some: {', '.join(list(known)[:8]) or 'none'}"
            )
        if len(owners) > 1:
            raise PhoenixError(
                f"session {wanted!r} is the original of {len(owners)} Phoenix sessions "
                f"({', '.join(sorted(o or '(none)' for o in owners))}): pass one of them as "
                "--session"
            )
        owner = owners.pop()
        out[wanted] = [t["trace_id"] for t in known[owner]["traces"]] if owner else sorted(found)
    return out


def _originals(frame: pd.DataFrame) -> dict[str, str]:
    """Each trace's original session id, from `plangate.session_id` on any of its spans."""
    out: dict[str, str] = {}
    for trace, value in zip(frame[PHOENIX_TRACE_ID], _original_column(frame), strict=True):
        if isinstance(value, str) and value and trace not in out:
            out[trace] = value
    return out


def _original_column(frame: pd.DataFrame) -> Iterable[Any]:
    """`plangate.session_id` per row: Phoenix nests it in `attributes.plangate`."""
    flat = f"attributes.{ORIGINAL_SESSION_ID}"
    if flat in frame.columns:
        return list(frame[flat])
    if "attributes.plangate" not in frame.columns:
        return [None] * len(frame)
    nested = frame["attributes.plangate"]
    return [v.get("session_id") if isinstance(v, dict) else None for v in nested]


def _trace_sessions(frame: pd.DataFrame) -> dict[str, str]:
    """Each trace's Phoenix session id (its first `session.id`), else the trace id itself."""
    column = frame[SESSION_COLUMN] if SESSION_COLUMN in frame.columns else [None] * len(frame)
    out: dict[str, str] = {}
    for trace, session in zip(frame[PHOENIX_TRACE_ID], column, strict=True):
        if isinstance(session, str) and session:
            out.setdefault(trace, session)
    return {trace: out.get(trace, trace) for trace in frame[PHOENIX_TRACE_ID]}
