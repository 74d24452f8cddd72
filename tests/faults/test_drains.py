# SPDX-License-Identifier: MIT
"""A draining worker (`--stop-when-empty`) finishes the jobs a dead worker held.

A batch run that loses a worker must not end with that worker's jobs still
hidden under their leases and an exit code of 0. The drain counts what is
held (`Countable`) and waits for leases that lapse within its bound, then
runs those jobs itself. One test per driver other processes can share.
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

from rainier_queue.connections import open_queue
from rainier_queue.queue import Countable

from ..contract.backends import BACKENDS, Backend
from .harness import config, count, output, push_slow, worker

SHARED = [name for name in BACKENDS if name not in ("memory", "redis-cluster", "kafka")]
PATIENCE = 60.0
"""Seconds to wait for something that should happen soon (a bound, not a timing test)."""


@pytest.fixture(params=SHARED)
async def url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    backend: Backend = BACKENDS[str(request.param)]
    if backend.check is not None:
        backend.check()
    namespace = "rqd" + uuid.uuid4().hex[:10]
    yield backend.url(tmp_path, namespace)
    if backend.cleanup is not None:
        await backend.cleanup(tmp_path, namespace)


@pytest.mark.timeout(180)
async def test_a_drain_after_a_worker_died_runs_the_jobs_it_held_before_exiting_0(
    tmp_path: Path, url: str
) -> None:
    jobs = set(range(4))
    await push_slow(url, jobs, seconds=2.5)
    # The lease outlasts the wait for every start and the look at the counts, loaded.
    conf = config(tmp_path, url, lease="8s")
    ledger = tmp_path / "ledger.db"
    settings = ("--concurrency", "4", "--timeout", "3.5s", "--sleep", "0.2s")
    doomed = worker(conf, ledger, *settings)
    deadline = time.monotonic() + PATIENCE
    while len(count(ledger, "start")) < len(jobs):
        assert doomed.poll() is None, output(doomed)
        assert time.monotonic() < deadline, (
            f"the first worker never took every job: {output(doomed)}"
        )
        await asyncio.sleep(0.05)
    os.kill(doomed.pid, signal.SIGKILL)
    await asyncio.to_thread(doomed.wait)

    queue = open_queue(url)
    try:
        if not isinstance(queue, Countable):
            pytest.skip(
                f"{queue.name} does not count by state (Countable): a drain has no "
                "held jobs to wait for, and a dead worker's come back at once"
            )
        held = await queue.counts("default")
        assert held.reserved > 0, "the dead worker's jobs are shown as held"
    finally:
        await queue.aclose()

    drain = worker(conf, ledger, "--stop-when-empty", *settings)
    code = await asyncio.to_thread(drain.wait, PATIENCE * 2)

    assert code == 0, output(drain)
    assert set(count(ledger, "finish")) == jobs, output(drain)
    queue = open_queue(url)
    try:
        left = await queue.counts("default")  # type: ignore[attr-defined]
        assert left.total == 0
    finally:
        await queue.aclose()
