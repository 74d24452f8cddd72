# SPDX-License-Identifier: MIT
"""Job state by id: queued, delayed, running, failed, unknown, on every driver that can look.

A driver declares `job_lookup` when it can find a job by id in its own
storage; one that cannot (a log, a broker) answers `unknown` with the
reason, never an error. Both are held here.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from rainier_queue import QueueManager
from rainier_queue._clock import utcnow
from rainier_queue.jobstate import JobLookup
from rainier_queue.queue import Queue

from .jobs import a_job, reserve_one


def looking(queue: Queue) -> QueueManager:
    if not queue.capabilities.job_lookup:
        assert not isinstance(queue, JobLookup), f"{queue.name} finds jobs by id but hides it"
        pytest.skip(f"{queue.name} declares it cannot find a job by id")
    assert isinstance(queue, JobLookup), f"{queue.name} declares a lookup it lacks"
    return QueueManager(queue)


async def test_a_driver_that_cannot_look_a_job_up_says_so_instead_of_failing(
    queue: Queue,
) -> None:
    if queue.capabilities.job_lookup:
        pytest.skip(f"{queue.name} can look a job up by id")
    state = await QueueManager(queue).status("0123-not-looked-up")
    assert state.status == "unknown"
    assert state.reason is not None
    assert f"the {queue.name} driver cannot look a job up by id" in state.reason


async def test_a_waiting_job_is_queued_and_a_delayed_one_says_until_when(queue: Queue) -> None:
    manager = looking(queue)
    now = utcnow()
    waiting = a_job(payload={"n": 1}, max_attempts=4)
    later = a_job(payload={"n": 2}, delay=timedelta(hours=1))
    await queue.push(waiting)
    await queue.push(later)

    queued = await manager.status(waiting.id)
    delayed = await manager.status(later.id)

    assert (queued.status, queued.name, queued.queue, queued.attempts, queued.max_attempts) == (
        "queued",
        "contract-job",
        "default",
        0,
        4,
    )
    assert queued.job is not None
    assert queued.job.payload == {"n": 1}
    assert delayed.status == "delayed"
    assert delayed.due_at is not None
    assert now + timedelta(minutes=59) < delayed.due_at < now + timedelta(minutes=61)


async def test_a_reserved_job_is_running_with_its_attempt_and_lease(queue: Queue) -> None:
    manager = looking(queue)
    job = a_job()
    await queue.push(job)
    reservation = await reserve_one(queue)

    state = await manager.status(job.id)

    assert (state.status, state.attempts) == ("running", 1)
    if queue.lease is not None:
        assert state.lease_until is not None
        assert state.lease_until > utcnow()
    await queue.acknowledge(reservation)


async def test_a_failed_job_is_failed_with_its_error(queue: Queue) -> None:
    manager = looking(queue)
    if not queue.capabilities.failed_listing:
        pytest.skip(f"{queue.name} keeps no failed jobs")
    job = a_job(max_attempts=1)
    await queue.push(job)
    await queue.fail(await reserve_one(queue), "card declined\n\nTraceback: ...")

    state = await manager.status(job.id)

    assert (state.status, state.error) == ("failed", "card declined\n\nTraceback: ...")
    assert state.finished_at is not None


async def test_a_job_nobody_knows_is_unknown_and_says_why(queue: Queue) -> None:
    manager = looking(queue)
    job = a_job()
    await queue.push(job)
    await queue.acknowledge(await reserve_one(queue))

    never = await manager.status("01234567-89ab-7def-8123-456789abcdef")
    gone = await manager.status(job.id)

    for state in (never, gone):
        assert state.status == "unknown"
        assert state.reason is not None
        assert "no such job" in state.reason


async def test_a_delayed_job_alone_on_its_queue_is_found(queue: Queue) -> None:
    manager = looking(queue)
    later = a_job(queue="only-later", delay=timedelta(hours=1))
    await queue.push(later)

    state = await manager.status(later.id)

    assert (state.status, state.queue) == ("delayed", "only-later")
