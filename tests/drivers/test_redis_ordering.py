# SPDX-License-Identifier: MIT
"""Ordering keys on Redis, where the driver's own layout shows (drivers/redis/ordering.py):
a keyless job writes nothing of the lines, a key's line sits in its queue's slot, a held
job is found and rewritten where it waits, a batch of acknowledgements from another queue
than the one reserved from still lets a key's next job go, and a batch's callback with a
key joins its key's line."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest
from redis.crc import key_slot

from rainier_queue._clock import utcnow
from rainier_queue.batchstate import Callback, Member, Outcome
from rainier_queue.drivers import open_queue
from rainier_queue.drivers.redis import RedisQueue
from rainier_queue.envelope import QueuedJob
from rainier_queue.job import ORDERING_KEY

from ..redis_servers import delete_keys
from ..services import require_port

SHARED = "redis://127.0.0.1:6379/0"


def job(key: str | None, queue: str = "default", **changes: Any) -> QueuedJob:
    made = QueuedJob.create(
        "note",
        {"text": uuid.uuid4().hex},
        queue=queue,
        headers=None if key is None else {ORDERING_KEY: key},
    )
    return made.with_changes(**changes) if changes else made


@pytest.fixture
async def queue() -> AsyncIterator[RedisQueue]:
    require_port("Redis", 6379)
    name = "rq" + uuid.uuid4().hex[:12]
    opened = open_queue(f"{SHARED}?prefix=rq:{name}:")
    assert isinstance(opened, RedisQueue)
    yield opened
    await opened.aclose()
    await delete_keys(f"rq:{name}:*")


async def ordered_keys_written(queue: RedisQueue) -> list[str]:
    pattern = f"{queue.keys.prefix}*:ordered:*"
    return sorted([str(k) async for k in queue.client.scan_iter(match=pattern)])


async def test_jobs_without_an_ordering_key_write_nothing_of_the_lines(queue: RedisQueue) -> None:
    await queue.push(job(None))
    await queue.push(job(None, available_at=utcnow() + timedelta(milliseconds=1)))
    await queue.push_many([job(None), job(None), job(None, queue="other")])
    done = await queue.reserve("default", limit=2)
    await queue.acknowledge_many(done)
    (failing,) = await queue.reserve("default")
    await queue.fail(failing, "no")
    assert await queue.retry_failed(failing.job.id)
    (again,) = await queue.reserve("default")
    await queue.release(again)
    more = await queue.reserve("default", limit=10)
    await queue.acknowledge_and_reserve(more, "other", limit=1)

    assert await ordered_keys_written(queue) == []


def test_every_key_of_a_queue_shares_its_hash_slot_ordering_keys_included() -> None:
    from rainier_queue.drivers.redis.keys import Keys

    for name in ("mail", "a{b}c", "per cent%", "ünï"):
        slots = {key_slot(key.encode()) for key in Keys("rq:").queue(name).all()}
        assert len(slots) == 1, f"queue {name!r} spans slots {slots}"


async def test_a_held_job_is_found_by_id_as_waiting_and_names_the_job_it_waits_for(
    queue: RedisQueue,
) -> None:
    first, second = job("account-1"), job("account-1")
    await queue.push_many([first, second])

    found = await queue.find_job(second.id)

    assert found is not None
    assert found.where == "queued"
    assert found.job.id == second.id
    assert await queue.ahead_of(second.id) == first.id
    assert await queue.ahead_of(first.id) is None


async def test_a_held_job_is_rewritten_where_it_waits_and_keeps_its_place(
    queue: RedisQueue,
) -> None:
    first, second, third = job("k"), job("k"), job("k")
    await queue.push_many([first, second, third])

    def rewrite(stored: QueuedJob) -> QueuedJob | None:
        return stored.with_changes(payload={"text": "rewritten"})

    done = await queue.rewrite_payloads(rewrite)

    assert done.rewritten == 3
    seen = []
    for _ in range(3):
        (one,) = await queue.reserve("default")
        seen.append((one.job.id, one.job.payload))
        await queue.acknowledge(one)
    assert seen == [(j.id, {"text": "rewritten"}) for j in (first, second, third)]


async def test_acknowledgements_sent_with_a_reserve_from_another_queue_let_the_next_go(
    queue: RedisQueue,
) -> None:
    first, second = job("account-9", queue="keyed"), job("account-9", queue="keyed")
    plain = job(None, queue="plain")
    await queue.push_many([first, second, plain])
    (running,) = await queue.reserve("keyed")
    assert await queue.reserve("keyed") == []

    outcomes, taken = await queue.acknowledge_and_reserve([running], "plain", limit=1)

    assert outcomes == [None]
    assert [r.job.id for r in taken] == [plain.id]
    (after,) = await queue.reserve("keyed")
    assert after.job.id == second.id


async def test_a_batch_callback_with_an_ordering_key_waits_behind_the_job_holding_its_key(
    queue: RedisQueue,
) -> None:
    running = job("account-5")
    await queue.push(running)
    (held,) = await queue.reserve("default")
    callback = job("account-5")
    await queue.batch_store.open_batch("b1", 1, [Callback.of("then", callback)])

    await queue.batch_store.record_in_batch(
        Member("b1", ("default",)), "member-1", Outcome.SUCCEEDED
    )

    assert await queue.reserve("default") == [], "the callback waits behind its key's job"
    assert await queue.ahead_of(callback.id) == running.id
    await queue.acknowledge(held)
    (after,) = await queue.reserve("default")
    assert after.job.id == callback.id
    await queue.acknowledge(after)
    await queue.push(later := job("account-5"))
    (last,) = await queue.reserve("default")
    assert last.job.id == later.id, "the callback let its key go when it was settled"
