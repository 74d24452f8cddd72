# SPDX-License-Identifier: MIT
"""Pausing a queue, both ways: where the driver says it can, workers take none of a paused
queue's jobs and pushes still land; where it says it cannot, the refusal is clear and
nothing is stored."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path

import pytest

from rainier_queue import Job, JobContext, JobRegistry, QueueManager
from rainier_queue.context import Dependencies
from rainier_queue.envelope import QueuedJob
from rainier_queue.errors import UnsupportedOperation
from rainier_queue.queue import Countable, Pausable, Queue
from rainier_queue.worker import Worker, WorkerOptions

from .backends import Backend
from .conftest import OpenQueue
from .jobs import a_job

QUICK_CHECK = timedelta(milliseconds=50)
"""The pause check the workers here run with, so a change is seen in a loop turn or two."""


class Ran:
    """What the `noted` jobs ran, in order, and a wake-up for whoever waits on it."""

    def __init__(self) -> None:
        self.names: list[tuple[str, int]] = []
        self.changed = asyncio.Event()

    async def until(self, count: int, within: float = 60) -> None:
        """Wait until `count` jobs ran (a liveness bound, not a timing assertion)."""

        async def enough() -> None:
            while len(self.names) < count:
                self.changed.clear()
                await self.changed.wait()

        await asyncio.wait_for(enough(), within)


class Noted(Job):
    name = "noted"
    n: int

    async def handle(self, ctx: JobContext) -> None:
        ran = ctx.resolve(Ran)
        ran.names.append((ctx.queue, self.n))
        ran.changed.set()


def noted(n: int, queue: str) -> QueuedJob:
    return a_job(name="noted", payload={"n": n}, queue=queue)


@pytest.fixture
def pausable_queue(backend: Backend, tmp_path: Path, namespace: str, queue: Queue) -> Queue:
    if not queue.capabilities.pausable:
        pytest.skip(f"{queue.name} cannot pause a queue (its refusal is tested beside this)")
    backend.setup(tmp_path, namespace, ["held", "other", "default"])
    return queue


@pytest.fixture
def ran() -> Ran:
    return Ran()


async def test_a_driver_can_pause_exactly_when_it_says_so(queue: Queue) -> None:
    offers = isinstance(queue, Pausable)

    assert offers == queue.capabilities.pausable, (
        f"{queue.name} declares pausable={queue.capabilities.pausable}"
    )


async def test_pausing_where_the_driver_cannot_is_refused_naming_it_and_stores_nothing(
    queue: Queue,
) -> None:
    if queue.capabilities.pausable:
        pytest.skip(f"{queue.name} can pause a queue (what a pause does is tested beside this)")
    manager = QueueManager(queue)

    with pytest.raises(UnsupportedOperation, match=f"the {queue.name} driver") as refused:
        await manager.pause("default")
    with pytest.raises(UnsupportedOperation, match="cannot pause a queue"):
        await manager.resume("default")

    assert "stop the workers that serve it" in str(refused.value)
    await queue.push(a_job(payload="still taken"))
    assert await queue.size("default") == 1


async def test_pausing_and_resuming_say_whether_they_changed_anything(
    pausable_queue: Queue,
) -> None:
    manager = QueueManager(pausable_queue)

    assert await manager.paused(["held", "other"]) == frozenset()
    assert await manager.pause("held") is True
    assert await manager.pause("held") is False, "paused already"
    assert await manager.paused(["held", "other"]) == frozenset({"held"})
    assert await manager.resume("held") is True
    assert await manager.resume("held") is False, "not paused any more"
    assert await manager.paused(["held", "other"]) == frozenset()
    assert await manager.pause("held") is True, "a queue resumed can be paused again"


async def test_a_paused_queue_still_takes_pushes_and_counts_them(pausable_queue: Queue) -> None:
    await QueueManager(pausable_queue).pause("held")

    await pausable_queue.push(a_job(queue="held", payload=1))
    await pausable_queue.push_many([a_job(queue="held", payload=n) for n in (2, 3)])

    assert await pausable_queue.size("held") == 3
    if isinstance(pausable_queue, Countable):
        assert (await pausable_queue.counts("held")).waiting == 3


async def test_a_pause_is_seen_through_another_connection_to_the_same_store(
    backend: Backend, pausable_queue: Queue, open_queue: OpenQueue
) -> None:
    if not pausable_queue.capabilities.shared_between_processes:
        pytest.skip(f"{pausable_queue.name} lives in one queue object: there is no other")
    elsewhere = open_queue()
    assert isinstance(elsewhere, Pausable)

    await QueueManager(pausable_queue).pause("held")
    assert await elsewhere.paused(["held", "other"]) == frozenset({"held"})

    await QueueManager(elsewhere).resume("held")
    assert await QueueManager(pausable_queue).paused(["held"]) == frozenset()


async def test_a_worker_takes_nothing_from_a_paused_queue_and_takes_it_again_once_resumed(
    pausable_queue: Queue, ran: Ran
) -> None:
    manager = QueueManager(pausable_queue)
    await manager.pause("held")
    # `held` comes first in the worker's order: had the pause been ignored, its jobs
    # would have run before `other`'s.
    await pausable_queue.push_many([noted(n, "held") for n in range(3)])
    await pausable_queue.push_many([noted(n, "other") for n in range(3)])
    options = WorkerOptions(
        queues=("held", "other"), concurrency=2, pause_check=QUICK_CHECK, sleep=QUICK_CHECK
    )
    worker = Worker(pausable_queue, JobRegistry([Noted]), options, dependencies=Dependencies([ran]))
    running = asyncio.create_task(worker.run())
    try:
        await ran.until(3)
        assert {queue for queue, _ in ran.names} == {"other"}
        assert await pausable_queue.size("held") == 3, "the paused queue's jobs wait"

        await manager.resume("held")
        await ran.until(6)
    finally:
        worker.stop(now=True)
        await asyncio.wait_for(running, 60)

    assert sorted(n for queue, n in ran.names if queue == "held") == [0, 1, 2]


async def test_a_running_worker_lets_go_of_a_queue_paused_under_it(
    pausable_queue: Queue, ran: Ran
) -> None:
    manager = QueueManager(pausable_queue)
    # Two queues, so the idle worker waits without a reserve out (`wait_and_reserve` is for
    # one queue): on NATS a fetch cut short by the pause can still be handed a job that
    # arrives before the fetch's own wait ends, which then waits out its lease.
    options = WorkerOptions(queues=("held", "other"), concurrency=1, pause_check=QUICK_CHECK)
    worker = Worker(pausable_queue, JobRegistry([Noted]), options, dependencies=Dependencies([ran]))
    running = asyncio.create_task(worker.run())
    try:
        await pausable_queue.push(noted(0, "held"))
        await ran.until(1)
        await manager.pause("held")
        # The watch reads the marks every QUICK_CHECK: two reads after the pause, it has
        # seen it; two more after the push, the worker has had its chance to take the job.
        await _reads_since(pausable_queue, 2)
        await pausable_queue.push(noted(1, "held"))
        await _reads_since(pausable_queue, 2)
        assert [n for _, n in ran.names] == [0], "nothing taken from the paused queue"

        await manager.resume("held")
        await ran.until(2)
    finally:
        worker.stop(now=True)
        await asyncio.wait_for(running, 60)

    assert ran.names == [("held", 0), ("held", 1)], "the job pushed while paused ran once resumed"


async def test_a_draining_worker_stops_leaving_a_paused_queue_s_jobs_and_says_so(
    pausable_queue: Queue, ran: Ran
) -> None:
    await QueueManager(pausable_queue).pause("held")
    await pausable_queue.push_many([noted(n, "held") for n in range(2)])
    await pausable_queue.push(noted(9, "other"))
    options = WorkerOptions(queues=("held", "other"), stop_when_empty=True, pause_check=QUICK_CHECK)
    worker = Worker(pausable_queue, JobRegistry([Noted]), options, dependencies=Dependencies([ran]))

    stats = await asyncio.wait_for(worker.run(), 120)

    assert ran.names == [("other", 9)]
    if isinstance(pausable_queue, Countable):
        assert stats.left is not None, "reported as work left"
        assert stats.left.total == 2
    assert await pausable_queue.size("held") == 2


async def _reads_since(queue: Queue, reads: int) -> None:
    """Wait until the worker's pause watch has read the marks `reads` more times."""
    assert isinstance(queue, Pausable)
    counter = _ReadCounter.on(queue)
    start = counter.count
    await asyncio.wait_for(counter.reached(start + reads), 60)


class _ReadCounter:
    """Counts the reads of a queue's paused marks, by wrapping its `paused` on the object."""

    def __init__(self, queue: Pausable) -> None:
        self.count = 0
        self._changed = asyncio.Event()
        inner = queue.paused

        async def counted(queues: object) -> frozenset[str]:
            result = await inner(queues)  # type: ignore[arg-type]
            self.count += 1
            self._changed.set()
            return result

        queue.paused = counted  # type: ignore[method-assign]

    @classmethod
    def on(cls, queue: Pausable) -> _ReadCounter:
        found = getattr(queue, "_test_read_counter", None)
        if found is None:
            found = cls(queue)
            queue._test_read_counter = found  # type: ignore[attr-defined]
        return found

    async def reached(self, count: int) -> None:
        while self.count < count:
            self._changed.clear()
            await self._changed.wait()
