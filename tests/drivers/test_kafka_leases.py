# SPDX-License-Identifier: MIT
"""Partition leases: one worker reads a partition at a time, leased in a lock store all can see.

A cursor is one number per partition, so two workers reading one partition
would run each job twice; a worker leases a partition before it reads it. A
lock store other processes cannot see would grant every worker every lease,
so it is refused, with the fix (these tests vouch for a memory store, because
they run in one process). These pin that a partition another worker leased
is left alone; that jobs sharing a key run in push order with one job in
flight per partition; that a reserve keeps the partition whose job was just
settled and gives back the empty one it looked at; that a lease which lapsed
before it was given back is warned about; and that a stopping worker gives
its partition back at once rather than a whole lease later.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

import pytest

from rainier_queue.cache import Lock, LockManager
from rainier_queue.cache.memory import MemoryCache
from rainier_queue.connections import open_queue
from rainier_queue.drivers.kafka import KafkaPosition, KafkaQueue
from rainier_queue.drivers.kafka.names import lease_name
from rainier_queue.envelope import QueuedJob
from rainier_queue.errors import ConfigurationError
from rainier_queue.worker import WorkerOptions

from ..worker.jobs import Journal, quick, worker_for
from .conftest import SHORT, Opener, a_job, settings, shared_locks

# -- without a broker --------------------------------------------------------------------


def test_a_lock_store_other_processes_cannot_see_is_refused_with_the_fix() -> None:
    with pytest.raises(ConfigurationError, match="shared lock store") as refused:
        KafkaQueue(settings(), LockManager(MemoryCache()))

    assert "every job would run once per worker" in str(refused.value)
    assert "redis://" in str(refused.value)
    assert "declared_shared" in str(refused.value)
    assert "  " not in str(refused.value), "the upstream spaced this message wrongly"
    KafkaQueue(settings(), shared_locks())  # vouched for: accepted, nothing connects yet


def test_a_memory_lock_store_named_in_the_url_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="shared lock store") as refused:
        open_queue("kafka://127.0.0.1:9092/?locks=memory://")
    assert "  " not in str(refused.value)


def test_a_kafka_url_without_a_lock_store_says_how_to_name_one() -> None:
    with pytest.raises(ConfigurationError, match="`locks`"):
        open_queue("kafka://127.0.0.1:9092")


# -- against the broker ------------------------------------------------------------------


async def test_jobs_sharing_a_unique_key_run_in_push_order_across_partitions(
    topics: Any, open_kafka: Opener
) -> None:
    await topics("ordered", partitions=6)
    queue = open_kafka()
    for n in range(8):
        await queue.push(a_job("ordered").with_changes(unique_key="account-7", payload=n))
        await queue.push(a_job("ordered").with_changes(payload=100 + n))
    order: list[Any] = []
    # An empty reserve on a log can mean "not fetched yet", so look until all
    # sixteen came back (or long past when they should have).
    loop = asyncio.get_running_loop()
    give_up = loop.time() + 30
    while len(order) < 16 and loop.time() < give_up:
        got = await queue.reserve("ordered", limit=6)
        if not got:
            await asyncio.sleep(0.05)
            continue
        order += [r.job.payload for r in got]
        assert len({r.handle.partition for r in got if isinstance(r.handle, KafkaPosition)}) == (
            len(got)
        ), "one job in flight per partition"
        await queue.acknowledge_many(got)

    assert [n for n in order if n < 100] == list(range(8))
    assert sorted(order) == list(range(8)) + list(range(100, 108))


async def test_a_partition_another_worker_leased_is_left_alone(
    topics: Any, open_kafka: Opener
) -> None:
    store = MemoryCache()
    first, second = open_kafka(shared_locks(store)), open_kafka(shared_locks(store))
    await first.push(a_job())
    await first.push(a_job())
    [held] = await first.reserve("default")

    assert await second.reserve("default") == [], "the partition is the first worker's"
    assert await second.size("default") == 1, "the running job is not waiting"

    await first.acknowledge(held)
    await first.release_partitions()
    assert len(await second.reserve("default")) == 1


class Interleaved(LockManager):
    """A shared memory lock store that runs a step of a test just before a given lease is taken.

    It puts a settle at an exact point inside a reserve, and notes every lease
    given back, so a test can tell which partitions a reserve let go.
    """

    def __init__(self) -> None:
        super().__init__(MemoryCache(), shared=True)
        self.before: dict[str, Callable[[], Awaitable[Any]]] = {}
        self.given_back: list[str] = []

    async def acquire(self, name: str, ttl: timedelta) -> Lock | None:
        step = self.before.pop(name, None)
        if step is not None:
            await step()
        return await super().acquire(name, ttl)

    async def release(self, lock: Lock) -> bool:
        self.given_back.append(lock.key)
        return await super().release(lock)


async def test_a_partition_freed_while_a_reserve_looks_elsewhere_is_served_and_kept(
    topics: Any, open_kafka: Opener, prefix: str
) -> None:
    # A worker frees a slot when its handler returns, so its next reserve often
    # starts while that job's acknowledgement is still on its way: the partition
    # looks busy and the reserve looks at an empty one instead. The settle lands
    # meanwhile; the reserve must hand out the next job of the freed partition
    # (its records are read already), not wait on the empty partition for the
    # broker and give the freed one's lease away.
    await topics("pair", partitions=2)
    locks = Interleaved()
    queue = open_kafka(locks)
    first, second = (a_job("pair").with_changes(unique_key="account-7") for _ in range(2))
    await queue.push_many([first, second])
    [running] = await queue.reserve("pair")
    assert isinstance(running.handle, KafkaPosition)
    busy = running.handle.partition
    empty = 1 - busy
    topic = prefix + "pair"
    locks.before[lease_name("rainier", topic, empty)] = lambda: queue.acknowledge(running)
    locks.given_back.clear()

    [got] = await queue.reserve("pair")

    assert got.job.id == second.id
    assert locks.given_back == [locks.key(lease_name("rainier", topic, empty))], (
        "the empty partition is given back; the one with work stays with this worker"
    )


async def test_giving_back_a_lease_that_had_lapsed_warns_of_a_possible_double_run(
    topics: Any, open_kafka: Opener, caplog: pytest.LogCaptureFixture
) -> None:
    queue = open_kafka(lease=SHORT)
    await queue.push_many([a_job(), a_job()])
    [got] = await queue.reserve("default")
    await queue.acknowledge(got)  # the partition stays this worker's until it lets go
    await asyncio.sleep(SHORT.total_seconds() * 1.5)

    with caplog.at_level(logging.WARNING, "rainier_queue.kafka"):
        await queue.release_partitions()

    assert "had lapsed before it was given back" in caplog.text
    assert "partition 0" in caplog.text


async def test_a_stopping_worker_hands_back_its_job_and_gives_its_partition_back(
    topics: Any, open_kafka: Opener, prefix: str
) -> None:
    locks = shared_locks()
    queue = open_kafka(locks)
    await queue.push(QueuedJob.create("held", {"text": "interrupted"}))
    journal = Journal()
    options: WorkerOptions = quick(grace=timedelta(milliseconds=10), timeout=timedelta(seconds=10))
    worker = worker_for(queue, journal, options)
    running = asyncio.create_task(worker.run())
    await asyncio.wait_for(journal.started.wait(), 10)

    worker.stop()
    stats = await running

    assert stats.interrupted == 1
    # Handed back unrun, the partition's lease would outlive the worker by a whole lease
    # (90 s) unless the stop gives it back; another worker can take it at once.
    assert not await locks.is_held(lease_name("rainier", prefix + "default", 0))
    [again] = await open_kafka(locks).reserve("default")
    assert again.job.attempts == 1, "the interrupted delivery did not cost an attempt"
