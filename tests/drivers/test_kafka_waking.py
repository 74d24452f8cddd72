# SPDX-License-Identifier: MIT
"""An idle worker's wait: it ends for a record it could serve, not for one another worker serves.

The contract suite checks that a push from another process ends an idle
wait (tests/contract/test_operational.py). What is particular to a log is
the other half: a partition another worker holds grows with every push to
it, and a wait that ended for each of those would reserve nothing and wait
again, spinning beside the busy worker. These produce straight to one
partition, so which partition grows is the test's choice.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from aiokafka import AIOKafkaProducer

from rainier_queue.drivers.kafka import KafkaPosition
from rainier_queue.drivers.kafka.names import topic_name

from ..kafka_broker import KafkaBroker
from .conftest import Opener, a_job, shared_locks

LONG = timedelta(seconds=60)
"""Longer than the test: a wait this long ends only for work."""


async def produce_to(tansu: KafkaBroker, topic: str, partition: int) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=tansu.bootstrap)
    await producer.start()
    try:
        await producer.send_and_wait(topic, a_job().to_json().encode(), partition=partition)
    finally:
        await producer.stop()


async def test_an_idle_wait_ends_for_a_free_partition_and_not_for_a_held_one(
    tansu: KafkaBroker, topics: Any, open_kafka: Opener, prefix: str
) -> None:
    await topics("busy", partitions=2)
    topic = topic_name(prefix, "busy")
    locks = shared_locks()
    holder, idle = open_kafka(locks), open_kafka(locks)
    await produce_to(tansu, topic, 0)
    [running] = await holder.reserve("busy")  # the holder serves partition 0 now
    assert running.handle == KafkaPosition(topic, 0, 0)
    waiting = asyncio.create_task(idle.wait_for_work(["busy"], LONG))
    await asyncio.sleep(0.3)  # the wait has looked at the partitions once at least

    await produce_to(tansu, topic, 0)  # more work for the holder
    await asyncio.sleep(1.0)  # several looks at the partitions
    assert not waiting.done(), "the wait ended for a partition another worker holds"

    await produce_to(tansu, topic, 1)  # work nobody serves yet
    await asyncio.wait_for(waiting, 10)  # a liveness bound, not a latency
    [got] = await idle.reserve("busy")
    assert got.handle == KafkaPosition(topic, 1, 0)
    await holder.acknowledge(running)
    await idle.acknowledge(got)
