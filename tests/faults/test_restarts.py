# SPDX-License-Identifier: MIT
"""Real worker processes on a server of the test's own that crashes or restarts under them.

A restart (an upgrade, a failover, a crash) must cost a pause, never a job.
The workers (through the CLI) must sit the outage out with their capped
backoff, not exit; their connections, all dead after it, must be replaced;
an idle worker must still hear of new pushes; and every job must finish
exactly once: none lost, none run twice. A lease far longer than the outage
is what makes "exactly once" a fair demand: an acknowledgement that fails
during the outage is retried after it, while the worker still holds the job.
A server known to forget acknowledgements it answered just before a SIGKILL
names that window in its Backend (`crash_forgets`); only jobs finished inside
it may run again there.

Every driver whose Backend gives a `private_server` (tests/contract) runs
these: a server started for the test on a free port with its own data, never
a shared one. It is stopped the two ways that matter: crashed (no shutdown,
so only what was committed comes back) while the workers are busy, and
stopped cleanly while they are idle. What only one server does around a
restart stays in its driver's file: PostgreSQL's pool after a restart
(test_postgres_restart.py), Redis's dataset marker (test_redis_restart.py).
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from ..contract.backends import Backend, PrivateServer
from .harness import (
    assert_drained,
    config,
    count,
    each_finished_once,
    finished_again_only_after,
    output,
    push_slow,
    rode_out_an_outage,
    until_finished,
    until_working,
    worker,
)

pytestmark = [pytest.mark.slow, pytest.mark.needs("private_server", "processes")]

OUTAGE = 2.5
"""Seconds the server stays down: several of the workers' polls and backoffs."""


@pytest.fixture
def server(backend: Backend, tmp_path: Path) -> Iterator[PrivateServer]:
    assert backend.private_server is not None
    folder = tmp_path / "server"
    folder.mkdir()
    started = backend.private_server(folder, None)
    try:
        yield started
    finally:
        started.remove()


@pytest.fixture
def url(backend: Backend, server: PrivateServer, tmp_path: Path) -> str:
    namespace = "rqr" + uuid.uuid4().hex[:10]
    backend.setup(tmp_path, namespace, ["default"])
    return server.url(tmp_path, namespace)


def start_worker(conf: Path, ledger: Path) -> subprocess.Popen[bytes]:
    return worker(
        conf,
        ledger,
        *("--concurrency", "4", "--sleep", "0.5s", "--timeout", "5s"),
        *("--max-consecutive-errors", "200", "--max-error-backoff", "0.5s"),
    )


async def down_for_a_while(
    workers: list[subprocess.Popen[bytes]], server: PrivateServer, *, crash: bool
) -> None:
    """Crash or stop the server under the workers, keep it down, and start it again."""
    if crash:
        server.crash()
    else:
        server.stop()
    await asyncio.sleep(OUTAGE)
    for proc in workers:
        assert proc.poll() is None, f"a worker died while the server was down: {output(proc)}"
    server.start()  # same port, same data


async def stopped(workers: list[subprocess.Popen[bytes]]) -> list[tuple[int, str]]:
    """SIGTERM every worker (a graceful stop) and wait: (exit code, output) of each."""
    for proc in workers:
        await until_working(proc)
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    codes = [await asyncio.to_thread(proc.wait, 60) for proc in workers]
    return [(code, output(proc)) for code, proc in zip(codes, workers, strict=True)]


def assert_rode_it_out(ended: list[tuple[int, str]], server: PrivateServer) -> None:
    for code, printed in ended:
        assert code == 0, f"a worker should exit cleanly on SIGTERM: {printed}"
        assert "lost its data" not in printed, "the restart should have brought every job back"
    assert any(rode_out_an_outage(printed, server.outage) for _, printed in ended), [
        printed for _, printed in ended
    ]


@pytest.mark.timeout(240)
async def test_busy_workers_ride_out_a_crash_and_restart_and_run_every_job_once(
    tmp_path: Path, backend: Backend, server: PrivateServer, url: str
) -> None:
    conf = config(tmp_path, url, lease="30s")
    ledger = tmp_path / "ledger.db"
    total = 300
    await push_slow(url, range(total))

    workers = [start_worker(conf, ledger) for _ in range(2)]
    try:
        deadline = time.monotonic() + 60
        while len(count(ledger, "finish")) < 30:
            assert time.monotonic() < deadline, f"the workers never got going: {output(workers[0])}"
            for proc in workers:
                assert proc.poll() is None, output(proc)
            await asyncio.sleep(0.02)
        before = set(count(ledger, "finish"))
        assert len(before) < total, "the crash should land while jobs are still queued"

        crashed_at = time.time()
        await down_for_a_while(workers, server, crash=True)

        for proc in workers:
            await until_finished(ledger, proc, set(range(total)), within=120)
    finally:
        ended = await stopped(workers)

    assert_rode_it_out(ended, server)
    assert set(count(ledger, "finish")) - before, "some jobs finished only after the restart"
    if backend.crash_forgets is None:
        each_finished_once(ledger, range(total))
    else:  # what this server is known to forget, and nothing older
        finished_again_only_after(ledger, range(total), crashed_at - backend.crash_forgets[0])
    await assert_drained(url)


@pytest.mark.timeout(180)
async def test_an_idle_worker_rides_out_a_restart_and_takes_jobs_pushed_after_it(
    tmp_path: Path, server: PrivateServer, url: str
) -> None:
    conf = config(tmp_path, url, lease="30s")
    ledger = tmp_path / "ledger.db"
    await push_slow(url, range(10))

    proc = start_worker(conf, ledger)
    try:
        await until_finished(ledger, proc, set(range(10)))
        await asyncio.sleep(1)  # every slot free: the worker waits for work

        await down_for_a_while([proc], server, crash=False)
        await push_slow(url, range(10, 30))  # a small push
        await push_slow(url, range(30, 100))  # a big one (PostgreSQL sends it by COPY)

        await until_finished(ledger, proc, set(range(100)), within=90)
    finally:
        ended = await stopped([proc])

    assert_rode_it_out(ended, server)
    each_finished_once(ledger, range(100))
    await assert_drained(url)
