# SPDX-License-Identifier: MIT
"""Cancelling a job, both ways: where the driver says it can, a waiting job cancelled never
runs, a running one is asked to stop and ends cancelled (not failed, not retried); where
it says it cannot, the refusal is clear and nothing is stored."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable
from datetime import timedelta
from pathlib import Path

import pytest

from rainier_queue import Job, JobCancelledError, JobContext, JobRegistry, QueueManager
from rainier_queue.context import Dependencies
from rainier_queue.envelope import QueuedJob
from rainier_queue.errors import UnsupportedOperation
from rainier_queue.jobstate import JobRemover, RecordStore
from rainier_queue.queue import Queue
from rainier_queue.worker import Worker, WorkerOptions
from rainier_queue.worker.options import WorkerStats

from .backends import Backend
from .jobs import a_job

QUICK_CHECK = timedelta(milliseconds=50)
"""The cadence the workers here read cancellations on, so a cancel is seen in a turn or two."""


class Seen:
    """What the handlers here did, with wake-ups for whoever waits on it."""

    def __init__(self) -> None:
        self.ran: list[int] = []
        self.started = threading.Event()
        self.stopped_by: list[str] = []
        self.changed = asyncio.Event()
        self._loop = asyncio.get_running_loop()

    def note(self, n: int) -> None:
        self.ran.append(n)
        self._loop.call_soon_threadsafe(self.changed.set)


class Noted(Job):
    name = "cancel-noted"
    n: int

    async def handle(self, ctx: JobContext) -> None:
        ctx.resolve(Seen).note(self.n)


class Sleeper(Job):
    """An `async def` handler that runs until it is cancelled."""

    name = "cancel-sleeper"

    async def handle(self, ctx: JobContext) -> None:
        seen = ctx.resolve(Seen)
        seen.started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            seen.stopped_by.append(f"CancelledError, ctx.cancelled={ctx.cancelled}")
            raise


class Poller(Job):
    """A plain `def` handler that polls `ctx.cancelled` (a thread cannot be stopped)."""

    name = "cancel-poller"

    def handle(self, ctx: JobContext) -> None:
        seen = ctx.resolve(Seen)
        seen.started.set()
        give_up = time.monotonic() + 120
        while not ctx.cancel_requested():
            if time.monotonic() > give_up:
                seen.stopped_by.append("never asked")
                return
            time.sleep(0.01)
        seen.stopped_by.append("ctx.cancelled")


REGISTRY = JobRegistry([Noted, Sleeper, Poller])


def noted(n: int, *, queue: str = "default", delay: timedelta | None = None) -> QueuedJob:
    return a_job(name="cancel-noted", payload={"n": n}, queue=queue, delay=delay)


@pytest.fixture
def cancellable_queue(backend: Backend, tmp_path: Path, namespace: str, queue: Queue) -> Queue:
    if not queue.capabilities.cancellable:
        pytest.skip(f"{queue.name} cannot cancel a job (its refusal is tested beside this)")
    backend.setup(tmp_path, namespace, ["default"])
    return queue


async def _until(check: Callable[[], Awaitable[bool]], within: float = 60) -> None:
    """Poll `check` until it holds (a liveness bound, not a timing assertion)."""
    deadline = time.monotonic() + within
    while not await check():
        assert time.monotonic() < deadline, "did not happen in time"
        await asyncio.sleep(0.02)


async def _cancelled(manager: QueueManager, job_id: str) -> bool:
    return (await manager.status(job_id)).status == "cancelled"


class _Running:
    """A worker on `queue` in a task of this loop, stopped and awaited on exit."""

    def __init__(self, queue: Queue, seen: Seen, *, concurrency: int = 2) -> None:
        options = WorkerOptions(
            concurrency=concurrency, pause_check=QUICK_CHECK, sleep=QUICK_CHECK, tries=3
        )
        self.worker = Worker(queue, REGISTRY, options, dependencies=Dependencies([seen]))
        self.stats: WorkerStats | None = None

    async def __aenter__(self) -> _Running:
        self._task = asyncio.create_task(self.worker.run())
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.worker.stop(now=True)
        self.stats = await asyncio.wait_for(self._task, 60)


async def test_a_driver_can_cancel_exactly_when_it_says_so(queue: Queue) -> None:
    if queue.capabilities.cancellable:
        reason = f"{queue.name} declares cancellable=True: workers read marks from its records"
        assert queue.capabilities.records, reason
        assert isinstance(queue, RecordStore), reason
    if isinstance(queue, JobRemover):
        assert queue.capabilities.cancellable, f"{queue.name} removes jobs but cannot cancel"


async def test_cancelling_where_the_driver_cannot_is_refused_naming_it_and_stores_nothing(
    queue: Queue,
) -> None:
    if queue.capabilities.cancellable:
        pytest.skip(f"{queue.name} can cancel a job (what a cancel does is tested beside this)")
    job_id = await queue.push(a_job(payload="still queued"))

    with pytest.raises(UnsupportedOperation, match=f"the {queue.name} driver") as refused:
        await QueueManager(queue).cancel(job_id)

    assert "cannot cancel a job" in str(refused.value)
    assert await queue.size("default") == 1, "the job is still there"


async def test_a_queued_job_cancelled_never_runs(cancellable_queue: Queue) -> None:
    seen = Seen()
    manager = QueueManager(cancellable_queue)
    doomed = await cancellable_queue.push(noted(1))
    await cancellable_queue.push(noted(2))

    done = await manager.cancel(doomed)
    assert done.how in ("removed", "marked")
    async with _Running(cancellable_queue, seen) as running:
        await _until(lambda: _ran(seen, 2))
        await _until(lambda: _cancelled(manager, doomed))

    assert seen.ran == [2], "the cancelled job never ran"
    state = await manager.status(doomed)
    assert state.status == "cancelled"
    assert state.name == "cancel-noted"
    assert running.stats is not None
    assert (running.stats.failed, running.stats.released) == (0, 0)
    if cancellable_queue.capabilities.job_lookup:
        assert (await manager.cancel(doomed)).how == "finished", "cancelled already"


async def test_a_delayed_job_cancelled_never_runs(cancellable_queue: Queue) -> None:
    seen = Seen()
    manager = QueueManager(cancellable_queue)
    doomed = await cancellable_queue.push(noted(1, delay=timedelta(seconds=1)))
    await cancellable_queue.push(noted(2, delay=timedelta(seconds=1)))

    await manager.cancel(doomed)
    async with _Running(cancellable_queue, seen):
        await _until(lambda: _ran(seen, 2))
        await _until(lambda: _cancelled(manager, doomed))

    assert seen.ran == [2]


async def test_a_running_async_job_cancelled_ends_cancelled_and_is_not_retried(
    cancellable_queue: Queue,
) -> None:
    seen = Seen()
    manager = QueueManager(cancellable_queue)
    job_id = await cancellable_queue.push(a_job(name="cancel-sleeper", max_attempts=3))
    async with _Running(cancellable_queue, seen) as running:
        await _until(lambda: _true(seen.started.is_set()))
        assert (await manager.cancel(job_id)).how == "marked", "a running job is marked"
        await _until(lambda: _cancelled(manager, job_id))
        # A job pushed after it runs, so the worker has gone round again: had the cancelled
        # job been released for a retry, it would be due beside this one.
        await cancellable_queue.push(noted(7))
        await _until(lambda: _ran(seen, 7))

    assert seen.stopped_by == ["CancelledError, ctx.cancelled=True"]
    assert running.stats is not None
    assert running.stats.cancelled == 1
    assert (running.stats.failed, running.stats.released) == (0, 0)
    assert await cancellable_queue.size("default") == 0, "nothing left to retry"
    assert (await manager.status(job_id)).reason == "cancelled while it ran"
    with pytest.raises(JobCancelledError, match="cancelled while it ran; it has no result"):
        await manager.result(job_id, timeout=30)


async def test_a_running_plain_def_job_polling_the_flag_ends_cancelled(
    cancellable_queue: Queue,
) -> None:
    seen = Seen()
    manager = QueueManager(cancellable_queue)
    job_id = await cancellable_queue.push(a_job(name="cancel-poller"))
    async with _Running(cancellable_queue, seen) as running:
        await _until(lambda: _true(seen.started.is_set()))
        await manager.cancel(job_id)
        await _until(lambda: _cancelled(manager, job_id))

    assert seen.stopped_by == ["ctx.cancelled"]
    assert running.stats is not None
    assert running.stats.cancelled == 1
    assert (running.stats.failed, running.stats.released) == (0, 0)
    assert await cancellable_queue.size("default") == 0


async def test_cancelling_a_job_nobody_pushed_says_so_and_it_never_runs_if_it_comes(
    cancellable_queue: Queue,
) -> None:
    manager = QueueManager(cancellable_queue)
    early = noted(1)
    if cancellable_queue.capabilities.job_lookup:
        assert (await manager.cancel(early.id)).how == "not found"
    else:
        assert (await manager.cancel(early.id)).how == "marked", "nothing to look it up by"
    seen = Seen()
    await cancellable_queue.push(early)
    await cancellable_queue.push(noted(2))
    async with _Running(cancellable_queue, seen):
        await _until(lambda: _ran(seen, 2))
        await _until(lambda: _cancelled(manager, early.id))

    assert seen.ran == [2], "the job marked before it was pushed never ran"


async def _ran(seen: Seen, n: int) -> bool:
    return n in seen.ran


async def _true(value: bool) -> bool:
    return value
