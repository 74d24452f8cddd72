# SPDX-License-Identifier: MIT
"""Real worker processes on one MariaDB database: every job run once, or failed once.

These run the CLI's `work` command in subprocesses, so they test what a
user deploys: the driver, its SKIP LOCKED claims, the worker and the
process boundary together.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from rainier_queue.drivers import open_queue
from rainier_queue.envelope import QueuedJob
from rainier_queue.queue import FailedJobStore

from ..mysql_service import SERVER, ThrowawayServer, check, drop_tables
from .harness import config, count, events, output, worker

pytestmark = pytest.mark.slow


@pytest.fixture
async def url() -> AsyncIterator[str]:
    """A queue URL on a table prefix of its own, dropped afterwards."""
    check()
    prefix = f"rq{uuid.uuid4().hex[:10]}_"
    yield f"{SERVER}?prefix={prefix}"
    await drop_tables(prefix)


async def push(url: str, jobs: list[QueuedJob]) -> None:
    queue = open_queue(url)
    try:
        for start in range(0, len(jobs), 2000):
            await queue.push_many(jobs[start : start + 2000])
    finally:
        await queue.aclose()


@pytest.mark.timeout(300)
async def test_twenty_thousand_jobs_through_four_worker_processes_each_run_once_or_fail(
    tmp_path: Path, url: str
) -> None:
    ledger = tmp_path / "ledger.db"
    total = 20_000
    await push(url, [QueuedJob.create("count", {"n": n}, max_attempts=1) for n in range(total)])

    conf = config(tmp_path, url, pool_max="4")
    procs = [worker(conf, ledger, "--stop-when-empty", "--concurrency", "4") for _ in range(4)]
    codes = [await asyncio.to_thread(p.wait, 280) for p in procs]

    assert all(code in (0, 1) for code in codes), [output(p) for p in procs]
    starts = count(ledger, "start")
    failing = {n for n in range(total) if n % 97 == 0}
    assert set(starts) == set(range(total)), "every job ran"
    assert max(starts.values()) == 1, "no job was reserved twice"
    assert set(count(ledger, "finish")) == set(range(total)) - failing
    # At least two, so runs really overlapped; on a loaded machine a fourth process
    # can start after the others have drained the backlog, which is no fault.
    assert len({pid for *_, pid, _ in events(ledger)}) >= 2, "the processes shared the work"
    queue = open_queue(url)
    try:
        assert await queue.size("default") == 0
        assert isinstance(queue, FailedJobStore)
        failed = await queue.failed_jobs(limit=total)
        assert sorted(f.job.payload["n"] for f in failed) == sorted(failing)
    finally:
        await queue.aclose()


@pytest.mark.timeout(180)
async def test_a_worker_killed_mid_job_holds_nothing_and_another_reruns_its_jobs(
    tmp_path: Path, url: str
) -> None:
    # A SIGKILL drops the worker's connections; the server rolls back any claim
    # it had open, and its committed leases lapse two seconds later.
    conf = config(tmp_path, url, lease="2s")
    ledger = tmp_path / "ledger.db"
    total = 30
    await push(url, [QueuedJob.create("slow", {"n": n}, max_attempts=5) for n in range(total)])
    settings = ("--concurrency", "4", "--timeout", "1.5s", "--sleep", "0.2s")

    doomed = worker(conf, ledger, *settings)
    deadline = time.monotonic() + 60
    while len(count(ledger, "start")) < 6:
        assert time.monotonic() < deadline, "the first worker never started work"
        await asyncio.sleep(0.05)
    os.kill(doomed.pid, signal.SIGKILL)
    await asyncio.to_thread(doomed.wait)
    mine = [(n, e) for _, n, _, pid, e in events(ledger) if pid == doomed.pid]
    interrupted = {n for n, e in mine if e == "start"} - {n for n, e in mine if e == "finish"}
    assert interrupted, "the kill should land while jobs are running"

    rescuer = worker(conf, ledger, *settings)
    try:
        deadline = time.monotonic() + 120
        while set(count(ledger, "finish")) != set(range(total)):
            assert time.monotonic() < deadline, "the second worker did not finish every job"
            assert rescuer.poll() is None, output(rescuer)
            await asyncio.sleep(0.1)
    finally:
        rescuer.send_signal(signal.SIGTERM)
        await asyncio.to_thread(rescuer.wait, 60)

    rerun = {
        (n, attempt)
        for _, n, attempt, pid, e in events(ledger)
        if pid == rescuer.pid and e == "start"
    }
    for n in interrupted:
        assert any(r_n == n and attempt >= 2 for r_n, attempt in rerun), (
            f"job {n} was running when its worker died; it must run again as a later attempt"
        )
    finishes = count(ledger, "finish")
    assert all(finishes[n] == 1 for n in range(total) if n not in interrupted)
    queue = open_queue(url)
    try:
        assert await queue.size("default") == 0
        assert isinstance(queue, FailedJobStore)
        assert await queue.failed_jobs() == []
    finally:
        await queue.aclose()


@pytest.mark.timeout(240)
async def test_workers_ride_out_a_killed_and_restarted_server_and_every_job_finishes(
    tmp_path: Path,
) -> None:
    server = ThrowawayServer(tmp_path / "server")
    server.start()
    try:
        url = f"{server.url}?prefix=rq_"
        conf = config(tmp_path, url, lease="2s")
        ledger = tmp_path / "ledger.db"
        total = 400
        jobs = [
            QueuedJob.create("slow", {"n": n, "seconds": 0.05}, max_attempts=10)
            for n in range(total)
        ]
        await push(url, jobs)
        settings = (
            "--concurrency",
            "4",
            "--timeout",
            "1.5s",
            "--sleep",
            "0.2s",
            "--max-error-backoff",
            "1s",
        )
        workers = [worker(conf, ledger, *settings) for _ in range(2)]
        try:
            deadline = time.monotonic() + 60
            while len(count(ledger, "finish")) < 40:
                assert time.monotonic() < deadline, "the workers never got going"
                await asyncio.sleep(0.05)
            server.kill()  # mid-run: claims, settles and polls all fail now
            await asyncio.sleep(3)
            assert all(w.poll() is None for w in workers), "a worker gave up on the outage"
            server.start()

            deadline = time.monotonic() + 120
            while set(count(ledger, "finish")) != set(range(total)):
                assert time.monotonic() < deadline, "the workers did not finish after the restart"
                for w in workers:
                    assert w.poll() is None, output(w)
                await asyncio.sleep(0.1)
        finally:
            for w in workers:
                w.send_signal(signal.SIGTERM)
            for w in workers:
                await asyncio.to_thread(w.wait, 60)

        # Every job pushed before the crash was still there after it (a commit
        # is on disk), and each ran to the end; one whose acknowledgement the
        # crash swallowed may have run again, which at-least-once allows.
        queue = open_queue(url)
        try:
            assert await queue.size("default") == 0
            assert isinstance(queue, FailedJobStore)
            assert await queue.failed_jobs() == []
        finally:
            await queue.aclose()
    finally:
        server.stop()
