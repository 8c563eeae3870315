"""A local Phoenix server, run from its own environment, bound to 127.0.0.1 only.

The Phoenix server package is heavy (importing it takes seconds and it installs a pytest plugin
that slows every test run), so plangate never imports it: `up` creates a separate virtual
environment for it (`.venv-phoenix`, or `PLANGATE_PHOENIX_ENV`) the first time, and starts the
server there as a child process with its data in a project folder (`.plangate/phoenix`).

Phoenix binds its OTLP/gRPC port on every interface (`[::]`), whatever `PHOENIX_HOST` says; the
server is started through a small launcher that makes gRPC bind 127.0.0.1 as well. Telemetry,
external resources (web fonts, downloads) and the server-side bash tool are switched off.
"""

from __future__ import annotations

import fcntl
import http.client
import json
import logging
import os
import random
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from plangate.ci.phoenix._client import PhoenixError
from plangate.ci.phoenix.names import (
    DEFAULT_ENV,
    DEFAULT_FOLDER,
    DEFAULT_GRPC_PORT,
    DEFAULT_PORT,
    ENV_VARIABLE,
    HOST,
    TRACES_PATH,
)

logger = logging.getLogger("plangate.phoenix")

SERVER_REQUIREMENT = "arize-phoenix>=20.8,<21"
"""The server versions plangate is tested with (20.26.1); the client needs at least 20.8."""
STATE = "server.json"
LOG = "server.log"

LAUNCHER = """
import sys
import grpc.aio._server as grpc_server

_add = grpc_server.Server.add_insecure_port


def _loopback(self, address):
    # Phoenix asks for "[::]:PORT" (every interface); plangate serves on 127.0.0.1 only.
    return _add(self, address.replace("[::]", "127.0.0.1", 1))


grpc_server.Server.add_insecure_port = _loopback
from phoenix.server.main import main

sys.argv = ["phoenix", "serve"]
sys.exit(main())
"""


