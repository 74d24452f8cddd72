# SPDX-License-Identifier: MIT
"""`wait_and_reserve`: an idle worker's wait that reserves what comes, on every driver.

Redis sends the reserve behind its wait in one round trip; the others wait,
then reserve. Either way the promises are the same: what comes is reserved
once, and a wait that is cancelled (a stop, a retry that cuts it short)
keeps nothing: a job it took goes back with its attempt refunded.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from rainier_queue.queue import Queue, Reservation

from .jobs import a_job, reserve_eventually

SHORT = timedelta(milliseconds=300)
LONG = timedelta(seconds=60)
"""Longer than any test: a wait this long ends only by work arriving or by a cancel."""


async def wait_until_taken(queue: Queue, *, within: float = 10.0) -> list[Reservation]:
    """Wait-and-reserve again and again, as an idle worker does, until something comes."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while loop.time() < deadline:
        got = await queue.wait_and_reserve("default", SHORT, limit=5)
        if got:
            return got
    raise AssertionError(f"nothing was reserved within {within}s")


async def test_a_job_already_there_is_reserved_by_the_wait(queue: Queue) -> None:
    job = a_job(payload={"n": 1})
    await queue.push(job)

    got = await wait_until_taken(queue)

    assert [r.job.id for r in got] == [job.id]
    assert got[0].job.attempts == 1
    assert got[0].job.payload == {"n": 1}
    assert await queue.reserve("default") == [], "the wait's reservation hides the job"
    await queue.acknowledge(got[0])
    assert await queue.size("default") == 0


async def test_a_job_pushed_while_waiting_is_reserved_once(queue: Queue) -> None:
    waiting = asyncio.create_task(queue.wait_and_reserve("default", timedelta(seconds=3), limit=5))
    await asyncio.sleep(0.05)  # the wait is under way
    job = a_job()
    await queue.push(job)

    got = await waiting or await wait_until_taken(queue)  # a wait may end empty-handed

    assert [r.job.id for r in got] == [job.id]
    assert got[0].job.attempts == 1
    assert await queue.reserve("default") == []


async def test_a_wait_on_an_empty_queue_reserves_nothing(queue: Queue) -> None:
    assert await queue.wait_and_reserve("default", timedelta(milliseconds=50), limit=5) == []


async def test_a_cancelled_wait_keeps_nothing(queue: Queue) -> None:
    waiting = asyncio.create_task(queue.wait_and_reserve("default", LONG, limit=5))
    await asyncio.sleep(0.05)

    waiting.cancel()
    outcome = (await asyncio.gather(waiting, return_exceptions=True))[0]

    # A wait may end early without work (the contract allows it; a driver may wake spuriously).
    assert isinstance(outcome, asyncio.CancelledError) or outcome == []
    job = a_job()
    await queue.push(job)
    again = await reserve_eventually(queue)
    assert again.job.id == job.id
    assert again.job.attempts == 1


async def test_a_wait_cancelled_as_a_job_arrives_gives_it_back_unspent(queue: Queue) -> None:
    # The push may wake the wait, and its reserve take the job, just before
    # the cancel lands: then the wait hands the job back, attempt refunded.
    waiting = asyncio.create_task(queue.wait_and_reserve("default", LONG, limit=5))
    await asyncio.sleep(0.05)
    job = a_job()
    await queue.push(job)

    waiting.cancel()
    outcome = (await asyncio.gather(waiting, return_exceptions=True))[0]

    if isinstance(outcome, list):  # the wait had ended before the cancel came
        assert [r.job.id for r in outcome] in ([], [job.id])
        await queue.hand_back_unstarted(outcome)
    else:
        assert isinstance(outcome, asyncio.CancelledError)
    again = await reserve_eventually(queue)
    assert again.job.id == job.id
    assert again.job.attempts == 1, "a job handed back unstarted does not spend an attempt"
    assert await queue.reserve("default") == []


async def test_waits_cancelled_at_every_moment_lose_no_job_and_spend_no_attempt(
    queue: Queue,
) -> None:
    # Jobs are there, so each wait finds some at once; cancelled a little later each
    # time, the cancel lands before, during and after the wait's reserve. A job that a
    # cancelled wait had taken and dropped would be missing below (hidden until its
    # lease ran out) or come back with an attempt nobody made.
    jobs = [a_job(payload={"n": n}) for n in range(6)]
    await queue.push_many(jobs)
    for moment in range(40):
        waiting = asyncio.create_task(queue.wait_and_reserve("default", LONG, limit=3))
        await asyncio.sleep(moment * 0.0005)
        waiting.cancel()
        outcome = (await asyncio.gather(waiting, return_exceptions=True))[0]
        if isinstance(outcome, list):  # the wait had ended before the cancel came
            await queue.hand_back_unstarted(outcome)
        else:
            assert isinstance(outcome, asyncio.CancelledError), outcome

    got: list[Reservation] = []
    while len(got) < len(jobs):
        got.append(await reserve_eventually(queue))
        if not queue.capabilities.reserved_job_steps_aside:
            # The next job of a partition waits for this one to be settled.
            await queue.acknowledge(got[-1])
    assert sorted(r.job.id for r in got) == sorted(j.id for j in jobs)
    assert [r.job.attempts for r in got] == [1] * len(jobs), "no wait spent an attempt"
    assert await queue.reserve("default") == []
