# SPDX-License-Identifier: MIT
"""The failed store: a failed job is kept, listed, retried with full attempts, forgotten.

A driver may keep failed jobs where they can be listed but not changed (Kafka's
failed topics): it declares `failed_listing` without `failed_store`, and is held
to the listing half here.
"""

from __future__ import annotations

import pytest

from rainier_queue.queue import FailedJobListing, FailedJobStore, Queue

from .jobs import a_job, reserve_one


def failed_store(queue: Queue) -> FailedJobStore:
    if not queue.capabilities.failed_store:
        assert not isinstance(queue, FailedJobStore), f"{queue.name} has a failed store it hides"
        pytest.skip(f"{queue.name} declares no failed store")
    assert isinstance(queue, FailedJobStore), f"{queue.name} declares a failed store it lacks"
    return queue


async def test_failed_jobs_are_listed_exactly_where_the_driver_says_so(queue: Queue) -> None:
    declared = queue.capabilities
    if declared.failed_store:
        assert declared.failed_listing, f"{queue.name} has a failed store it says it cannot list"
    if not declared.failed_listing:
        assert not isinstance(queue, FailedJobListing), f"{queue.name} hides a failed listing"
        pytest.skip(f"{queue.name} declares no failed listing")
    assert isinstance(queue, FailedJobListing), f"{queue.name} declares a listing it lacks"
    for name in ("a", "b", "a"):
        await queue.push(a_job(queue=name, payload={"on": name}))
        await queue.fail(await reserve_one(queue, name), f"failed on {name}")

    on_a = await queue.failed_jobs(queue="a")
    everything = await queue.failed_jobs()

    assert [(f.job.queue, f.job.payload, f.error) for f in on_a] == [
        ("a", {"on": "a"}, "failed on a"),
        ("a", {"on": "a"}, "failed on a"),
    ]
    assert sorted(f.job.queue for f in everything) == ["a", "a", "b"]
    assert [f.failed_at for f in everything] == sorted(
        (f.failed_at for f in everything), reverse=True
    ), "newest first"
    assert len(await queue.failed_jobs(limit=1)) == 1
    assert await queue.failed_jobs(queue="nothing-here") == []


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
