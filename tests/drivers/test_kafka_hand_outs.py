# SPDX-License-Identifier: MIT
"""A reserve's hand-outs from several partitions: side by side, each still one partition's own.

Each hand-out is a compare-and-set on its own partition's cursor, so a
reserve that serves several partitions sends those writes together and
waits for them once: one after the other, a drain's pace was a round trip
per partition served. These pin that the writes are on their way at the
same time, and that doing so keeps what one at a time kept: every job once,
each partition in its order, no partition serving two jobs at once, and no
more partitions served than the worker's share when another worker asks
for some (the share is decided before the writes go out).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer
from typing_extensions import override

from rainier_queue.cache.memory import MemoryCache
from rainier_queue.drivers.kafka import KafkaPosition, KafkaQueue, membership
from rainier_queue.drivers.kafka.membership import Membership
from rainier_queue.drivers.kafka.names import topic_name
from rainier_queue.queue import Reservation

from ..kafka_broker import KafkaBroker
from .conftest import Opener, a_job, shared_locks

PARTITIONS = 3
MANY = 6


class SideBySide(MemoryCache):
    """A memory store that notes how many cursor writes were on their way at once, at most."""

    def __init__(self) -> None:
        super().__init__()
        self.on_the_way = 0
        self.most = 0

    @override
    async def add(self, key: str, value: bytes, ttl: timedelta | None = None) -> bool:
        async with self._write(key):
            return await super().add(key, value, ttl)

    @override
    async def replace_if(
        self, key: str, expected: bytes, value: bytes, ttl: timedelta | None = None
    ) -> bool:
        async with self._write(key):
            return await super().replace_if(key, expected, value, ttl)

    @contextlib.asynccontextmanager
    async def _write(self, key: str) -> AsyncIterator[None]:
        if not key.startswith("kafka-cursor:"):
            yield
            return
        self.on_the_way += 1
        self.most = max(self.most, self.on_the_way)
        try:
            await asyncio.sleep(0)  # a round trip: others may set off meanwhile
            yield
        finally:
            self.on_the_way -= 1


async def produce(
    tansu: KafkaBroker, topic: str, per_partition: int, partitions: int = PARTITIONS
) -> list[str]:
    """`per_partition` jobs on each partition, in turn; their ids in the order produced."""
    producer = AIOKafkaProducer(bootstrap_servers=tansu.bootstrap)
    await producer.start()
    ids: list[str] = []
    try:
        for _ in range(per_partition):
            for partition in range(partitions):
                job = a_job("wide")
                ids.append(job.id)
                await producer.send_and_wait(topic, job.to_json().encode(), partition=partition)
    finally:
        await producer.stop()
    return ids


async def a_job_from_each(
    queue: KafkaQueue, name: str, partitions: int, cache: SideBySide
) -> list[Reservation]:
    """A reserve's jobs once one found a job waiting on every partition (`cache.most` its own).

    The consumer reads on in the background; a reserve that finds fewer hands
    its jobs back unrun, as it found them, and the next looks again.
    """
    for _ in range(100):
        cache.most = 0
        batch = await queue.reserve(name, limit=partitions)
        if len(batch) == partitions:
            return batch
        for reservation in batch:
            await queue.release(reservation, count_attempt=False)
        await asyncio.sleep(0.05)
    raise AssertionError("no reserve found a job on every partition")


async def test_a_reserve_writes_the_cursors_of_the_partitions_it_serves_side_by_side(
    tansu: KafkaBroker, topics: Any, open_kafka: Opener, prefix: str
) -> None:
    await topics("wide", partitions=PARTITIONS)
    topic = topic_name(prefix, "wide")
    ids = await produce(tansu, topic, per_partition=4)
    cache = SideBySide()
    queue = open_kafka(shared_locks(cache))

    got: list[Reservation] = []

    async def reserve_and_acknowledge() -> list[Reservation]:
        batch = await queue.reserve("wide", limit=PARTITIONS)
        served = [r.handle.partition for r in batch if isinstance(r.handle, KafkaPosition)]
        assert len(served) == len(set(served)), "one job at a time per partition"
        got.extend(batch)
        for reservation in batch:
            await queue.acknowledge(reservation)
        return batch

    cache.most = 0
    full = await a_job_from_each(queue, "wide", PARTITIONS, cache)
    assert cache.most == PARTITIONS, "the hand-outs' cursor writes went one after the other"
    got += full
    for reservation in full:
        await queue.acknowledge(reservation)
    for _ in range(50):
        if len(got) == len(ids):
            break
        await reserve_and_acknowledge()

    assert sorted(r.job.id for r in got) == sorted(ids), "every job, once"
    assert {r.job.attempts for r in got} == {1}, "a job handed back unrun keeps its attempt"
    for partition in range(PARTITIONS):
        offsets = [
            r.handle.offset
            for r in got
            if isinstance(r.handle, KafkaPosition) and r.handle.partition == partition
        ]
        assert offsets == [0, 1, 2, 3], f"partition {partition} in its order"
    await queue.release_partitions()


async def test_side_by_side_hand_outs_stay_within_the_share_when_another_worker_asks(
    tansu: KafkaBroker,
    topics: Any,
    open_kafka: Opener,
    prefix: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The share is decided before the writes go out: each hand-out on its way
    # counts as busy, so a worker asked to give partitions back serves no more
    # than its share even when every partition it holds has a job waiting.
    monkeypatch.setattr(membership, "LOOK_EVERY", 0.0)  # the count of workers read each time
    await topics("many", partitions=MANY)
    topic = topic_name(prefix, "many")
    await produce(tansu, topic, per_partition=3, partitions=MANY)
    cache = SideBySide()
    locks = shared_locks(cache)
    queue = open_kafka(locks)
    for reservation in await a_job_from_each(queue, "many", MANY, cache):
        await queue.acknowledge(reservation)
    assert cache.most == MANY, "alone, it serves all six at once"
    for reservation in await a_job_from_each(queue, "many", MANY, cache):
        await queue.acknowledge(reservation)  # now every partition has its next job read

    other = Membership(locks, group="rainier", lease=timedelta(seconds=60))
    await other.look(topic, MANY)  # a second worker, below its share (of three): it asks
    await other.want(topic)
    batch = await queue.reserve("many", limit=MANY)

    assert 0 < len(batch) <= MANY // 2, f"{len(batch)} jobs, beyond a share of three"
    assert len(queue.partitions_held("many")) == len(batch), "the others are given back"
    for reservation in batch:
        await queue.acknowledge(reservation)
    await other.leave()
    await queue.release_partitions()
