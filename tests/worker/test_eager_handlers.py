# SPDX-License-Identifier: MIT
"""An `async def` handler is stepped before its time limit and stop are set up.

Most short handlers return without ever suspending, and the worker spares
those the limit's and the stop's bookkeeping (`Runner.run`). These check
that a handler cannot tell: one that suspends is still limited from its
start, still cancelled by a stop, and runs in its job's own task and
context, whether it suspends at once, later, or never.
"""

from __future__ import annotations

import asyncio
import contextvars
import time
from dataclasses import dataclass, field
from datetime import timedelta

from rainier_queue import Dependencies, Job, JobContext, JobRegistry
from rainier_queue.drivers.memory import MemoryQueue
from rainier_queue.worker import Worker

from .jobs import PATIENCE, push, quick

SEEN: contextvars.ContextVar[str] = contextvars.ContextVar("eager_test_seen", default="unset")


@dataclass
class Notes:
    """What the handlers saw."""

    tasks: list[str] = field(default_factory=list)
    seen: list[str] = field(default_factory=list)
    timed_out_inside: int = 0
    started: asyncio.Event = field(default_factory=asyncio.Event)


def _task_name() -> str:
    task = asyncio.current_task()
    return "" if task is None else task.get_name()


class NeverAwaits(Job):
    name = "eager-never-awaits"
    tries = 1
    label: str

    async def handle(self, ctx: JobContext) -> str:
        notes = ctx.resolve(Notes)
        notes.tasks.append(_task_name())
        notes.seen.append(SEEN.get())
        SEEN.set(self.label)  # must not reach the next job
        return self.label


class AwaitsLater(Job):
    name = "eager-awaits-later"
    tries = 1
    label: str

    async def handle(self, ctx: JobContext) -> str:
        notes = ctx.resolve(Notes)
        before = _task_name()
        SEEN.set(self.label)
        for _ in range(3):
            await asyncio.sleep(0)
        notes.tasks.append(before)
        notes.tasks.append(_task_name())
        notes.seen.append(SEEN.get())
        return self.label


class OwnTimeout(Job):
    """Sets a timeout of its own before its first await: it must cancel this job alone."""

    name = "eager-own-timeout"
    tries = 1
    label: str

    async def handle(self, ctx: JobContext) -> None:
        notes = ctx.resolve(Notes)
        try:
            async with asyncio.timeout(0.01):
                await asyncio.Event().wait()
        except TimeoutError:
            notes.timed_out_inside += 1


class BlocksThenHangs(Job):
    """Spends longer than its limit before its first await, then waits for ever."""

    name = "eager-blocks-then-hangs"
    tries = 1
    timeout = timedelta(milliseconds=50)

    async def handle(self, ctx: JobContext) -> None:
        time.sleep(0.1)  # noqa: ASYNC251 (the point: it blocks before its first await)
        await asyncio.Event().wait()


class WaitsForStop(Job):
    name = "eager-waits-for-stop"
    tries = 3

    async def handle(self, ctx: JobContext) -> None:
        ctx.resolve(Notes).started.set()
        await asyncio.Event().wait()


class RaisesAtOnce(Job):
    name = "eager-raises-at-once"
    tries = 1

    async def handle(self, ctx: JobContext) -> None:
        raise ValueError("raised before any await")


REGISTRY = JobRegistry(
    [NeverAwaits, AwaitsLater, OwnTimeout, BlocksThenHangs, WaitsForStop, RaisesAtOnce]
)


def _worker(queue: MemoryQueue, notes: Notes, **options: object) -> Worker:
    settings: dict[str, object] = {"stop_when_empty": True, "concurrency": 1}
    settings.update(options)
    return Worker(queue, REGISTRY, quick(**settings), dependencies=Dependencies([notes]))


async def test_a_handler_that_never_awaits_runs_in_its_own_task_and_context() -> None:
    queue = MemoryQueue()
    first = await push(queue, NeverAwaits(label="one"))
    second = await push(queue, NeverAwaits(label="two"))
    notes = Notes()
    SEEN.set("the caller's")

    stats = await _worker(queue, notes).run()

    assert stats.processed == 2
    assert notes.tasks == [f"rainier-queue {j.name} {j.id}" for j in (first, second)]
    assert notes.seen == ["the caller's", "the caller's"], "a job's context is its own copy"
    assert SEEN.get() == "the caller's", "a handler's variables stay in its job's context"


async def test_a_handler_that_awaits_goes_on_in_the_same_task_and_context() -> None:
    queue = MemoryQueue()
    job = await push(queue, AwaitsLater(label="later"))
    notes = Notes()

    stats = await _worker(queue, notes).run()

    assert stats.processed == 1
    own = f"rainier-queue {job.name} {job.id}"
    assert notes.tasks == [own, own], "the task before the first await is the one after it"
    assert notes.seen == ["later"], "what it set before suspending, it still sees after"


async def test_a_timeout_a_handler_sets_itself_cancels_that_handler_alone() -> None:
    queue = MemoryQueue()
    for n in range(3):
        await push(queue, OwnTimeout(label=str(n)))
    notes = Notes()

    stats = await _worker(queue, notes, concurrency=3).run()

    assert notes.timed_out_inside == 3
    assert (stats.processed, stats.failed) == (3, 0)


async def test_a_handler_is_limited_from_its_start_not_from_its_first_await() -> None:
    queue = MemoryQueue()
    await push(queue, BlocksThenHangs())

    stats = await _worker(queue, Notes()).run()

    assert stats.failed == 1
    [failed] = await queue.failed_jobs()
    assert "exceeded its 0.05s timeout" in failed.error


async def test_a_handler_waiting_at_a_stop_is_cancelled_and_handed_back() -> None:
    queue = MemoryQueue()
    job = await push(queue, WaitsForStop())
    notes = Notes()
    worker = _worker(queue, notes, stop_when_empty=False, grace=timedelta(hours=1))
    running = asyncio.create_task(worker.run())
    await asyncio.wait_for(notes.started.wait(), PATIENCE)

    worker.stop(now=True)
    stats = await asyncio.wait_for(running, PATIENCE)

    assert stats.interrupted == 1
    [back] = await queue.reserve("default", limit=1)
    assert back.job.id == job.id
    assert back.job.attempts == 1, "the interrupted attempt was refunded"


async def test_a_handler_that_raises_before_any_await_fails_as_any_other() -> None:
    queue = MemoryQueue()
    await push(queue, RaisesAtOnce())

    stats = await _worker(queue, Notes()).run()

    assert stats.failed == 1
    [failed] = await queue.failed_jobs()
    assert failed.error.startswith("ValueError: raised before any await")
