# SPDX-License-Identifier: MIT
"""Cursors: acknowledging moves a group's cursor, and size, clear and a first read follow from it.

Kafka keeps nothing per record, so what the driver knows is done is a cursor
per group and partition in the lock store: the next offset and how many
times its record was handed out, set to offset + 1 when a job is
acknowledged. These pin that a hand-out counts its delivery there before the
job runs, and an acknowledgement moves it on; that a job costs two writes,
both to the cursor; that a cursor that is not one is refused; that clear
moves it to the end and counts what it skipped, and that a worker holding a
partition (trusting the cursor it moved last, so as not to read it before
every job) honours a clear made by another process; that each group has its
own and gets every job; that a partition never read starts at its earliest
record, not its end, which would skip the jobs pushed before any worker
looked; that a cursor behind the earliest record is a lost range
(test_kafka_retention.py has the broker test); and that a reservation Kafka
did not make cannot settle.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections import Counter
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer
from typing_extensions import override

from rainier_queue.cache import LockManager
from rainier_queue.cache.memory import MemoryCache
from rainier_queue.cache.sqlite import SQLiteCache
from rainier_queue.drivers.kafka import KafkaPosition, KafkaQueue
from rainier_queue.drivers.kafka.names import cursor_key
from rainier_queue.drivers.kafka.partitions import Cursor, lost_range
from rainier_queue.errors import LeaseLost
from rainier_queue.queue import Reservation

from ..kafka_broker import KafkaBroker
from .conftest import Opener, a_job, settings, shared_locks


class CountingCache(MemoryCache):
    """A memory store that counts the reads and the writes of each key."""

    def __init__(self) -> None:
        super().__init__()
        self.reads: Counter[str] = Counter()
        self.writes: Counter[str] = Counter()

    @override
    async def get(self, key: str) -> bytes | None:
        self.reads[key] += 1
        return await super().get(key)

    @override
    async def put(self, key: str, value: bytes, ttl: timedelta | None = None) -> None:
        self.writes[key] += 1
        await super().put(key, value, ttl)

    @override
    async def add(self, key: str, value: bytes, ttl: timedelta | None = None) -> bool:
        self.writes[key] += 1
        return await super().add(key, value, ttl)

    @override
    async def replace_if(
        self, key: str, expected: bytes, value: bytes, ttl: timedelta | None = None
    ) -> bool:
        self.writes[key] += 1
        return await super().replace_if(key, expected, value, ttl)

    @override
    async def forget(self, key: str) -> bool:
        self.writes[key] += 1
        return await super().forget(key)

    @override
    async def forget_if(self, key: str, expected: bytes) -> bool:
        self.writes[key] += 1
        return await super().forget_if(key, expected)

    @override
    async def increment(self, key: str, by: int = 1, ttl: timedelta | None = None) -> int:
        self.writes[key] += 1
        return await super().increment(key, by, ttl)


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


async def test_a_job_cleared_while_it_ran_does_not_come_back_as_a_retry(
    topics: Any, open_kafka: Opener
) -> None:
    locks = shared_locks()
    holder, other = open_kafka(locks), open_kafka(locks)
    await holder.push_many([a_job(), a_job()])
    [running] = await holder.reserve("default")

    await other.clear("default")  # from another process, while the job runs
    with pytest.raises(LeaseLost, match="not retried"):
        await holder.release(running)  # a retry would land past the new cursor

    assert await other.size("default") == 0
    assert await holder.reserve("default") == [], "the cleared job stays cleared"


CLEAR = """
import asyncio, sys
from rainier_queue.connections import open_queue

async def main(url: str) -> None:
    queue = open_queue(url)
    try:
        print(await queue.clear("default"))
    finally:
        await queue.aclose()

asyncio.run(main(sys.argv[1]))
"""


async def clear_from_another_process(tansu: KafkaBroker, prefix: str, store: Path) -> int:
    """Clear `default` from a process of its own, sharing the SQLite lock store `store`."""
    url = tansu.url(topic_prefix=prefix, batch_bytes="1", locks=f"sqlite:///{store}")
    done = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-c", CLEAR, url],
        capture_output=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    return int(done.stdout)


async def test_a_holder_hands_out_no_job_another_process_cleared(
    tansu: KafkaBroker, topics: Any, open_kafka: Opener, prefix: str, tmp_path: Path
) -> None:
    store = tmp_path / "locks.db"
    async with SQLiteCache(store) as cache:
        holder = open_kafka(LockManager(cache))
        await holder.push_many([a_job(), a_job(), a_job()])
        [first] = await holder.reserve("default")
        await holder.acknowledge(first)  # the holder keeps the lease and its copy of the cursor

        assert await clear_from_another_process(tansu, prefix, store) == 2

        assert await holder.reserve("default") == [], "the holder honours the other's clear"
        assert await holder.size("default") == 0
        later = a_job()
        await holder.push(later)
        [got] = await holder.reserve("default")
        assert got.job.id == later.id
        assert got.job.attempts == 1
        await holder.acknowledge(got)
        await holder.release_partitions()


async def test_a_hand_out_counts_its_delivery_in_the_cursor_before_the_job_runs(
    topics: Any, open_kafka: Opener, prefix: str
) -> None:
    locks = shared_locks()
    queue = open_kafka(locks)
    await queue.push(a_job())

    [got] = await queue.reserve("default")

    key = cursor_key("rainier", prefix + "default", 0)
    assert await locks.cache.get(key) == b"0:1", "a worker that dies now has the delivery counted"
    await queue.release(got, count_attempt=False)  # handed back unstarted
    assert await locks.cache.get(key) == b"0", "a job handed back unstarted is not counted"
    [again] = await queue.reserve("default")
    assert again.job.attempts == 1
    await queue.acknowledge(again)
    assert await locks.cache.get(key) == b"1"


async def test_a_holder_does_not_read_the_cursor_before_every_job(
    topics: Any, open_kafka: Opener, prefix: str
) -> None:
    # Honouring a clear must not cost the hot path a round trip per job: the holder
    # reads the cursor when it takes the partition, then trusts the one it moves,
    # and a job costs two writes, both to the cursor (hand-out, acknowledgement).
    cache = CountingCache()
    queue = open_kafka(shared_locks(cache))
    await queue.push_many([a_job() for _ in range(10)])
    for _ in range(10):
        [got] = await queue.reserve("default")
        await queue.acknowledge(got)

    key = cursor_key("rainier", prefix + "default", 0)
    assert cache.reads[key] <= 2, cache.reads[key]
    assert cache.writes[key] == 20, cache.writes
    assert cache.writes.total() - cache.writes[key] <= 4, cache.writes  # leases, seat


def test_a_cursor_reads_back_as_written_and_refuses_what_is_not_one() -> None:
    for cursor in (Cursor(0), Cursor(41), Cursor(41, 3)):
        assert Cursor.decode(cursor.encode(), "t", 0) == cursor
    assert Cursor(41).encode() == b"41", "no deliveries: the plain offset"
    for raw in (b"x", b"-1", b"4:-2", b"4:x", b"\xff"):
        with pytest.raises(ValueError, match="cursor of partition 2 of topic 'jobs'"):
            Cursor.decode(raw, "jobs", 2)
