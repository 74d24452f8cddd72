# SPDX-License-Identifier: MIT
"""Acknowledging a batch and reserving the next in one call, as a busy worker does.

Drivers that can do both in one round trip override `acknowledge_and_reserve`;
whichever way a driver does it, the outcome must be the same as the two calls
made one after the other.
"""

from __future__ import annotations

from rainier_queue.errors import LeaseLost
from rainier_queue.queue import Queue

from .jobs import a_job, reserve_one


async def test_one_call_settles_the_finished_job_and_hands_out_the_next(queue: Queue) -> None:
    first, second = a_job(payload={"n": 1}), a_job(payload={"n": 2})
    await queue.push(first)
    await queue.push(second)
    finished = await reserve_one(queue)

    outcomes, batch = await queue.acknowledge_and_reserve([finished], "default", limit=1)

    assert outcomes == [None]
    assert [r.job.id for r in batch] == [second.id]
    assert batch[0].job.attempts == 1
    assert await queue.acknowledge_many(batch) == [None]
    assert await queue.reserve("default", limit=5) == []
    assert await queue.size("default") == 0


async def test_a_stale_reservation_in_the_call_is_reported_and_the_rest_still_happens(
    queue: Queue,
) -> None:
    await queue.push(a_job(payload={"n": 1}))
    done = await reserve_one(queue)
    await queue.acknowledge(done)
    waiting = a_job(payload={"n": 2})
    await queue.push(waiting)

    outcomes, batch = await queue.acknowledge_and_reserve([done], "default", limit=1)

    assert len(outcomes) == 1
    assert isinstance(outcomes[0], LeaseLost), "acknowledging twice is refused by token"
    assert [r.job.id for r in batch] == [waiting.id]


async def test_acknowledgements_from_another_queue_ride_along_with_the_reserve(
    queue: Queue,
) -> None:
    await queue.push(a_job(queue="emails"))
    wanted = a_job(queue="default")
    await queue.push(wanted)
    from_emails = await reserve_one(queue, "emails")

    outcomes, batch = await queue.acknowledge_and_reserve([from_emails], "default", limit=3)

    assert outcomes == [None]
    assert [r.job.id for r in batch] == [wanted.id]
    assert await queue.reserve("emails", limit=3) == [], "the acknowledged job is gone for good"
    assert await queue.size("emails") == 0


async def test_the_call_with_nothing_to_acknowledge_is_a_plain_reserve(queue: Queue) -> None:
    job = a_job()
    await queue.push(job)

    outcomes, batch = await queue.acknowledge_and_reserve([], "default", limit=2)

    assert outcomes == []
    assert [r.job.id for r in batch] == [job.id]
