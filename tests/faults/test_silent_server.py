# SPDX-License-Identifier: MIT
"""A database server that goes silent mid-conversation: the call fails within seconds, not hours.

A server that vanishes without closing its connections (power lost, a
failover to another address, packets dropped by a firewall) sends no reset.
Left to the operating system's defaults, a query sent on such a connection
waits about fifteen minutes for the kernel to give up retransmitting, and
an idle one is probed only after two hours: a worker would sit through all
of it doing nothing. The drivers set the connection's own limits instead, so
the call fails as an outage the worker rides out, and once the network is
back the next call works on a fresh connection.

Redis needs nothing of the driver's: redis-py reads with a 5 s socket
timeout by default, and its test keeps that so.

The client runs in a network namespace joined to the server's by a virtual
cable (tests/partition.py), which the test takes down: the client's packets
then go nowhere, as on a real network.
"""

from __future__ import annotations

import contextlib
import queue
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import pytest

from ..mysql_service import ThrowawayServer
from ..partition import Partition
from ..postgres_server import ThrowawayPostgres
from ..redis_servers import RedisServers

ROOT = Path(__file__).resolve().parents[2]

LIMIT = 25.0
"""Seconds a call on a silent connection may take to fail: the drivers aim at about 10."""

CLIENT = """
import asyncio, sys, time
from rainier_queue.drivers import open_queue

async def main(url):
    queue = open_queue(url)
    await queue.size("default")  # connected, tables made; the pool keeps the connection
    print("ready", flush=True)
    sys.stdin.readline()  # the cable is cut now
    began = time.monotonic()
    try:
        await queue.size("default")
        print("answered", round(time.monotonic() - began, 1), flush=True)
    except Exception as exc:
        print("failed", type(exc).__name__, round(time.monotonic() - began, 1), flush=True)
    sys.stdin.readline()  # the cable is back
    try:
        print("again", await queue.size("default"), flush=True)
    except Exception as exc:
        print("again failed", type(exc).__name__, exc, flush=True)
    await queue.aclose()

asyncio.run(main(sys.argv[1]))
"""

pytestmark = pytest.mark.slow


WORDS = ("ready", "answered", "failed", "again")
"""How the client's own lines start; anything else is a library's log line."""


class Lines:
    """The client's output, read by a thread of its own, so a wait can have a deadline."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc
        self.lines: queue.Queue[str] = queue.Queue()
        self.other: list[str] = []
        self.pump = threading.Thread(target=self._pump, daemon=True)
        self.pump.start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.strip())

    def next(self, timeout: float) -> str:
        """The client's next line of its own, or a failure showing what else it printed."""
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                break
            if line.startswith(WORDS):
                return line
            self.other.append(line)
        raise AssertionError(
            f"the client said nothing within {timeout:g}s (exit {self.proc.poll()}): "
            f"{self.other[-5:]}"
        )


def exercise(partition: Partition, url: str) -> None:
    """Cut the cable under a connected client: its call fails in time, then works again."""
    client = partition.python(CLIENT, url, cwd=ROOT)
    assert client.stdin is not None
    lines = Lines(client)
    try:
        assert lines.next(60) == "ready"
        partition.cut()
        client.stdin.write("go\n")
        client.stdin.flush()
        verdict = lines.next(LIMIT + 5).split()
        assert verdict[:2] == ["failed", "BrokerUnavailable"], verdict
        assert float(verdict[2]) <= LIMIT
        partition.heal()
        client.stdin.write("go\n")
        client.stdin.flush()
        assert lines.next(60) == "again 0"
    finally:
        partition.heal()
        with contextlib.suppress(OSError):
            client.kill()
        client.wait(10)
        lines.pump.join(10)  # it ends at the output's end; then the pipes may close
        for pipe in (client.stdin, client.stdout):
            if pipe is not None:
                pipe.close()


def test_a_postgres_query_on_a_silent_connection_fails_in_seconds(
    partition: Partition,
) -> None:
    server = ThrowawayPostgres()
    try:
        server.listen_also(partition.host, partition.network)
        server.start()
        exercise(partition, f"postgresql://postgres@{partition.host}:{server.port}/postgres")
    finally:
        server.remove()


def test_a_mysql_query_on_a_silent_connection_fails_in_seconds(partition: Partition) -> None:
    with tempfile.TemporaryDirectory(prefix="rq-silent-mysql-") as folder:
        server = ThrowawayServer(Path(folder))
        try:
            server.listen_also(partition.host)
            server.start()
            exercise(partition, f"mysql://root@{partition.host}:{server.port}/test")
        finally:
            server.stop()


def test_a_redis_command_on_a_silent_connection_fails_in_seconds(partition: Partition) -> None:
    # redis-py's own socket timeout (5 s) is what ends the wait here; the test keeps it so.
    servers = RedisServers(Path(tempfile.mkdtemp(prefix="rq-silent-redis-")))
    try:
        port = servers.start("--bind", f"127.0.0.1 {partition.host}", "--protected-mode", "no")
        exercise(partition, f"redis://{partition.host}:{port}/0?prefix=silent:")
    finally:
        servers.stop()
