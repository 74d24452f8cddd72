# SPDX-License-Identifier: MIT
"""An idle worker on one queue waits with its reserve (`Queue.wait_and_reserve`).

The wait ends only by work arriving or by its time, so the worker itself
must cut it short when that matters: at a stop, and when a job went back
to the queue (a retry due before the wait would end).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import timedelta

from typing_extensions import override

from rainier_queue._clock import utcnow
from rainier_queue.drivers.memory import MemoryQueue
from rainier_queue.envelope import QueuedJob
from rainier_queue.queue import Reservation

from .jobs import PATIENCE, Journal, Note, Retried, eventually, push, quick, worker_for

FOREVER = timedelta(hours=1)


class HearsOnlyPushes(MemoryQueue):
    """Reserves behind its wait, like Redis: the wait looks at delayed jobs once, at its
    start, and then hears nothing but pushes (a release does not end it)."""

    def __init__(self) -> None:
        super().__init__()
        self.pushed = asyncio.Event()
        self.waits = 0
        self.cancelled = 0

    @property
    @override
    def reserves_behind_wait(self) -> bool:
        return True

    @override
    async def push_many(self, jobs: Sequence[QueuedJob]) -> list[str]:
        ids = await super().push_many(jobs)
        self.pushed.set()
        return ids

    @override
    async def push(self, job: QueuedJob) -> str:
        return (await self.push_many([job]))[0]

    @override
    async def wait_and_reserve(
        self, queue: str, timeout: timedelta, *, limit: int
    ) -> list[Reservation]:
        self.waits += 1
        lane = self._lanes.get(queue)
        if lane is not None and lane.delayed:
            timeout = min(timeout, max(timedelta(0), lane.delayed[0][0] - utcnow()))
        if not (lane is not None and lane.ready):
            self.pushed.clear()
            try:
                await asyncio.wait_for(self.pushed.wait(), timeout.total_seconds())
            except TimeoutError:
                pass
            except asyncio.CancelledError:
                self.cancelled += 1
                raise
        return await self.reserve(queue, limit=limit)


async def test_an_idle_worker_takes_a_pushed_job_through_its_wait() -> None:
    queue = HearsOnlyPushes()
    journal = Journal()
    worker = worker_for(queue, journal, quick(sleep=FOREVER, concurrency=2))
    running = asyncio.create_task(worker.run())

    await eventually(lambda: queue.waits >= 1, "the worker to wait")
    await push(queue, Note(text="hello"))
    await eventually(lambda: journal.ran == ["hello"], "the pushed job to run")
    worker.stop()
    stats = await running

    assert stats.processed == 1
    assert queue.cancelled == 1, "the stop ended the last wait"
    assert queue.reserved_count() == 0


async def test_a_stop_ends_an_idle_wait_at_once() -> None:
    queue = HearsOnlyPushes()
    worker = worker_for(queue, Journal(), quick(sleep=FOREVER))
    running = asyncio.create_task(worker.run())
    await eventually(lambda: queue.waits >= 1, "the worker to wait")

    worker.stop()
    done, _ = await asyncio.wait({running}, timeout=PATIENCE)

    assert running in done, "the worker still waits for work after a stop"
    assert queue.cancelled == 1


async def test_a_worker_on_several_queues_waits_without_a_reserve() -> None:
    queue = HearsOnlyPushes()
    options = quick(sleep=timedelta(milliseconds=20), queues=("high", "default"))
    worker = worker_for(queue, Journal(), options)
    running = asyncio.create_task(worker.run())
    await eventually(lambda: worker.stats.idles >= 3, "the worker to go idle a few times")
    worker.stop()
    await running

    assert queue.waits == 0, "a reserve behind the wait covers one queue only"


async def test_a_retry_cuts_an_idle_wait_short() -> None:
    # The retry is due in 50 ms; the wait that began before it was released
    # knows nothing of it and would last an hour.
    queue = HearsOnlyPushes()
    journal = Journal()
    worker = worker_for(queue, journal, quick(sleep=FOREVER, concurrency=2))
    running = asyncio.create_task(worker.run())
    await eventually(lambda: queue.waits >= 1, "the worker to wait")

    await push(queue, Retried(text="again", fail_times=1))
    await eventually(lambda: queue.waits >= 2, "the worker to wait again while the job runs")
    journal.gate.set()  # now the job fails, and goes back to the queue for 50 ms
    await eventually(lambda: journal.ran == ["again"], "the retry to run")
    worker.stop()
    stats = await running

    assert [a for _, a, _ in journal.attempts] == [1, 2]
    assert stats.processed == 1
    assert stats.released == 1


async def test_a_wait_cut_short_before_it_began_leaves_the_worker_free_to_stop() -> None:
    # A job that fails in the same loop turn as the idle wait is launched cuts the wait
    # short before its task has run a step. That moment cannot be hit on purpose from
    # outside, so the worker here cuts every wait short the moment it launches one.
    queue = HearsOnlyPushes()
    journal = Journal()
    worker = worker_for(queue, journal, quick(sleep=FOREVER, concurrency=4, stop_when_empty=True))
    launch = worker._launch_fill

    def launch_and_cut(free: int, *, wait: timedelta | None = None) -> None:
        launch(free, wait=wait)
        if wait is not None:
            worker._cut_wait_short()

    worker._launch_fill = launch_and_cut  # type: ignore[method-assign]
    await push(queue, Note(text="last"))

    done, _ = await asyncio.wait({asyncio.create_task(worker.run())}, timeout=PATIENCE)

    assert done, "the worker never stopped: the cut wait's slots stayed set aside"
    assert journal.ran == ["last"]
    assert queue.waits == 0, "every wait was cut before it began"