_STARTED: dict[int, subprocess.Popen[bytes]] = {}
"""Servers this process started, by pid: `_alive` polls (and so reaps) them through their Popen,
which would otherwise warn (ResourceWarning) that the process is still running when collected."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PhoenixServer:
    """A running local Phoenix server."""

    url: str
    """Base URL: UI, REST (`/v1`), OTLP/HTTP (`/v1/traces`)."""
    port: int
    grpc_port: int
    folder: str
    """Its data folder (the SQLite database, the log, this state)."""
    pid: int

    @property
    def traces_url(self) -> str:
        """The OTLP/HTTP traces endpoint."""
        return f"{self.url}{TRACES_PATH}"


def server_python(
    env: str | Path | None = None,
    *,
    create: bool = True,
    progress: Callable[[str], None] = logger.info,
) -> Path:
    """The server environment's Python; the environment is created on first use.

    `progress` hears what takes long (creating the environment: about two minutes).
    """
    # Absolute from here on: the working directory may change while it is being created.
    folder = Path(env or os.environ.get(ENV_VARIABLE) or DEFAULT_ENV).absolute()
    python = folder / "bin" / "python"
    if _has_server(python):
        return python
    if not create:
        raise PhoenixError(
            f"no Phoenix server environment at {folder}: run `plangate phoenix up` (it creates "
            f"one) or set {ENV_VARIABLE} to an environment with arize-phoenix installed"
        )
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        lock = open(folder.parent / f".{folder.name}.lock", "w")  # noqa: SIM115 - closed below
    except OSError as exc:
        raise PhoenixError(
            f"could not create the Phoenix server environment in {folder}: {exc}"
        ) from exc
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process creating it: wait, then use it
        if not _has_server(python):
            _create(folder, progress)
    return python


def _create(folder: Path, progress: Callable[[str], None]) -> None:
    progress(f"creating the Phoenix server environment in {folder} (once; about 2 minutes)…")
    for command in (
        [sys.executable, "-m", "venv", str(folder)],
        [str(folder / "bin" / "python"), "-m", "pip", "install", "-q", SERVER_REQUIREMENT],
    ):
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise PhoenixError(
                f"could not create the Phoenix server environment in {folder}: "
                f"{' '.join(command[-3:])} failed:\n{done.stderr.strip()[-2000:]}"
            )


def _has_server(python: Path) -> bool:
    """Whether the environment has the server installed.

    Asked of its metadata: importing (or finding) `phoenix.server` imports the `phoenix`
    package, which takes 17 seconds here.
    """
    if not python.is_file():
        return False
    check = [str(python), "-c", "import importlib.metadata as m; m.version('arize-phoenix')"]
    return subprocess.run(check, capture_output=True, check=False).returncode == 0


def up(
    folder: str | Path = DEFAULT_FOLDER,
    *,
    port: int = DEFAULT_PORT,
    grpc_port: int = DEFAULT_GRPC_PORT,
    env: str | Path | None = None,
    max_spans_queue: int | None = None,
    timeout: float = 180.0,
    progress: Callable[[str], None] = logger.info,
) -> PhoenixServer:
    """Start a server with its data in `folder` (or return the one already running there).

    `progress` hears what takes long (the first start creates the server's environment).
    """
    data = Path(folder).resolve()
    running = status(data)
    if running is not None:
        return running
    if port == grpc_port:
        raise PhoenixError(
            f"--port and --grpc-port are both {port}: Phoenix serves HTTP and gRPC on two "
            "different ports"
        )
    for number, name in ((port, "--port"), (grpc_port, "--grpc-port")):
        if _in_use(number):
            raise PhoenixError(f"port {number} on {HOST} is in use: choose another with {name}")
    python = server_python(env, progress=progress)
    data.mkdir(parents=True, exist_ok=True)
    environment = {
        **os.environ,
        "PHOENIX_WORKING_DIR": str(data),
        "PHOENIX_HOST": HOST,
        "PHOENIX_PORT": str(port),
        "PHOENIX_GRPC_PORT": str(grpc_port),
        "PHOENIX_TELEMETRY_ENABLED": "false",
        "PHOENIX_ALLOW_EXTERNAL_RESOURCES": "false",
        "PHOENIX_AGENTS_DISABLE_BASH": "true",
        "PHOENIX_DISCOVER_CONFIG": "false",
    }
    if max_spans_queue is not None:
        environment["PHOENIX_MAX_SPANS_QUEUE_SIZE"] = str(max_spans_queue)
    with open(data / LOG, "ab") as log:
        process = subprocess.Popen(
            [str(python), "-c", LAUNCHER],
            env=environment,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # outlives `plangate phoenix up`
        )
    server = PhoenixServer(
        url=f"http://{HOST}:{port}", port=port, grpc_port=grpc_port, folder=str(data),
        pid=process.pid,
    )  # fmt: skip
    _STARTED[process.pid] = process
    try:
        _wait_until_healthy(server, process, timeout)
    except BaseException:
        _stop(process.pid)  # a server that failed to start is not left running
        raise
    _write_state(data, server)
    return server


def _wait_until_healthy(
    server: PhoenixServer, process: subprocess.Popen[bytes], timeout: float
) -> None:
    log = Path(server.folder) / LOG
    deadline = time.monotonic() + timeout
    while not _healthy(server.url):
        if process.poll() is not None:
            raise PhoenixError(
                f"the Phoenix server exited with code {process.returncode} while starting; "
                f"see {log}:\n{_tail(log)}"
            )
        if time.monotonic() > deadline:
            raise PhoenixError(
                f"the Phoenix server was not healthy after {timeout:.0f} s; see {log}:\n"
                f"{_tail(log)}"
            )
        time.sleep(0.2)


def status(folder: str | Path = DEFAULT_FOLDER) -> PhoenixServer | None:
    """The server running with its data in `folder`, if one is up and healthy."""
    path = Path(folder).resolve() / STATE
    try:
        server = PhoenixServer(**json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError):
        return None
    if not _alive(server.pid) or not _healthy(server.url):
        return None
    return server


def down(folder: str | Path = DEFAULT_FOLDER, *, timeout: float = 30.0) -> bool:
    """Stop the server of `folder`; False when none was running."""
    data = Path(folder).resolve()
    try:
        server = PhoenixServer(**json.loads((data / STATE).read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError):
        return False
    (data / STATE).unlink(missing_ok=True)
    if not _alive(server.pid):
        return False
    _stop(server.pid, timeout)
    return True


def _stop(pid: int, timeout: float = 30.0) -> None:
    """End the process group `pid` leads: SIGTERM, then SIGKILL after `timeout` seconds."""
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    if _alive(pid):
        os.killpg(pid, signal.SIGKILL)


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/healthz", timeout=2) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError, http.client.HTTPException):
        return False  # nothing answers, or something that does not speak HTTP (a gRPC server)


def _alive(pid: int) -> bool:
    started = _STARTED.get(pid)
    if started is not None:
        return started.poll() is None
    try:
        waited, _ = os.waitpid(pid, os.WNOHANG)  # reap it if it is our own child that ended
        if waited == pid:
            return False
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _in_use(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        return probe.connect_ex((HOST, port)) == 0


def _write_state(folder: Path, server: PhoenixServer) -> None:
    temporary = folder / f".{STATE}.tmp"
    temporary.write_text(json.dumps(asdict(server), indent=2) + "\n", encoding="utf-8")
    os.replace(temporary, folder / STATE)


def _tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    return free_ports(1)[0]


def free_ports(count: int) -> list[int]:
    """`count` different TCP ports on 127.0.0.1 that nothing listens on now.

    Chosen below the ports the system hands to any socket that asks for one (a client's
    connection, a server bound to port 0): a port taken from that range could be handed to
    another socket in the seconds before the server binds it. The probes stay bound until all
    are chosen: two separate `free_port()` calls may return the same port.
    """
    low, high = _quiet_ports()
    chooser = random.Random()  # seeded from the system: test processes choose apart
    probes: list[socket.socket] = []
    try:
        for _ in range(count + _TRIES):
            if len(probes) == count:
                break
            probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                probe.bind((HOST, chooser.randrange(low, high) if low < high else 0))
            except OSError:  # taken: another
                probe.close()
                continue
            probes.append(probe)
        while len(probes) < count:  # the quiet ports are all taken: any free one
            probes.append(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            probes[-1].bind((HOST, 0))
        return [int(probe.getsockname()[1]) for probe in probes]
    finally:
        for probe in probes:
            probe.close()


_TRIES = 50
"""Ports tried below the system's range before taking one from it."""
_EPHEMERAL = Path("/proc/sys/net/ipv4/ip_local_port_range")
_QUIET_BELOW = 32768
"""The first port the system hands out where it does not say (Linux's default; macOS and
Windows start at 49152)."""


def _quiet_ports() -> tuple[int, int]:
    """Ports [low, high) that the system never hands out by itself: below its range."""
    try:
        high = int(_EPHEMERAL.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        high = _QUIET_BELOW
    return max(1024, high - 12_000), high
