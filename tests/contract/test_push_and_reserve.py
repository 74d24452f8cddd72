# SPDX-License-Identifier: MIT
"""Push, reserve, and what a reservation hands over."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from rainier_queue.queue import Queue

from .jobs import a_job, reserve_one


async def test_a_pushed_job_comes_back_with_its_envelope_and_one_attempt(queue: Queue) -> None:
    job = a_job(payload={"user": 7}, headers={"traceparent": "00-abc-def-01"}, max_attempts=5)

    job_id = await queue.push(job)
    reservation = await reserve_one(queue)

    assert job_id == job.id
    got = reservation.job
    assert (got.id, got.name, got.queue, got.payload) == (job.id, job.name, "default", {"user": 7})
    assert got.headers == {"traceparent": "00-abc-def-01"}
    assert got.max_attempts == 5
    assert got.attempts == 1, "attempts count deliveries, and this is the first"
    assert reservation.token


@pytest.mark.parametrize(
    "payload",
    [None, {}, [], "", 0, False, {"text": "naïve café ✉️ 🚀 日本語"}, {"a": [1, {"b": None}]}],
    ids=repr,
)
async def test_a_payload_comes_back_exactly_as_it_went_in(queue: Queue, payload: Any) -> None:
    # The upstream Kafka driver wrote its position into the payload, which
    # turned a `null` payload into `{}`. This catches that on every driver.
    await queue.push(a_job(payload=payload))

    reservation = await reserve_one(queue)

    assert reservation.job.payload == payload
    assert type(reservation.job.payload) is type(payload)


async def test_a_reserved_job_is_invisible_to_a_second_worker(queue: Queue) -> None:
    await queue.push(a_job())

    first = await queue.reserve("default")
    second = await queue.reserve("default")

    assert len(first) == 1
    assert second == [], "the second worker should find nothing"


async def test_an_empty_queue_hands_out_nothing(queue: Queue) -> None:
    assert await queue.reserve("default") == []
    assert await queue.reserve("never-used", limit=10) == []


async def test_reserve_hands_out_several_distinct_jobs_at_once(queue: Queue) -> None:
    if not queue.capabilities.reserved_job_steps_aside:
        pytest.skip(
            f"{queue.name} hands out one job per partition at a time (see test_capabilities)"
        )
    jobs = [a_job(payload=i) for i in range(5)]
    await queue.push_many(jobs)

    batch = await queue.reserve("default", limit=3)
    rest = await queue.reserve("default", limit=10)

    assert len(batch) == 3
    assert len(rest) == 2
    ids = [r.job.id for r in batch + rest]
    assert sorted(ids) == sorted(j.id for j in jobs)
    assert len({r.token for r in batch + rest}) == 5, "each delivery has its own token"


async def test_push_many_returns_the_ids_in_order(queue: Queue) -> None:
    jobs = [a_job(payload=i) for i in range(20)]

    ids = await queue.push_many(jobs)

    assert ids == [j.id for j in jobs]
    assert await queue.size("default") == 20


async def test_jobs_of_one_queue_come_out_in_push_order(queue: Queue) -> None:
    jobs = [a_job(payload=i) for i in range(10)]
    for job in jobs:
        await queue.push(job)

    if queue.capabilities.reserved_job_steps_aside:
        order = [r.job.payload for r in await queue.reserve("default", limit=10)]
    else:  # the next job of a partition waits for the one before it to be settled
        # and an empty reserve may only mean the log has not been read that far yet.
        order = []
        loop = asyncio.get_running_loop()
        give_up = loop.time() + 30
        while len(order) < 10 and loop.time() < give_up:
            got = await queue.reserve("default", limit=10)
            if not got:
                await asyncio.sleep(0.05)
            order += [r.job.payload for r in got]
            await queue.acknowledge_many(got)

    if queue.capabilities.fifo_within_queue:
        assert order == list(range(10))
    else:
        assert sorted(order) == list(range(10))


async def test_queues_never_see_each_others_jobs(queue: Queue) -> None:
    await queue.push(a_job(queue="emails", payload="e"))
    await queue.push(a_job(queue="reports", payload="r"))

    emails = await queue.reserve("emails", limit=10)
    reports = await queue.reserve("reports", limit=10)

    assert [r.job.payload for r in emails] == ["e"]
    assert [r.job.payload for r in reports] == ["r"]


@pytest.mark.parametrize("name", ["émails ✉", "a:b/c.d", "with space", "x" * 150], ids=repr)
async def test_any_printable_queue_name_is_a_safe_queue(queue: Queue, name: str) -> None:
    await queue.push(a_job(queue=name))

    reservation = await reserve_one(queue, name)

    assert reservation.job.queue == name
    assert await queue.reserve("default") == []
