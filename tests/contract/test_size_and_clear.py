# SPDX-License-Identifier: MIT
"""Size counts what waits; clear discards it and says how much."""

from __future__ import annotations

from datetime import timedelta

from rainier_queue.queue import Queue

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
