# SPDX-License-Identifier: MIT
"""A draining worker finishes the work due within its bound and reports the rest."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from rainier_queue._clock import utcnow
from rainier_queue.drivers.memory import MemoryQueue
from rainier_queue.queue import QueueCounts

from .jobs import Flaky, Journal, Note, push, quick, worker_for


async def test_a_drain_waits_for_a_retry_due_within_its_bound_and_runs_it() -> None:
    queue = MemoryQueue()
    await push(queue, Note(text="first"))
    await push(queue, Note(text="later"), available_at=utcnow() + timedelta(milliseconds=300))
    journal = Journal()

    stats = await asyncio.wait_for(
        worker_for(
            queue, journal, quick(stop_when_empty=True, drain_wait=timedelta(seconds=30))
        ).run(),
        30,
    )

    assert journal.ran == ["first", "later"]
    assert stats.left is None


async def test_a_drain_leaves_work_due_after_its_bound_and_says_what_it_left() -> None:
    queue = MemoryQueue()
    await push(queue, Flaky(fail_times=1))
    journal = Journal()

    stats = await worker_for(
        queue, journal, quick(stop_when_empty=True, drain_wait=timedelta(seconds=5))
    ).run()

    assert stats.released == 1
    assert stats.left is not None
    assert (stats.left.waiting, stats.left.delayed, stats.left.reserved) == (0, 1, 0)


async def test_a_drain_waits_for_a_lease_that_lapses_within_its_bound_and_reruns_the_job() -> None:
    queue = MemoryQueue(lease=timedelta(milliseconds=300))
    await push(queue, Note(text="held by a dead worker"))
    [dead] = await queue.reserve("default")
    assert await queue.counts("default") == QueueCounts(
        waiting=0, delayed=0, reserved=1, next_due=dead.lease_until
    )
    journal = Journal()

    stats = await asyncio.wait_for(
        worker_for(queue, journal, quick(stop_when_empty=True, drain_wait=None)).run(), 30
    )

    assert journal.ran == ["held by a dead worker"]
    assert stats.left is None
