# SPDX-License-Identifier: MIT
"""Size counts what waits; clear discards it and says how much."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from rainier_queue._clock import utcnow
from rainier_queue.queue import Countable, Queue, QueueCounts

from .conftest import SHORT_LEASE
from .jobs import a_job


async def test_size_counts_waiting_and_delayed_jobs_but_not_reserved_ones(queue: Queue) -> None:
    await queue.push_many([a_job(payload=i) for i in range(4)])
    await queue.push(a_job(delay=timedelta(minutes=10)))
    await queue.reserve("default", limit=1)

    assert await queue.size("default") == 4
    assert await queue.size("elsewhere") == 0


async def test_clear_discards_one_queue_and_returns_how_many(queue: Queue) -> None:
    await queue.push_many([a_job(payload=i) for i in range(3)])
    await queue.push(a_job(queue="keep"))

    cleared = await queue.clear("default")

    assert cleared == 3
    assert await queue.size("default") == 0
    assert await queue.reserve("default") == []
    assert await queue.size("keep") == 1
    assert await queue.clear("nothing-here") == 0


async def test_counts_tell_waiting_delayed_and_reserved_jobs_apart_with_the_next_due(
    queue: Queue,
) -> None:
    if not isinstance(queue, Countable):
        pytest.skip(f"{queue.name} does not count by state (Countable)")
    before = utcnow()
    await queue.push_many([a_job(payload=i) for i in range(4)])
    await queue.push(a_job(delay=timedelta(minutes=10)))
    [held] = await queue.reserve("default", limit=1)

    counts = await queue.counts("default")

    if not queue.capabilities.delayed_job_steps_aside:
        # A log (Kafka) cannot tell a delayed record from a due one without reading it.
        assert (counts.waiting, counts.delayed, counts.reserved) == (4, 0, 1)
        return
    assert (counts.waiting, counts.delayed, counts.reserved) == (3, 1, 1)
    assert counts.total == 5
    assert counts.next_due is not None
    assert held.lease_until is not None
    # The held job's lease ends first, well before the delayed job falls due.
    assert before < counts.next_due <= held.lease_until + timedelta(seconds=5)
    assert await queue.counts("elsewhere") == QueueCounts(waiting=0, delayed=0, reserved=0)


async def test_counts_show_a_lapsed_lease_as_reserved_and_already_due(
    short_lease_queue: Queue,
) -> None:
    queue = short_lease_queue
    if not isinstance(queue, Countable):
        pytest.skip(f"{queue.name} does not count by state (Countable)")
    await queue.push(a_job())
    await queue.reserve("default")
    await asyncio.sleep(SHORT_LEASE.total_seconds() * 2)

    counts = await queue.counts("default")

    if not queue.capabilities.delayed_job_steps_aside:
        # A log (Kafka) shows a record whose lease lapsed as waiting again once another
        # process looks (this one still has it out): either way, one job is left.
        assert counts.total == 1
        return
    assert (counts.waiting, counts.delayed, counts.reserved) == (0, 0, 1)
    assert counts.next_due is not None
    assert counts.next_due <= utcnow() + timedelta(seconds=1)
