# SPDX-License-Identifier: MIT
"""Ordering keys, both ways: where the driver says it keeps them, a key's jobs come out one
at a time in the order they were pushed, other keys go on beside them, a retry with a
backoff still holds its key and a failed job lets it go; where it says it cannot, a job
with a key is refused, naming the driver and what keeps order, and nothing is stored."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path

import pytest

from rainier_queue import Job, JobContext, JobRegistry, QueueManager
from rainier_queue.context import Dependencies
from rainier_queue.envelope import QueuedJob
from rainier_queue.errors import UnsupportedOperation
from rainier_queue.job import ORDERING_KEY
from rainier_queue.queue import Queue, Reservation
from rainier_queue.worker import Worker, WorkerOptions

from .backends import Backend
from .jobs import a_job

ENOUGH = timedelta(seconds=30)
"""How long a job that must come out may take (a liveness bound, not a timing assertion)."""


def keyed(payload: str, key: str | None, queue: str = "default") -> QueuedJob:
    return a_job(payload=payload, queue=queue, headers=None if key is None else {ORDERING_KEY: key})


@pytest.fixture
def ordered_queue(backend: Backend, tmp_path: Path, namespace: str, queue: Queue) -> Queue:
    if not queue.capabilities.ordering_keys:
        pytest.skip(f"{queue.name} keeps no ordering keys (its refusal is tested beside this)")
    backend.setup(tmp_path, namespace, ["default", "ordered"])
    return queue


async def take(queue: Queue, count: int, name: str = "default") -> list[Reservation]:
    """Reserve until `count` jobs came out (a driver may hand out fewer than asked per call)."""
    got: list[Reservation] = []
    loop = asyncio.get_running_loop()
    deadline = loop.time() + ENOUGH.total_seconds()
    while len(got) < count:
        got += await queue.reserve(name, limit=10)
        if len(got) >= count:
            break
        assert loop.time() < deadline, f"only {len(got)} of {count} jobs came out of {name!r}"
        await queue.wait_for_work([name], timedelta(milliseconds=200))
    return got


async def none_more(queue: Queue, name: str = "default") -> list[Reservation]:
    """What a few more reserves hand out now (nothing, when the rest wait on their key)."""
    more: list[Reservation] = []
    for _ in range(3):
        more += await queue.reserve(name, limit=10)
    return more


async def test_a_driver_that_keeps_no_ordering_keys_refuses_a_job_with_one_naming_itself(
    queue: Queue,
) -> None:
    if queue.capabilities.ordering_keys:
        pytest.skip(f"{queue.name} keeps ordering keys (what it does is tested beside this)")

    with pytest.raises(UnsupportedOperation, match=f"the {queue.name} driver") as refused:
        await queue.push(keyed("one", "account-7"))
    with pytest.raises(UnsupportedOperation, match="ordering key 'account-7'"):
        await queue.push_many([keyed("plain", None), keyed("two", "account-7")])

    assert "SQLite, PostgreSQL, MySQL/MariaDB, Redis, Kafka, SQS FIFO" in str(refused.value)
    assert "Nothing was queued" in str(refused.value)
    if queue.capabilities.deferred:
        assert await queue.size("default") == 0, "nothing of the refused batch was stored"
    plain = keyed("plain", None)
    assert await queue.push(plain) == plain.id, "a job without a key is taken as ever"


async def test_jobs_of_one_ordering_key_come_out_one_at_a_time_in_the_order_pushed(
    ordered_queue: Queue,
) -> None:
    jobs = [keyed(f"step {n}", "account-7") for n in range(4)]
    for job in jobs:  # one push each: the order of separate dispatches
        await ordered_queue.push(job)

    for job in jobs:
        (first,) = await take(ordered_queue, 1)
        assert first.job.id == job.id, f"expected {job.payload}, got {first.job.payload}"
        assert await none_more(ordered_queue) == [], "the next of the key waits for this one"
        await ordered_queue.acknowledge(first)
    assert await none_more(ordered_queue) == []


async def test_a_job_keeps_its_place_behind_its_key_in_one_bulk_push(
    ordered_queue: Queue,
) -> None:
    jobs = [keyed(f"bulk {n}", "tenant-a") for n in range(3)]
    await ordered_queue.push_many(jobs)

    seen = []
    for _ in jobs:
        (one,) = await take(ordered_queue, 1)
        seen.append(one.job.id)
        await ordered_queue.acknowledge(one)

    assert seen == [job.id for job in jobs]


async def test_other_keys_and_jobs_without_a_key_are_not_held_behind_a_key(
    ordered_queue: Queue,
) -> None:
    if not ordered_queue.capabilities.reserved_job_steps_aside:
        pytest.skip(
            f"{ordered_queue.name} hands out one job at a time per partition: two keys that "
            "hash to one partition share its line (docs/flow-control.md)"
        )
    first, second = keyed("a1", "key-a"), keyed("a2", "key-a")
    other, plain = keyed("b1", "key-b"), keyed("plain", None)
    for job in (first, second, other, plain):
        await ordered_queue.push(job)

    got = await take(ordered_queue, 3)
    got += await none_more(ordered_queue)

    assert {r.job.id for r in got} == {first.id, other.id, plain.id}
    for reservation in got:
        await ordered_queue.acknowledge(reservation)
    (last,) = await take(ordered_queue, 1)
    assert last.job.id == second.id


@pytest.mark.needs("ordered_retries")
async def test_a_retry_waiting_out_its_backoff_still_holds_its_key(
    ordered_queue: Queue,
) -> None:
    first, second = keyed("first", "account-9"), keyed("second", "account-9")
    await ordered_queue.push(first)
    await ordered_queue.push(second)
    (attempt,) = await take(ordered_queue, 1)
    assert attempt.job.id == first.id

    await ordered_queue.release(attempt, delay=timedelta(seconds=1))

    (again,) = await take(ordered_queue, 1)
    assert again.job.id == first.id, "the later job of the key did not overtake the retry"
    assert again.job.attempts == 2
    assert await none_more(ordered_queue) == []
    await ordered_queue.acknowledge(again)
    (after,) = await take(ordered_queue, 1)
    assert after.job.id == second.id


async def test_a_failed_job_lets_the_next_of_its_key_go(ordered_queue: Queue) -> None:
    first, second = keyed("doomed", "account-3"), keyed("next", "account-3")
    await ordered_queue.push(first)
    await ordered_queue.push(second)
    (attempt,) = await take(ordered_queue, 1)
    assert attempt.job.id == first.id
    assert await none_more(ordered_queue) == []

    await ordered_queue.fail(attempt, "it could not be done")

    (after,) = await take(ordered_queue, 1)
    assert after.job.id == second.id


@pytest.mark.needs("ordering_across_queues")
async def test_an_ordering_key_holds_across_the_queues_of_a_connection(
    ordered_queue: Queue,
) -> None:
    first, second = keyed("here", "account-5", "default"), keyed("there", "account-5", "ordered")
    await ordered_queue.push(first)
    await ordered_queue.push(second)

    assert await none_more(ordered_queue, "ordered") == [], "behind the job on `default`"
    (one,) = await take(ordered_queue, 1, "default")
    await ordered_queue.acknowledge(one)
    (two,) = await take(ordered_queue, 1, "ordered")
    assert two.job.id == second.id


class Step(Job):
    name = "ordering-step"
    account: str
    n: int

    def ordering_key(self) -> str:
        return f"account:{self.account}"

    async def handle(self, ctx: JobContext) -> None:
        log = ctx.resolve(RunLog)
        log.started(self.account, self.n)
        await asyncio.sleep(0.02)
        log.ended(self.account, self.n)


class RunLog:
    """Which steps ran, in order, and which were running at once."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, int]] = []
        self.running: dict[str, int] = {}
        self.overlaps: list[str] = []
        self.done = asyncio.Event()
        self.expected = 0

    def started(self, account: str, n: int) -> None:
        self.running[account] = self.running.get(account, 0) + 1
        if self.running[account] > 1:
            self.overlaps.append(f"{account} #{n}")
        self.events.append(("start", account, n))

    def ended(self, account: str, n: int) -> None:
        self.running[account] -= 1
        self.events.append(("end", account, n))
        if sum(1 for e in self.events if e[0] == "end") >= self.expected:
            self.done.set()


async def test_a_worker_runs_a_keys_jobs_in_dispatch_order_without_overlap(
    ordered_queue: Queue,
) -> None:
    log = RunLog()
    log.expected = 12
    manager = QueueManager(ordered_queue)
    for n in range(6):
        for account in ("a", "b"):
            await manager.dispatch(Step(account=account, n=n))
    options = WorkerOptions(queues=("default",), concurrency=4, sleep=timedelta(milliseconds=50))
    worker = Worker(ordered_queue, JobRegistry([Step]), options, dependencies=Dependencies([log]))
    running = asyncio.create_task(worker.run())
    try:
        await asyncio.wait_for(log.done.wait(), 120)
    finally:
        worker.stop()
        await asyncio.wait_for(running, 60)

    assert log.overlaps == []
    for account in ("a", "b"):
        starts = [n for kind, who, n in log.events if kind == "start" and who == account]
        assert starts == list(range(6))
