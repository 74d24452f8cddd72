# SPDX-License-Identifier: MIT
"""Cursors: acknowledging moves a group's cursor, and size, clear and a first read follow from it.

Kafka keeps nothing per record, so what the driver knows is done is a cursor
per group and partition in the lock store, set to offset + 1 when a job is
acknowledged. These pin that an acknowledgement moves it and drops the
record's delivery count; that clear moves it to the end and counts what it
skipped; that each group has its own and gets every job; that a partition
never read starts at its earliest record, not its end, which would skip the
jobs pushed before any worker looked; that a cursor behind the earliest
record is a lost range (test_kafka_retention.py has the broker test); and
that a reservation Kafka did not make cannot settle.
"""

from __future__ import annotations

from typing import Any

import pytest
from aiokafka import AIOKafkaProducer

from rainier_queue.cache.memory import MemoryCache
from rainier_queue.drivers.kafka import KafkaPosition, KafkaQueue
from rainier_queue.drivers.kafka.names import attempts_key, cursor_key
from rainier_queue.drivers.kafka.partitions import lost_range
from rainier_queue.errors import LeaseLost
from rainier_queue.queue import Reservation

from ..kafka_broker import KafkaBroker
from .conftest import Opener, a_job, settings, shared_locks

# -- without a broker --------------------------------------------------------------------


def test_a_cursor_behind_the_earliest_record_is_a_lost_range() -> None:
    assert lost_range(cursor=10, earliest=25) == (10, 25)
    assert lost_range(cursor=25, earliest=25) is None
    assert lost_range(cursor=40, earliest=25) is None


async def test_a_reservation_not_made_by_kafka_cannot_be_settled() -> None:
    queue = KafkaQueue(settings(), shared_locks())
    stranger = Reservation(job=a_job(), token="t", lease_until=None, lease=None, handle="7")

    with pytest.raises(LeaseLost, match="not reserved from Kafka"):
        await queue.acknowledge(stranger)


# -- against the broker ------------------------------------------------------------------


async def test_acknowledging_moves_the_cursor_past_the_record(
    topics: Any, open_kafka: Opener, prefix: str
) -> None:
    locks = shared_locks()
    queue = open_kafka(locks)
    await queue.push(a_job())
    [got] = await queue.reserve("default")

    await queue.acknowledge(got)

    assert isinstance(got.handle, KafkaPosition)
    cursor = await locks.cache.get(cursor_key("rainier", prefix + "default", 0))
    assert cursor == str(got.handle.offset + 1).encode()
    delivered = attempts_key("rainier", prefix + "default", 0, got.handle.offset)
    assert await locks.cache.get(delivered) is None, "the delivery count went with the record"
    assert await queue.size("default") == 0
    assert await queue.reserve("default") == []


async def test_clear_skips_to_the_end_and_counts_what_it_skipped(
    topics: Any, open_kafka: Opener
) -> None:
    queue = open_kafka()
    await queue.push_many([a_job(), a_job()])

    assert await queue.clear("default") == 2
    assert await queue.size("default") == 0
    assert await queue.reserve("default") == []
    await queue.push(a_job())
    assert len(await queue.reserve("default")) == 1, "later jobs still run"


async def test_each_group_gets_every_job_and_keeps_its_own_cursor(
    topics: Any, open_kafka: Opener
) -> None:
    store = MemoryCache()
    billing = open_kafka(shared_locks(store), group="billing")
    audit = open_kafka(shared_locks(store), group="audit")
    job = a_job()
    await billing.push(job)
    [billed] = await billing.reserve("default")
    await billing.acknowledge(billed)

    [audited] = await audit.reserve("default")

    assert billed.job.id == audited.job.id == job.id
    assert audited.job.attempts == 1, "the other group's delivery is not counted here"
    assert await billing.size("default") == 0
    assert await billing.reserve("default") == []


async def test_a_partition_never_read_starts_at_its_earliest_record(
    tansu: KafkaBroker, topics: Any, open_kafka: Opener, prefix: str
) -> None:
    # Pushed before any worker ever looked: a start at the end would skip it for good.
    producer = AIOKafkaProducer(bootstrap_servers=tansu.bootstrap)
    await producer.start()
    job = a_job()
    try:
        await producer.send_and_wait(prefix + "default", job.to_json().encode())
    finally:
        await producer.stop()

    [got] = await open_kafka().reserve("default")

    assert got.job.id == job.id


async def test_a_job_cleared_while_its_partition_was_held_does_not_come_back_as_a_retry(
    topics: Any, open_kafka: Opener
) -> None:
    locks = shared_locks()
    holder, other = open_kafka(locks), open_kafka(locks)
    await holder.push_many([a_job(), a_job(), a_job()])
    [first] = await holder.reserve("default")
    await holder.acknowledge(first)  # the holder keeps the lease and knows the cursor

    await other.clear("default")  # from another process, while the partition is held
    stale = await holder.reserve("default")
    for held in stale:  # a record the clear skipped, handed out from the cached cursor
        with pytest.raises(LeaseLost, match="not retried"):
            await holder.release(held)

    assert await other.size("default") == 0
    assert await open_kafka(locks).reserve("default") == [], "the cleared job stays cleared"
