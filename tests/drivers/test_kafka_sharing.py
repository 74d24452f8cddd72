# SPDX-License-Identifier: MIT
"""Workers share a topic's partitions: each takes its fair share, ceil(partitions / workers).

Each worker holds a seat among the topic's workers in the lock store (a lock
with the lease's TTL), so every worker can count the live ones. These pin
the count (a seat given back at a stop, a seat that lapsed, more workers
than seats, a request for partitions); then, with two workers of
concurrency 8 on a six-partition topic, in one process on one shared lock
store: both started together end up with three partitions each; a worker
that joins late gets three once the first gives them back between jobs,
even one that stops when the queue is empty (it used to find every
partition held and leave after two seconds); a member that died has its
partitions (and the jobs it had reserved) taken over; and partitions nobody
takes are taken above the share. Every job is
recorded in a `Book` as it starts and ends, which shows that each ran once
and none ran twice at the same time.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pytest

from rainier_queue import Dependencies, Job, JobContext, JobRegistry
from rainier_queue.cache.memory import MemoryCache
from rainier_queue.drivers.kafka import KafkaPosition, KafkaQueue, membership
from rainier_queue.drivers.kafka.membership import Membership, fair_share
from rainier_queue.envelope import QueuedJob
from rainier_queue.queue import Reservation
from rainier_queue.worker import Worker

from ..worker.jobs import quick
from .conftest import Opener, shared_locks

PARTITIONS = 6
CONCURRENCY = 8
PATIENCE = 60.0
"""Seconds a test waits for a state it expects, before failing (a liveness bound only)."""


@dataclass
class Book:
    """What the `tick` jobs did: starts per job, ends, and any start while the job ran."""

    starts: Counter[int] = field(default_factory=Counter)
    running: set[int] = field(default_factory=set)
    overlaps: list[int] = field(default_factory=list)
    finished: set[int] = field(default_factory=set)


class Tick(Job):
    name = "tick"
    tries = 5
    n: int
    seconds: float = 0.03

    async def handle(self, ctx: JobContext) -> None:
        book = ctx.resolve(Book)
        if self.n in book.running:
            book.overlaps.append(self.n)
        book.running.add(self.n)
        book.starts[self.n] += 1
        try:
            await asyncio.sleep(self.seconds)
        finally:
            book.running.discard(self.n)
        book.finished.add(self.n)


def a_worker(queue: KafkaQueue, book: Book, **options: Any) -> Worker:
    settings = quick(
        queues=("shared",), concurrency=CONCURRENCY, sleep=timedelta(milliseconds=50), **options
    )
    return Worker(queue, JobRegistry([Tick]), settings, dependencies=Dependencies([book]))


async def push_ticks(queue: KafkaQueue, total: int) -> None:
    jobs = [QueuedJob.create("tick", {"n": n}, queue="shared") for n in range(total)]
    for start in range(0, total, 500):
        await queue.push_many(jobs[start : start + 500])


async def until(condition: Callable[[], bool], what: str, within: float = PATIENCE) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while not condition():
        assert loop.time() < deadline, f"timed out waiting until {what}"
        await asyncio.sleep(0.01)


def held(queue: KafkaQueue) -> list[int]:
    return queue.partitions_held("shared")


async def stopped(*running: tuple[Worker, asyncio.Task[Any]]) -> None:
    for worker, _ in running:
        worker.stop()
    await asyncio.gather(*(task for _, task in running))


def started(queue: KafkaQueue, book: Book, **options: Any) -> tuple[Worker, asyncio.Task[Any]]:
    worker = a_worker(queue, book, **options)
    return worker, asyncio.create_task(worker.run())


def ran_once_each(book: Book, numbers: set[int]) -> None:
    assert book.overlaps == [], "no job ran twice at the same time"
    assert set(book.starts) == numbers, "every job ran"
    assert [n for n, times in book.starts.items() if times > 1] == [], "no job ran twice"


# -- without a broker --------------------------------------------------------------------


def test_a_fair_share_is_the_partitions_over_the_workers_rounded_up() -> None:
    assert fair_share(6, 1) == 6
    assert fair_share(6, 2) == 3
    assert fair_share(6, 4) == 2
    assert fair_share(7, 3) == 3
    assert fair_share(6, 9) == 1, "more workers than partitions: one each, the rest wait"
    assert fair_share(6, 0) == 6


@pytest.fixture
def look_every_time(monkeypatch: pytest.MonkeyPatch) -> None:
    # A count is trusted for a while (LOOK_EVERY); these tests look again at once.
    monkeypatch.setattr(membership, "LOOK_EVERY", 0.0)


def members_on(store: MemoryCache, lease: float = 60) -> Membership:
    return Membership(shared_locks(store), group="g", lease=timedelta(seconds=lease))


@pytest.mark.usefixtures("look_every_time")
async def test_workers_count_each_other_and_one_that_stops_is_counted_out_at_once() -> None:
    store = MemoryCache()
    first, second = members_on(store), members_on(store)

    assert (await first.look("t", 6)).members == 1
    assert (await second.look("t", 6)).members == 2
    assert (await first.look("t", 6)).members == 2
    assert (await first.look("other-topic", 6)).members == 1, "a seat is per topic"

    await second.leave()

    assert (await first.look("t", 6)).members == 1


@pytest.mark.usefixtures("look_every_time")
async def test_a_worker_that_stopped_renewing_is_counted_out_when_its_seat_lapses() -> None:
    store = MemoryCache()
    first, gone = members_on(store), members_on(store, lease=0.2)
    await first.look("t", 6)
    assert (await gone.look("t", 6)).members == 2

    await asyncio.sleep(0.3)

    assert (await first.look("t", 6)).members == 1


@pytest.mark.usefixtures("look_every_time")
async def test_with_more_workers_than_partitions_each_counts_enough_for_a_share_of_one() -> None:
    store = MemoryCache()
    workers = [members_on(store) for _ in range(3)]
    counts = [(await w.look("t", 2)).members for w in workers]

    assert counts == [1, 2, 3], "the third finds both seats taken and counts itself on top"
    assert fair_share(2, counts[-1]) == 1


@pytest.mark.usefixtures("look_every_time")
async def test_a_request_for_partitions_is_seen_by_the_others_until_it_lapses(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(membership, "WANT_FOR", 0.2)
    store = MemoryCache()
    holder, waiting = members_on(store), members_on(store)
    await waiting.look("t", 6)
    assert not (await holder.look("t", 6)).wanted

    await waiting.want("t")

    assert (await holder.look("t", 6)).wanted
    await asyncio.sleep(0.3)
    assert not (await holder.look("t", 6)).wanted, "not asked again, so no longer wanted"


# -- against the broker ------------------------------------------------------------------


@pytest.mark.timeout(180)
async def test_two_workers_started_together_serve_three_partitions_each(
    topics: Any, open_kafka: Opener
) -> None:
    await topics("shared", partitions=PARTITIONS)
    locks = shared_locks()
    first, second = open_kafka(locks), open_kafka(locks)
    total = 900
    await push_ticks(first, total)
    book = Book()
    running = [started(first, book), started(second, book)]
    try:
        await until(lambda: len(held(first)) == len(held(second)) == 3, "both serve three")
        assert set(held(first)) | set(held(second)) == set(range(PARTITIONS))
        await until(lambda: len(book.finished) == total, "every job finished")
    finally:
        await stopped(*running)

    ran_once_each(book, set(range(total)))


@pytest.mark.timeout(180)
async def test_a_worker_that_joins_late_gets_its_share_once_the_first_gives_some_back(
    topics: Any, open_kafka: Opener
) -> None:
    await topics("shared", partitions=PARTITIONS)
    locks = shared_locks()
    first, late = open_kafka(locks), open_kafka(locks)
    total = 900
    await push_ticks(first, total)
    book = Book()
    running = [started(first, book)]
    try:
        await until(lambda: len(held(first)) == PARTITIONS, "the first worker serves all six")
        running.append(started(late, book))
        await until(lambda: len(held(first)) == len(held(late)) == 3, "each serves three")
        await until(lambda: len(book.finished) == total, "every job finished")
    finally:
        await stopped(*running)

    ran_once_each(book, set(range(total)))


@pytest.mark.timeout(180)
async def test_a_worker_that_stops_when_empty_gets_its_share_beside_a_busy_one(
    topics: Any, open_kafka: Opener
) -> None:
    # It used to find every partition held by the first worker and stop after
    # two seconds, with hundreds of jobs waiting.
    await topics("shared", partitions=PARTITIONS)
    locks = shared_locks()
    first, late = open_kafka(locks), open_kafka(locks)
    total = 900
    await push_ticks(first, total)
    book = Book()
    running = [started(first, book)]
    try:
        await until(lambda: len(held(first)) == PARTITIONS, "the first worker serves all six")
        _, leaves = joining = started(late, book, stop_when_empty=True)
        running.append(joining)
        await until(lambda: len(held(late)) == 3, "the joining worker serves three")
        assert not leaves.done(), "it did not stop while jobs waited on its partitions"
        await until(lambda: len(book.finished) == total, "every job finished")
        await asyncio.wait_for(leaves, PATIENCE)  # and it stops by itself once they are done
    finally:
        await stopped(*running)

    ran_once_each(book, set(range(total)))


async def reserve_until(queue: KafkaQueue, wanted: int) -> list[Reservation]:
    """Reserve from `queue` until it holds `wanted` jobs (one per partition)."""
    got: list[Reservation] = []
    loop = asyncio.get_running_loop()
    deadline = loop.time() + PATIENCE
    while len(got) < wanted:
        assert loop.time() < deadline, f"reserved only {len(got)} of {wanted} jobs"
        got += await queue.reserve("shared", limit=wanted - len(got))
    return got


@pytest.mark.timeout(180)
async def test_the_partitions_of_a_worker_that_died_are_taken_over_with_its_jobs(
    topics: Any, open_kafka: Opener
) -> None:
    await topics("shared", partitions=PARTITIONS)
    locks = shared_locks()
    # Long enough that the dead member's first lease is still held after its third reserve
    # on a busy machine (1.5 s was not, once, under three test processes on two cores).
    lease = timedelta(seconds=3)
    survivor, doomed = open_kafka(locks, lease=lease), open_kafka(locks, lease=lease)
    total = 600
    await push_ticks(survivor, total)
    book = Book()
    running = [started(survivor, book)]
    try:
        await until(lambda: len(held(survivor)) == PARTITIONS, "the survivor serves all six")
        # A member that takes its share, three jobs on three partitions, then dies:
        # it never settles them, nor renews its leases or its seat.
        reserved = await reserve_until(doomed, 3)
        assert len(held(doomed)) == 3
        await until(lambda: len(held(survivor)) == PARTITIONS, "the survivor took all six again")
        await until(lambda: len(book.finished) == total, "every job finished")
    finally:
        await stopped(*running)

    ran_once_each(book, set(range(total)))
    orphaned = {r.job.payload["n"] for r in reserved}
    assert orphaned <= book.finished, "the jobs the dead member held ran on the survivor"


@pytest.mark.timeout(180)
async def test_partitions_nobody_takes_are_taken_above_the_share(
    topics: Any, open_kafka: Opener
) -> None:
    await topics("shared", partitions=PARTITIONS)
    locks = shared_locks()
    lease = timedelta(seconds=1.5)
    busy, slow = open_kafka(locks, lease=lease), open_kafka(locks, lease=lease)
    total = 900
    await push_ticks(busy, total)
    # A live member that serves one partition (one long job, its lease renewed) and
    # wants no more: two of the six would be left idle if the others kept to a share
    # of three.
    [long_job] = await reserve_until(slow, 1)
    assert isinstance(long_job.handle, KafkaPosition)

    async def renewing() -> None:
        while True:
            await asyncio.sleep(0.2)
            await slow.renew(long_job)

    renewer = asyncio.create_task(renewing())
    book = Book()
    running = [started(busy, book)]
    try:
        await until(lambda: len(held(busy)) == PARTITIONS - 1, "the busy worker serves five")
        assert held(slow) == [long_job.handle.partition]
        renewer.cancel()
        await slow.acknowledge(long_job)
        await slow.leave()
        await until(lambda: len(book.finished) == total - 1, "every other job finished")
    finally:
        renewer.cancel()
        await stopped(*running)

    ran_once_each(book, set(range(total)) - {long_job.job.payload["n"]})
