# SPDX-License-Identifier: MIT
"""Release puts a job back; delayed jobs wait, and (where declared) step aside."""

from __future__ import annotations

import time
from datetime import timedelta

from rainier_queue.queue import Queue

from .jobs import a_job, reserve_eventually, reserve_one


async def test_a_released_job_comes_back_with_its_attempts_counted(queue: Queue) -> None:
    await queue.push(a_job(payload="again"))
    first = await reserve_one(queue)

    await queue.release(first)
    second = await reserve_one(queue)

    assert second.job.id == first.job.id
    assert second.job.payload == "again"
    assert second.job.attempts == 2
    assert second.token != first.token


async def test_a_release_that_gives_the_attempt_back_does_not_spend_it(queue: Queue) -> None:
    await queue.push(a_job())
    first = await reserve_one(queue)

    await queue.release(first, count_attempt=False)
    second = await reserve_one(queue)

    assert second.job.attempts == 1


async def test_a_job_released_with_a_delay_is_not_handed_out_before_it_is_due(queue: Queue) -> None:
    await queue.push(a_job())
    first = await reserve_one(queue)

    await queue.release(first, delay=timedelta(minutes=5))

    assert await queue.reserve("default") == []
    assert await queue.size("default") == 1, "a delayed job still counts as waiting"


async def test_a_delayed_job_is_handed_out_once_it_is_due(queue: Queue) -> None:
    delay = timedelta(seconds=1)
    made = time.monotonic()  # the job is due `delay` after it is made, not after the push
    await queue.push(a_job(delay=delay))

    early = await queue.reserve("default")
    # A push and reserve that took past the due time (a busy machine, a log's first
    # fetch) may rightly hand the job out; a reserve back sooner must not.
    if time.monotonic() - made < delay.total_seconds():
        assert early == []
    reservation = early[0] if early else await reserve_eventually(queue)

    assert reservation.job.attempts == 1


async def test_a_delayed_job_does_not_hold_up_the_ones_behind_it(queue: Queue) -> None:
    # One unique key, so that on a log both are records of the same partition.
    later = a_job(payload="later", delay=timedelta(minutes=5)).with_changes(unique_key="k")
    now = a_job(payload="now").with_changes(unique_key="k")
    await queue.push(later)
    await queue.push(now)

    got = await queue.reserve("default")

    if queue.capabilities.delayed_job_steps_aside:
        assert [r.job.payload for r in got] == ["now"]
    else:
        assert got == [], f"{queue.name} says a job that is not due blocks the ones behind it"
