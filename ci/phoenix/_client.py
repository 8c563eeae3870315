"""Talking to a Phoenix server: its health, its errors, its projects, and waiting for spans.

Everything goes through the Phoenix client (`phoenix.client.Client`, REST), imported only inside
the functions that use it: `import plangate.ci` stays free of it, and the server package is
never imported. Spans are ingested asynchronously (about 140 spans/s on server 20.26.1), so
whoever reads or annotates spans polls until they are stored.
"""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

from plangate.ci.phoenix.names import URL_ENV, is_node_id
from plangate.harness import PlangateError

if TYPE_CHECKING:
    from phoenix.client import Client

CHUNK = 100
"""Span ids per arrival query (Phoenix's own limit per request)."""


def check_phoenix(url: str, timeout: float = 5.0) -> None:
    """Raise a `PhoenixError` naming `url` unless Phoenix answers `/healthz`."""
    try:
        with urllib.request.urlopen(f"{url}/healthz", timeout=timeout) as response:
            if response.status == 200:
                return
            reason = f"HTTP {response.status}"
    except urllib.error.HTTPError as exc:
        reason = f"HTTP {exc.code}"
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = str(getattr(exc, "reason", exc))
    raise PhoenixError(
        f"Phoenix is not reachable at {url} ({reason}): start one with `plangate phoenix up` "
        f"or pass the URL of a running one with --phoenix-url (or {URL_ENV})"
    )


def missing_spans(
    url: str,
    project: str,
    span_ids: Sequence[str],
    *,
    timeout: float,
    clock: Callable[[], float] = time.monotonic,
) -> list[str]:
    """Poll Phoenix until it holds every span id or `timeout` passes; the ids still missing."""
    from phoenix.client import Client

    found, _ = poll_spans(Client(base_url=url), project, span_ids, timeout=timeout, clock=clock)
    return [span_id for span_id in dict.fromkeys(span_ids) if span_id not in found]


def poll_spans(
    client: Any,
    project: str,
    span_ids: Iterable[str],
    *,
    timeout: float,
    clock: Callable[[], float] = time.monotonic,
) -> tuple[dict[str, Any], bool]:
    """Poll until Phoenix holds every span id or `timeout` passes.

    Returns the stored spans (REST form) by span id, and whether the project exists: a project
    none of whose spans are stored yet answers 404. Ingestion is asynchronous, so the pauses
    between polls grow from a quarter of a second to two.
    """
    import httpx

    wanted = list(dict.fromkeys(span_ids))
    found: dict[str, Any] = {}
    project_seen = False
    deadline = clock() + timeout
    pause = 0.25
    while True:
        missing = [span_id for span_id in wanted if span_id not in found]
        for chunk in chunks(missing, CHUNK):
            try:
                spans = client.spans.get_spans(
                    project_identifier=project, span_ids=chunk, limit=len(chunk), timeout=30
                )
            except httpx.HTTPStatusError as exc:
                if exc.response.status_code == 404:
                    break
                raise
            project_seen = True
            found.update((span["context"]["span_id"], span) for span in spans)
        if len(found) == len(wanted) or clock() + pause > deadline:
            return found, project_seen
        time.sleep(pause)
        pause = min(pause * 1.5, 2.0)


T = TypeVar("T")


class PhoenixRequestError(PlangateError):
    """Phoenix could not be reached, or refused a request; the message names the URL."""


class UnknownProjectError(PhoenixRequestError):
    """No project of that name on the server."""


class IngestTimeoutError(PhoenixRequestError):
    """Spans did not show up in Phoenix before the deadline."""


def client_url(client: Client) -> str:
    """The server URL a client talks to, without a trailing slash."""
    return str(client._client.base_url).rstrip("/")


def project_id(client: Client, project: str) -> str:
    """A project's id (what UI links use) from its name; an id is returned as it is."""
    if is_node_id(project, "Project"):
        return project
    import httpx

    with phoenix_errors(client, f"looking up project {project!r}"):
        try:
            return str(client.projects.get(project_name=project)["id"])
        except httpx.HTTPStatusError as exc:
            if exc.response.status_code != 404:
                raise
            known = ", ".join(sorted(str(p["name"]) for p in client.projects.list())) or "none"
    raise UnknownProjectError(
        f"no project {project!r} at {client_url(client)}; projects there: {known}"
    )


@contextmanager
def phoenix_errors(client: Client, doing: str) -> Iterator[None]:
    """Turn the client's HTTP and connection errors into `PhoenixRequestError`s naming the URL."""
    import httpx

    url = client_url(client)
    try:
        yield
    except httpx.HTTPStatusError as exc:
        body = exc.response.text.strip()[:500]
        raise PhoenixRequestError(
            f"Phoenix at {url} answered {exc.response.status_code} while {doing}: {body}"
        ) from exc
    except httpx.TransportError as exc:
        raise PhoenixRequestError(
            f"cannot reach Phoenix at {url} while {doing} ({type(exc).__name__}: {exc}); is a "
            "server running there? (`plangate phoenix up` starts one; --phoenix-url chooses one)"
        ) from exc


def wait_for_spans(
    client: Client, project: str, span_ids: Iterable[str], *, timeout: float = 60.0
) -> dict[str, Any]:
    """Poll until every span is stored in `project`; the stored spans (REST form) by span id.

    Raises:
        UnknownProjectError: The project never appeared.
        IngestTimeoutError: Some spans were still missing at the deadline.
    """
    check_project_name(project)
    wanted = list(dict.fromkeys(span_ids))
    with phoenix_errors(client, f"reading spans of project {project!r}"):
        found, seen_project = poll_spans(client, project, wanted, timeout=timeout)
    if len(found) == len(wanted):
        return found
    url = client_url(client)
    if not seen_project:
        raise UnknownProjectError(
            f"project {project!r} does not exist at {url} (waited {timeout:.0f} s for it): "
            "check the project name, and that the spans were exported to this server"
        )
    left = [s for s in wanted if s not in found]
    raise IngestTimeoutError(
        f"{len(left)} of {len(wanted)} spans are not in project {project!r} at {url} after "
        f"{timeout:.0f} s (e.g. span {left[0]!r}): were they exported to this server and "
        "project? A busy server ingests about 140 spans/s; a longer timeout may help"
    )


def check_project_name(project: str) -> None:
    """Raise `UnknownProjectError` for a name Phoenix's REST paths cannot hold."""
    if not project or any(c in project for c in "/?#"):
        raise UnknownProjectError(
            f"project name {project!r}: Phoenix project names used in REST paths cannot be "
            "empty or contain '/', '?' or '#'"
        )


def chunks(items: Sequence[T], size: int) -> Iterator[list[T]]:
    """Consecutive slices of at most `size` items."""
    for start in range(0, len(items), size):
        yield list(items[start : start + size])


class PhoenixError(PlangateError):
    """The Phoenix server could not be set up, started or reached; the message says why."""
