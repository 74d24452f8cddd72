# SPDX-License-Identifier: MIT
"""A scheduler killed between pushing a tick's job and recording it: the tick is found by id.

A real process is killed (SIGKILL, from inside its own push, once the job
is stored and before the scheduler writes the outcome), on SQLite files
both processes share. The scheduler that takes the tick over once the dead
one's claim lapses finds the job by its id and settles the tick without a
second push: while the job waits, and after a worker ran it. On a driver
that cannot look a job up, the takeover pushes again, as documented.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
from datetime import timedelta
from pathlib import Path

import pytest

from rainier_queue import LockManager, QueueManager, Worker, WorkerOptions
from rainier_queue.cache.sqlite import SQLiteCache
from rainier_queue.connections import open_queue
from rainier_queue.drivers.memory import MemoryQueue
from rainier_queue.queue import Capabilities
from rainier_queue.scheduling import Schedule, Scheduler
from rainier_queue.scheduling.scheduler import tick_job_id

from .clock import SteppedClock, at
from .jobs import Report, registry

ROOT = Path(__file__).resolve().parents[2]
TICK = "2026-05-17 10:00"

_DYING_SCHEDULER = textwrap.dedent(
    """
    import asyncio, os, signal, sys
    from datetime import timedelta
    from rainier_queue import LockManager, QueueManager
    from rainier_queue.cache.sqlite import SQLiteCache
    from rainier_queue.connections import open_queue
    from rainier_queue.scheduling import Schedule, Scheduler
    from tests.scheduling.clock import SteppedClock, at
    from tests.scheduling.jobs import Report, registry

    async def main() -> None:
        queue = open_queue(sys.argv[1])
        real_push = queue.push

        async def push_then_die(job):
            job_id = await real_push(job)
            os.kill(os.getpid(), signal.SIGKILL)  # stored, and the outcome never written
            return job_id

        queue.push = push_then_die
        locks = LockManager(SQLiteCache(sys.argv[2])).declared_shared()
        manager = QueueManager(queue, registry=registry(), locks=locks)
        schedule = Schedule()
        schedule.job(Report()).hourly()
        clock = SteppedClock(at("2026-05-17 10:00:01"))
        scheduler = Scheduler(manager, schedule, clock=clock, claim_lease=timedelta(seconds=1))
        await scheduler.run_pending()

    asyncio.run(main())
    """
)


def _kill_a_scheduler_mid_tick(queue_url: str, store: Path) -> None:
    run = subprocess.run(
        [sys.executable, "-c", _DYING_SCHEDULER, queue_url, str(store)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == -signal.SIGKILL, run.stderr


async def _survivor_settles(survivor: Scheduler) -> list[tuple[str, str]]:
    """Passes until the lapsed claim is taken over (the claim lease is 1 s of real time)."""
    for _ in range(600):
        outcomes = await survivor.run_pending()
        if outcomes:
            return [(o.status, o.reason) for o in outcomes]
        await asyncio.sleep(0.05)
    raise AssertionError("the dead scheduler's claim never lapsed")


@pytest.mark.parametrize("run_it_first", [False, True], ids=["job-waiting", "job-already-ran"])
async def test_a_tick_pushed_by_a_killed_scheduler_is_found_by_id_not_pushed_again(
    tmp_path: Path, run_it_first: bool
) -> None:
    queue_url = f"sqlite:///{tmp_path / 'jobs.db'}"
    store = tmp_path / "store.db"
    _kill_a_scheduler_mid_tick(queue_url, store)
    queue = open_queue(queue_url)
    locks = LockManager(SQLiteCache(store)).declared_shared()
    manager = QueueManager(queue, registry=registry(), locks=locks)
    try:
        job_id = tick_job_id("report", at(TICK))
        assert (await manager.status(job_id)).status == "queued"
        if run_it_first:
            options = WorkerOptions(queues=("reports",), stop_when_empty=True)
            stats = await Worker(queue, manager.registry, options, locks=locks).run()
            assert stats.processed == 1
            # The scheduler's header asked the worker to record the success.
            assert (await manager.status(job_id)).status == "succeeded"
        schedule = Schedule()
        schedule.job(Report()).hourly()
        survivor = Scheduler(manager, schedule, clock=SteppedClock(at("2026-05-17 10:00:05")))
        assert await _survivor_settles(survivor) == [("enqueued", "found by id: pushed before")]
        assert await queue.size("reports") == (0 if run_it_first else 1)
        last = await survivor.claims.last("report")
        assert last is not None
        assert last.job_id == job_id
    finally:
        await manager.aclose()


class _NoLookupQueue(MemoryQueue):
    """A memory queue that declares it cannot find a job by id, like a log or a broker."""

    capabilities = Capabilities(
        survives_restart=False, shared_between_processes=False, records=True
    )


async def test_without_a_lookup_a_taken_over_tick_is_pushed_again() -> None:
    from rainier_queue.cache.memory import MemoryCache

    queue = _NoLookupQueue()
    locks = LockManager(MemoryCache()).declared_shared()
    manager = QueueManager(queue, registry=registry(), locks=locks)
    schedule = Schedule()
    schedule.job(Report()).hourly()
    clock = SteppedClock(at("2026-05-17 10:00:01"))
    dying = Scheduler(manager, schedule, clock=clock, claim_lease=timedelta(milliseconds=50))
    real_push = queue.push
    pushes = 0

    async def push_then_stall(job):  # type: ignore[no-untyped-def]
        nonlocal pushes
        pushes += 1
        await real_push(job)
        raise asyncio.CancelledError  # the process "dies" here: no outcome written

    queue.push = push_then_stall  # type: ignore[method-assign]
    with pytest.raises(asyncio.CancelledError):
        await dying.run_pending()
    queue.push = real_push  # type: ignore[method-assign]
    survivor = Scheduler(manager, schedule, clock=clock)
    assert [s for s, _ in await _survivor_settles(survivor)] == ["enqueued"]
    assert pushes == 1
    assert await queue.size("reports") == 2  # the documented window, where no lookup closes it
    await manager.aclose()
