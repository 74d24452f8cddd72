# SPDX-License-Identifier: MIT
"""The failed store: a failed job is kept, listed, retried with full attempts, forgotten."""

from __future__ import annotations

import pytest

from rainier_queue.queue import FailedJobStore, Queue

from .jobs import a_job, reserve_one


def failed_store(queue: Queue) -> FailedJobStore:
    if not queue.capabilities.failed_store:
        assert not isinstance(queue, FailedJobStore), f"{queue.name} has a failed store it hides"
        pytest.skip(f"{queue.name} declares no failed store")
    assert isinstance(queue, FailedJobStore), f"{queue.name} declares a failed store it lacks"
    return queue


async def test_a_failed_job_leaves_the_queue_and_is_kept_with_its_error(queue: Queue) -> None:
    store = failed_store(queue)
    job = a_job(payload={"card": "4242"}, max_attempts=2)
    await queue.push(job)
    reservation = await reserve_one(queue)

    await queue.fail(reservation, "card declined")

    assert await queue.reserve("default") == []
    assert await queue.size("default") == 0
    failed = await store.failed_jobs()
    assert [f.job.id for f in failed] == [job.id]
    assert failed[0].error == "card declined"
    assert failed[0].job.payload == {"card": "4242"}
    assert failed[0].job.queue == "default"


async def test_a_retried_failed_job_runs_again_with_its_full_attempts(queue: Queue) -> None:
    store = failed_store(queue)
    await queue.push(a_job(max_attempts=4).with_changes(unique_key="unique:contract-job:1"))
    reservation = await reserve_one(queue)
    assert reservation.job.unique_key == "unique:contract-job:1"
    await queue.fail(reservation, "boom")

    assert await store.retry_failed(reservation.job.id) is True
    again = await reserve_one(queue)

    assert again.job.id == reservation.job.id
    assert again.job.attempts == 1
    assert again.job.max_attempts == 4, "upstream gave a retried job a single attempt; we do not"
    assert again.job.unique_key is None, "its lock was given back when it failed"
    assert await store.failed_jobs() == []
    assert await store.retry_failed("no-such-job") is False


async def test_failed_jobs_can_be_listed_by_queue_newest_first_and_forgotten(queue: Queue) -> None:
    store = failed_store(queue)
    for name in ("a", "b", "a"):
        await queue.push(a_job(queue=name, payload=name))
        await queue.fail(await reserve_one(queue, name), f"failed on {name}")

    on_a = await store.failed_jobs(queue="a")
    everything = await store.failed_jobs()

    assert [f.job.queue for f in on_a] == ["a", "a"]
    assert len(everything) == 3
    assert everything[0].failed_at >= everything[-1].failed_at
    assert await store.forget_failed(on_a[0].job.id) is True
    assert await store.forget_failed(on_a[0].job.id) is False
    assert await store.flush_failed(queue="a") == 1
    assert [f.job.queue for f in await store.failed_jobs()] == ["b"]
    assert await store.flush_failed() == 1
    assert await store.failed_jobs() == []
