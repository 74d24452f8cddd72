# SPDX-License-Identifier: MIT
"""Uniqueness locks given back at the right moments; listeners that cannot hurt a job."""

from __future__ import annotations

from rainier_queue import (
    EventDispatcher,
    JobProcessed,
    JobProcessing,
    LockManager,
    QueueManager,
)
from rainier_queue.cache.memory import MemoryCache
from rainier_queue.drivers.memory import MemoryQueue
from rainier_queue.events import Event
from rainier_queue.worker import WorkerStats

from .jobs import Journal, Note, Recorder, Unique, push, quick, registry, worker_for

LOCK = "unique:unique-job:a"


async def run_unique(job: Unique, *, tries: int = 2) -> tuple[LockManager, WorkerStats]:
    """Dispatch `job` through a manager that takes its lock, then work the queue."""
    queue = MemoryQueue()
    locks = LockManager(MemoryCache())
    manager = QueueManager(queue, registry=registry(), locks=locks)
    assert await manager.pending(job).tries(tries).send() is not None
    assert await locks.is_held(LOCK)
    stats = await worker_for(queue, Journal(), quick(stop_when_empty=True), locks=locks).run()
    return locks, stats


async def test_the_uniqueness_lock_is_given_back_when_the_job_succeeds() -> None:
    locks, stats = await run_unique(Unique(key="a"))

    assert stats.processed == 1
    assert not await locks.is_held(LOCK)


async def test_the_uniqueness_lock_is_given_back_when_the_job_fails_for_good() -> None:
    locks, stats = await run_unique(Unique(key="a", fail_times=5), tries=1)

    assert (stats.released, stats.failed) == (0, 1)
    assert not await locks.is_held(LOCK)


async def test_the_uniqueness_lock_is_kept_while_the_job_waits_for_a_retry() -> None:
    locks, stats = await run_unique(Unique(key="a", fail_times=1))

    assert (stats.released, stats.total) == (1, 0)
    assert await locks.is_held(LOCK)


async def test_events_report_each_attempt_before_and_after_it_runs() -> None:
    queue = MemoryQueue()
    envelope = await push(queue, Note(text="seen"))
    recorder = Recorder()

    await worker_for(
        queue, Journal(), quick(stop_when_empty=True), events=EventDispatcher([recorder])
    ).run()

    assert [type(e) for e in recorder.events] == [JobProcessing, JobProcessed]
    assert all(e.job.id == envelope.id for e in recorder.events)


async def test_a_listener_that_fails_does_not_change_the_jobs_outcome() -> None:
    queue = MemoryQueue()
    await push(queue, Note(text="unbothered"))
    recorder = Recorder()

    async def broken(event: Event) -> None:
        raise RuntimeError("listener bug")

    events = EventDispatcher([broken, recorder])
    journal = Journal()

    stats = await worker_for(queue, journal, quick(stop_when_empty=True), events=events).run()

    assert stats.processed == 1
    assert journal.ran == ["unbothered"]
    assert events.listener_failures == 2
    assert len(recorder.events) == 2, "the listeners after a broken one still hear everything"
