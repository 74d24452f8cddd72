# SPDX-License-Identifier: MIT
"""Real worker processes on one Redis: one is killed mid-job, another finishes its work.

The workers run through the CLI (`rainier-queue work`) in subprocesses, on
a namespace of their own on the shared server, with a 2-second lease so
the dead worker's jobs are reclaimed quickly.
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

from ..redis_servers import delete_keys
from ..services import require_port
from .harness import config, count, events, output, worker

pytestmark = pytest.mark.slow


@pytest.fixture
async def url() -> AsyncIterator[str]:
    require_port("Redis", 6379)
    namespace = "rq" + uuid.uuid4().hex[:12]
    yield f"redis://127.0.0.1:6379/0?prefix=rq:{namespace}:"
    await delete_keys(f"rq:{namespace}:*")


@pytest.mark.timeout(180)
async def test_a_worker_killed_mid_job_loses_nothing_and_another_finishes_every_job(
    tmp_path: Path, url: str
) -> None:
    conf = config(tmp_path, url, lease="2s")
    ledger = tmp_path / "ledger.db"
    total = 24
    queue = open_queue(url)
    try:
        await queue.push_many(
            [QueuedJob.create("slow", {"n": n}, max_attempts=5) for n in range(total)]
        )
    finally:
        await queue.aclose()
    settings = ("--concurrency", "4", "--timeout", "1.5s", "--sleep", "0.2s")

    doomed = worker(conf, ledger, *settings)
    deadline = time.monotonic() + 60
    while len(count(ledger, "start")) < 6:
        assert time.monotonic() < deadline, f"the first worker never started work: {output(doomed)}"
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
    queue = open_queue(url)
    try:
        assert await queue.size("default") == 0
        assert isinstance(queue, FailedJobStore)
        assert await queue.failed_jobs() == []
    finally:
        await queue.aclose()
