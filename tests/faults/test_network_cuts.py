# SPDX-License-Identifier: MIT
"""A server that goes silent under its clients, on every driver with a `private_server`.

Restart tests stop the server, which answers at once with refused
connections. A server that vanishes without closing its connections (power
lost, a failover to another address, packets dropped by a firewall) sends no
reset. Left to the operating system's defaults, a query sent on such a
connection waits about fifteen minutes for the kernel to give up
retransmitting, and an idle one is probed only after two hours: a worker
would sit through all of it doing nothing. The drivers set the connection's
own limits instead (Redis keeps redis-py's 5 s socket timeout), so the call
fails as an outage the worker rides out, and once the network is back the
next call works on a fresh connection.

The client runs in a network namespace joined to the server's by a virtual
cable (tests/partition.py), which the test takes down: the client's packets
then go nowhere, as on a real network. The server is the backend's private
one (tests/contract/backends.py), told to listen on the cable's address too.

Two promises: a call on a silent connection fails in seconds, as
`BrokerUnavailable`, and works again after; and a busy worker cut off for
longer than that rides the cut out: every job runs to the end exactly once,
with the lease (30 s) outlasting the cut, so no job is handed to anyone
else, and nothing is left queued or failed.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from ..contract.backends import Backend, Listen, PrivateServer
from ..partition import Partition
from .harness import (
    assert_drained,
    config,
    count,
    each_finished_once,
    output,
    push_slow,
    rode_out_an_outage,
    terminate,
    until_finished,
    worker,
)

pytestmark = [pytest.mark.slow, pytest.mark.needs("private_server")]

ROOT = Path(__file__).resolve().parents[2]

LIMIT = 25.0
"""Seconds a call on a silent connection may take to fail: the drivers aim at about 10."""
CUT = 14.0
"""Seconds the cable stays down under a busy worker: past the drivers' 10 s give-up, short
of the 30 s lease."""
TOTAL = 300
PIECE = 30
"""Jobs a setup push carries at once (three SQS calls)."""

CLIENT = """
import asyncio, sys, time
from rainier_queue.connections import open_queue

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


@pytest.fixture
def server(backend: Backend, tmp_path: Path, partition: Partition) -> Iterator[PrivateServer]:
    """The backend's private server, listening on the cable's address as well."""
    assert backend.private_server is not None
    folder = tmp_path / "server"
    folder.mkdir()
    started = backend.private_server(folder, Listen(partition.host, partition.network))
    try:
        yield started
    finally:
        started.remove()


@pytest.fixture
def url(backend: Backend, server: PrivateServer, tmp_path: Path) -> str:
    namespace = "rqc" + uuid.uuid4().hex[:10]
    backend.setup(tmp_path, namespace, ["default"])
    return server.url(tmp_path, namespace)


def test_a_call_on_a_silent_connection_fails_in_seconds_and_works_once_it_is_back(
    partition: Partition, url: str
) -> None:
    exercise(partition, url)


@pytest.mark.timeout(180)
@pytest.mark.needs("processes")
async def test_a_busy_worker_rides_out_a_network_cut_and_runs_every_job_once(
    tmp_path: Path, partition: Partition, server: PrivateServer, url: str
) -> None:
    await ride_out_a_cut(tmp_path, partition, url, server.outage)


async def ride_out_a_cut(tmp_path: Path, partition: Partition, url: str, outage: str) -> None:
    conf = config(tmp_path, url, lease="30s")
    ledger = tmp_path / "ledger.db"
    # In pieces: the URL's calls give up after the 5 s a cut is noticed in (SQS), and a
    # bulk push of all of them at once kept moto's FIFO queue busy longer than that on a
    # loaded machine (300 jobs, 30 calls in flight, 11-14 s), so the setup itself failed.
    for start in range(0, TOTAL, PIECE):
        await push_slow(url, range(start, min(TOTAL, start + PIECE)))
    proc = worker(
        conf,
        ledger,
        *("--concurrency", "4", "--sleep", "0.5s", "--timeout", "5s"),
        *("--max-consecutive-errors", "500", "--max-error-backoff", "0.5s"),
        within=partition.prefix,
    )
    try:
        deadline = time.monotonic() + 60
        while len(count(ledger, "finish")) < 30:
            assert time.monotonic() < deadline, f"the worker never got going: {output(proc)}"
            assert proc.poll() is None, output(proc)
            await asyncio.sleep(0.02)
        before = set(count(ledger, "finish"))
        assert len(before) < TOTAL, "the cut should come while jobs are still queued"

        partition.cut()
        await asyncio.sleep(CUT)
        assert proc.poll() is None, f"the worker died while cut off: {output(proc)}"
        partition.heal()

        await until_finished(ledger, proc, set(range(TOTAL)), within=90)
    finally:
        partition.heal()
        code = await terminate(proc)

    printed = output(proc)
    assert code == 0, f"the worker should exit cleanly on SIGTERM: {printed}"
    assert rode_out_an_outage(printed, outage), printed
    assert set(count(ledger, "finish")) - before, "some jobs finished only after the cut"
    each_finished_once(ledger, range(TOTAL))
    await assert_drained(url)
