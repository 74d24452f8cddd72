# SPDX-License-Identifier: MIT
"""Real worker processes on one MariaDB database: every job run once, or failed once.

These run the CLI's `work` command in subprocesses, so they test what a
user deploys: the driver, its SKIP LOCKED claims, the worker and the
process boundary together.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from rainier_queue.drivers import open_queue
from rainier_queue.envelope import QueuedJob
from rainier_queue.queue import FailedJobStore

from ..mysql_service import SERVER, check, drop_tables
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
    assert len({pid for *_, pid, _ in events(ledger)}) == 4, "every process took work"
    queue = open_queue(url)
    try:
        assert await queue.size("default") == 0
        assert isinstance(queue, FailedJobStore)
        failed = await queue.failed_jobs(limit=total)
        assert sorted(f.job.payload["n"] for f in failed) == sorted(failing)
    finally:
        await queue.aclose()
