# SPDX-License-Identifier: MIT
"""Kafka: a worker's idle wait cancelled at the worst moment loses no job and no wake-up.

A worker cancels its idle wait whenever it stops waiting (a slot freed, a
stop). Two moments matter on a log:

- while the wait asks the lock store whether a partition that grew is
  held: the wait used to mark the growth as seen before it asked, so a
  cancel there left the next wait blind to that record, which then waited
  for the next push or its whole timeout with a job nobody served;
- while `wait_and_reserve` hands a job out (the cursor write that counts
  its delivery): the hand-out finishes, and the job goes back at once,
  uncounted, at the head of its partition.

Each test holds the wait at that exact await, on a real broker.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest

from rainier_queue.drivers.kafka.partitions import Cursor, Partitions, PartitionState

from .conftest import Opener, a_job

pytestmark = pytest.mark.timeout(60)

LONG = timedelta(seconds=60)
"""Longer than the test: a wait this long ends only for work (or a cancel)."""


async def test_a_wait_cancelled_while_asking_who_holds_a_partition_leaves_the_record_to_the_next(
    topics: Any, open_kafka: Opener, monkeypatch: pytest.MonkeyPatch
) -> None:
    queue = open_kafka()
    await queue.wait_for_work(["default"], timedelta(milliseconds=1))  # the ends, to compare
    job = a_job()
    await queue.push(job)
    asking = asyncio.Event()

    async def held_that_hangs(name: str) -> bool:
        asking.set()  # the wait has seen the partition grow and asks who holds it
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    monkeypatch.setattr(queue.locks, "is_held", held_that_hangs)
    waiting = asyncio.create_task(queue.wait_for_work(["default"], LONG))
    await asyncio.wait_for(asking.wait(), 10)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    monkeypatch.undo()

    # The next wait ends for the record (a liveness bound, not a latency): it was not
    # taken as looked at by the wait that was cancelled before it had looked.
    await asyncio.wait_for(queue.wait_for_work(["default"], LONG), 10)
    [got] = await queue.reserve("default")
    assert got.job.id == job.id
    await queue.acknowledge(got)


async def test_a_wait_cancelled_while_handing_a_job_out_gives_it_back_uncounted(
    topics: Any, open_kafka: Opener, monkeypatch: pytest.MonkeyPatch
) -> None:
    queue = open_kafka()
    job = a_job()
    await queue.push(job)
    original = Partitions.deliver
    delivering = asyncio.Event()
    go_on = asyncio.Event()

    async def deliver_that_waits(
        self: Partitions, state: PartitionState, offset: int
    ) -> Cursor | None:
        delivering.set()  # the reserve behind the wait is counting the job's delivery
        await go_on.wait()
        return await original(self, state, offset)

    monkeypatch.setattr(Partitions, "deliver", deliver_that_waits)
    # A short wait: on an untouched topic it finds no growth and reserves when it ends.
    waiting = asyncio.create_task(
        queue.wait_and_reserve("default", timedelta(milliseconds=50), limit=1)
    )
    await asyncio.wait_for(delivering.wait(), 10)
    waiting.cancel()
    go_on.set()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    monkeypatch.undo()

    [got] = await queue.reserve("default")
    assert got.job.id == job.id, "the job the cancelled wait handed out is back at once"
    assert got.job.attempts == 1, "a delivery nobody ran was not counted"
    await queue.acknowledge(got)
    assert await queue.reserve("default") == []
