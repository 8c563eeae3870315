"""How plangate names things in Phoenix, and where they are: settings, namespaced sessions, URLs.

The settings (environment variables, default server, ports, projects, folders) are what the
command line's defaults come from; this module imports nothing but the standard library.

Phoenix session ids are unique across projects, so the spans plangate sends carry a namespaced
`session.id` (`DATASET:VARIANT:RUN:SESSION`, or `run:RUN:SESSION` for `plangate run`) and the
original id in `plangate.session_id`. The separator is `:`, not `/`: the Phoenix client refuses
a session id holding `/`, `?` or `#` (`sessions.get` raises "Cannot encode string containing
'/' for URL path"), so those are replaced by `_`. The links follow the UI's routes (see
`_annotations`).
"""

from __future__ import annotations

import base64
import binascii
import secrets
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import quote, urlencode

URL_ENV = "PLANGATE_PHOENIX_URL"
"""The Phoenix server when `--phoenix-url` is not given."""
PROJECT_ENV = "PLANGATE_PHOENIX_PROJECT"
"""The Phoenix project when `--phoenix-project` is not given."""
DEFAULT_PROJECT = "plangate"
"""The project spans are exported to without either."""
GOLDEN_PROJECT = "plangate-golden"
"""The Phoenix project that holds the spans of mirrored golden turns."""
TRACES_PATH = "/v1/traces"
"""Phoenix's OTLP/HTTP traces path."""
HOST = "127.0.0.1"
"""Where the local server listens: loopback only."""
DEFAULT_PORT = 6006
"""The local server's HTTP port: the UI, REST and OTLP/HTTP."""
DEFAULT_GRPC_PORT = 4317
"""The local server's OTLP/gRPC port."""
DEFAULT_URL = f"http://{HOST}:{DEFAULT_PORT}"
"""The server the Phoenix commands talk to without `--phoenix-url` (`plangate phoenix up`'s)."""
DEFAULT_FOLDER = Path(".plangate") / "phoenix"
"""The local server's data folder."""
DEFAULT_ENV = Path(".venv-phoenix")
"""The local server's own environment, made on first use (or `$PLANGATE_PHOENIX_ENV`)."""
ENV_VARIABLE = "PLANGATE_PHOENIX_ENV"
"""Another environment for the local server."""
SEPARATOR = ":"
"""Between the parts of a namespaced session id."""
UNSAFE = str.maketrans({"/": "_", "?": "_", "#": "_"})
"""The characters the Phoenix client cannot put in a URL path, and what replaces them."""


def namespace(dataset: str, variant: str, run: str | None = None) -> str:
    """`DATASET:VARIANT:RUN`, the prefix of the session ids of one upload or replay run.

    A variant given as a `.toml` path counts by its stem; RUN defaults to a new run id.
    """
    return SEPARATOR.join(segment(part) for part in (dataset, variant, run or new_run_id()))


def segment(text: str) -> str:
    """One part of a namespace: a variant file's stem; no separator, no `/?#`."""
    name = Path(text).stem if text.endswith(".toml") else text
    return safe(name.replace(SEPARATOR, "_"))


def joined(namespace: str, session_id: str) -> str:
    """`NAMESPACE:SESSION`, safe for the Phoenix client's URL paths."""
    return safe(f"{namespace}{SEPARATOR}{session_id}")


def safe(text: str) -> str:
    """Without the characters the Phoenix client cannot put in a URL path."""
    return text.translate(UNSAFE)


def server_url(url: str) -> str:
    """`url` without a trailing slash or `/v1/traces`."""
    url = url.rstrip("/")
    return url[: -len(TRACES_PATH)] if url.endswith(TRACES_PATH) else url


def new_run_id() -> str:
    """A short run id: UTC time and a random suffix, e.g. `20250301T101502-3fa9`."""
    return f"{datetime.now(UTC):%Y%m%dT%H%M%S}-{secrets.token_hex(2)}"


def trace_url(base: str, project: str | None, trace_id: str) -> str:
    """The Phoenix page of a trace.

    Args:
        base: The server URL.
        project: The project's id (`project_id`); with a name or None the link goes through
            Phoenix's `/redirects/traces/` route, which finds the project itself.
        trace_id: The trace id (32 hex digits).
    """
    root = base.rstrip("/")
    if project is not None and is_node_id(project, "Project"):
        return f"{root}/projects/{quote(project, safe='=')}/traces/{trace_id}"
    return f"{root}/redirects/traces/{trace_id}"


def session_url(base: str, session_id: str) -> str:
    """The Phoenix page of a session, by the `session.id` its spans carry.

    The session page's own route needs the session's node id
    (`/projects/<project id>/sessions/<node id>`); `/redirects/sessions/` looks it up.
    """
    return f"{base.rstrip('/')}/redirects/sessions/{quote(session_id, safe=':@')}"


def compare_url(base: str, dataset_id: str, experiment_ids: Sequence[str]) -> str:
    """Phoenix's side-by-side view of experiments on one dataset."""
    query = urlencode([("experimentId", e) for e in experiment_ids])
    return f"{base.rstrip('/')}/datasets/{quote(dataset_id, safe='=')}/compare?{query}"


def is_node_id(value: str, kind: str) -> bool:
    """Whether `value` is a Phoenix (GraphQL) node id of `kind`: base64 of `Kind:number`."""
    try:
        text = base64.b64decode(value, validate=True).decode("ascii")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return False
    prefix, _, number = text.partition(":")
    return prefix == kind and number.isdecimal()
