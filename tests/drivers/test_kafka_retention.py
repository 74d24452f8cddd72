# SPDX-License-Identifier: MIT
"""Retention overtaking a cursor: the jobs it removed are reported lost, and reading goes on.

A log removes records from its start by retention (or an operator's
DeleteRecords) whether or not anybody read them. When that overtakes a
group's cursor, the driver must say which jobs were lost, naming the
partition and the range, and rejoin at the earliest record left, never stall
on a position that no longer exists nor skip anything silently.

The test moves the log start with DeleteRecords, the one way a client can.
Tansu 0.6.0 (the wheel the tests run) cannot: its memory storage does not
implement DeleteRecords (a worker thread panics, "not yet implemented", and
the connection closes), keeps but never applies `retention.ms` and
`retention.bytes`, and this build has no other storage engine compiled in.
So on Tansu the test skips with that reason, and runs as it stands on a
broker that can delete records; the lost-range arithmetic has a unit test
in test_kafka_cursors.py. It runs on a broker of its own, so a broker thread
that panics cannot disturb other tests.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka import errors as kx
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.admin.records_to_delete import RecordsToDelete

from rainier_queue.cache import LockManager
from rainier_queue.cache.memory import MemoryCache
from rainier_queue.drivers.kafka import KafkaPosition, KafkaQueue
from rainier_queue.drivers.kafka.names import cursor_key, topic_name
from rainier_queue.drivers.kafka.settings import KafkaSettings
from rainier_queue.envelope import QueuedJob

from ..kafka_broker import KafkaBroker, start_broker


@pytest.fixture
def private_broker() -> Any:
    running = start_broker()
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture
async def admin(private_broker: KafkaBroker) -> AsyncIterator[AIOKafkaAdminClient]:
    client = AIOKafkaAdminClient(bootstrap_servers=private_broker.bootstrap)
    await client.start()
    try:
        yield client
    finally:
        await client.close()


async def earliest(bootstrap: str, tp: TopicPartition) -> int:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None)
    await consumer.start()
    try:
        offset: int = (await consumer.beginning_offsets([tp]))[tp]
        return offset
    finally:
        await consumer.stop()


async def delete_below(
    admin: AIOKafkaAdminClient, bootstrap: str, tp: TopicPartition, at: int
) -> None:
    """Move the partition's log start to `at`, or skip: the broker cannot delete records."""
    try:
        await admin.delete_records({tp: RecordsToDelete(at)})
    except (kx.KafkaError, OSError) as exc:
        pytest.skip(
            f"this broker cannot delete records ({type(exc).__name__}: {exc}), so retention "
            "cannot be made to overtake a cursor on it (Tansu's memory storage does not "
            "implement DeleteRecords)"
        )
    if (start := await earliest(bootstrap, tp)) != at:
        pytest.skip(f"DeleteRecords answered, but the log still starts at {start}, not {at}")


async def test_jobs_lost_to_retention_are_reported_and_reading_rejoins_at_the_earliest(
    private_broker: KafkaBroker,
    admin: AIOKafkaAdminClient,
    caplog: pytest.LogCaptureFixture,
) -> None:
    prefix = f"k{uuid.uuid4().hex[:10]}."
    topic = topic_name(prefix, "default")
    await admin.create_topics([NewTopic(topic, 1, 1)])
    tp = TopicPartition(topic, 0)
    locks = LockManager(MemoryCache()).declared_shared()
    made = KafkaSettings(brokers=(private_broker.bootstrap,), topic_prefix=prefix, batch_bytes=1)
    jobs = [QueuedJob.create("note", {"n": n}) for n in range(6)]

    first = KafkaQueue(made, locks)
    try:
        for job in jobs:  # one at a time: offsets 0 to 5
            await first.push(job)
        [ran] = await first.reserve("default")
        await first.acknowledge(ran)
    finally:
        await first.aclose()
    assert await locks.cache.get(cursor_key("rainier", topic, 0)) == b"1"

    await delete_below(admin, private_broker.bootstrap, tp, 4)  # offsets 1 to 3 never ran

    # A worker that never read the partition, so nothing is served from a buffer.
    second = KafkaQueue(made, locks)
    try:
        with caplog.at_level(logging.ERROR, "rainier_queue.kafka"):
            [got] = await second.reserve("default")
    finally:
        await second.aclose()

    assert got.job.id == jobs[4].id, "the first job retention kept"
    assert isinstance(got.handle, KafkaPosition)
    assert got.handle.offset == 4
    assert f"partition 0 of topic {topic!r}" in caplog.text
    assert "offsets 1 to 3" in caplog.text
    assert "lost" in caplog.text
