"""`plangate phoenix up | status | down`: a real server, every port it listens on on loopback."""

from __future__ import annotations

import ipaddress
import json
import os
import re
import socket
import threading
from pathlib import Path

import pytest

from plangate.ci.phoenix import _server as server_module
from plangate.ci.phoenix._server import (
    _quiet_ports,
    down,
    free_port,
    free_ports,
    server_python,
    status,
)
from tests.helpers import plangate

LISTEN = "0A"
"""The TCP state LISTEN in /proc/net/tcp."""


def session_pids(leader: int) -> list[int]:
    """The processes of the session `leader` started (the server and any children of it)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()  # after "pid (comm) "
        if int(fields[3]) == leader:  # field 6 of stat: the session id
            pids.append(int(entry.name))
    return pids


def socket_inodes(pid: int) -> set[str]:
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        found = re.fullmatch(r"socket:\[(\d+)\]", target)
        if found:
            inodes.add(found.group(1))
    return inodes


def address(hex_address: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    """An address as /proc/net/tcp{,6} writes it: 32-bit words in host (little-endian) order."""
    words = [bytes.fromhex(hex_address[i : i + 8])[::-1] for i in range(0, len(hex_address), 8)]
    packed = b"".join(words)
    return ipaddress.ip_address(packed)


def listening(pids: list[int]) -> list[tuple[str, int]]:
    """(address, port) of every TCP socket in LISTEN that one of `pids` holds."""
    inodes = set().union(*(socket_inodes(pid) for pid in pids))
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if state == LISTEN and inode in inodes:
                host, port = local.split(":")
                found.append((str(address(host)), int(port, 16)))
    return found


def gone(pid: int) -> bool:
    """The process has ended (a zombie waiting for its reaper counts as ended)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat[stat.rindex(")") + 2] == "Z"


def is_loopback(text: str) -> bool:
    value = ipaddress.ip_address(text)
    if isinstance(value, ipaddress.IPv6Address) and value.ipv4_mapped is not None:
        value = value.ipv4_mapped
    return value.is_loopback


def test_address_parsing_reads_proc_net_tcp() -> None:
    assert str(address("0100007F")) == "127.0.0.1"
    assert str(address("00000000000000000000000000000000")) == "::"
    mapped = address("0000000000000000FFFF00000100007F")
    assert str(mapped) == "::ffff:7f00:1" and is_loopback(str(mapped))
    assert not is_loopback("0.0.0.0") and not is_loopback("::")


def test_up_status_down_with_every_port_on_loopback(tmp_path: Path) -> None:
    folder = tmp_path / "phoenix"
    port, grpc_port = free_ports(2)
    where = ("--dir", str(folder))
    try:
        done = plangate("phoenix", "up", *where, "--port", str(port), "--grpc-port", str(grpc_port))
        assert done.returncode == 0, done.stderr
        assert f"http://127.0.0.1:{port}/v1/traces" in done.stdout
        done = plangate("phoenix", "status", *where)
        assert done.returncode == 0, done.stderr
        assert f"running at http://127.0.0.1:{port}" in done.stdout
        assert str(folder) in done.stdout
        pid = int(re.findall(r"pid (\d+)", done.stdout)[0])

        sockets = listening(session_pids(pid))
        assert {port, grpc_port} <= {p for _, p in sockets}, sockets
        assert all(is_loopback(host) for host, _ in sockets), sockets

        again = plangate("phoenix", "up", *where)
        assert again.returncode == 0 and "already running" in again.stdout
        stopped = plangate("phoenix", "down", *where)
        assert stopped.returncode == 0 and "stopped" in stopped.stdout
        assert gone(pid)
        done = plangate("phoenix", "status", *where)
        assert done.returncode == 1 and "not running" in done.stdout
    finally:
        down(folder)


def test_up_on_a_port_in_use_is_a_usage_error(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = plangate("phoenix", "up", "--dir", str(tmp_path), "--port", str(port), timeout=60)
    assert done.returncode == 2
    assert f"plangate: error: port {port} on 127.0.0.1 is in use" in done.stderr
    assert "--port" in done.stderr


def test_free_ports_are_different_and_free() -> None:
    for _ in range(50):
        ports = free_ports(3)
        assert len(set(ports)) == 3
    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", free_port())) != 0
    low, high = _quiet_ports()
    assert all(low <= port < high for port in free_ports(3))  # none the system hands out


def test_free_ports_are_found_when_the_quiet_ones_are_taken(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        port = taken.getsockname()[1]
        monkeypatch.setattr(server_module, "_quiet_ports", lambda: (port, port + 1))
        ports = free_ports(2)
    assert len(set(ports)) == 2
    assert port not in ports


def test_the_same_port_for_http_and_grpc_is_a_usage_error(tmp_path: Path) -> None:
    # Phoenix would start its gRPC server on the port, fail to bind HTTP to it and hang.
    port = str(free_port())
    done = plangate("phoenix", "up", "--dir", str(tmp_path), "--port", port, "--grpc-port", port)
    assert done.returncode == 2
    assert f"plangate: error: --port and --grpc-port are both {port}" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_port_answered_by_something_other_than_http_is_not_a_healthy_server(
    tmp_path: Path,
) -> None:
    """A stale state file whose port a gRPC server now holds: `status` says not running."""
    settings = b"\x00\x00\x06\x04\x00\x00\x00\x00\x00\x00\x05\x00\x00\x40\x00"  # HTTP/2
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        port = other.getsockname()[1]

        def answer() -> None:
            for _ in range(2):
                connection, _ = other.accept()
                with connection:
                    connection.recv(1024)
                    connection.sendall(settings + b"\n")

        replier = threading.Thread(target=answer, daemon=True)
        replier.start()
        state = {
            "url": f"http://127.0.0.1:{port}", "port": port, "grpc_port": port + 1,
            "folder": str(tmp_path), "pid": os.getpid(),
        }  # fmt: skip
        (tmp_path / "server.json").write_text(json.dumps(state))
        assert status(tmp_path) is None
        done = plangate("phoenix", "status", "--dir", str(tmp_path))
        assert done.returncode == 1 and "not running" in done.stdout, done.stderr
        replier.join(timeout=10)


def test_a_server_environment_that_cannot_be_made_is_a_usage_error(tmp_path: Path) -> None:
    nowhere = "/proc/plangate-no-env"  # nothing can be created under /proc
    port, grpc_port = free_ports(2)
    done = plangate(
        "phoenix", "up", "--dir", str(tmp_path), "--port", str(port), "--grpc-port",
        str(grpc_port), "--env", nowhere, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2
    assert f"plangate: error: could not create the Phoenix server environment in {nowhere}" in (
        done.stderr
    )


def test_the_server_environment_is_found_from_any_working_directory(
    phoenix_environment: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # It is created in the background while other tests run, and pytester's tests change the
    # working directory meanwhile: a relative path is made absolute before it is used.
    found = server_python(os.path.relpath(phoenix_environment.parent.parent), create=False)
    monkeypatch.chdir(tmp_path)
    assert found.is_absolute() and found.is_file()
    assert found == phoenix_environment
