# SPDX-License-Identifier: MIT
"""Workers are visible, and results are kept when asked, on every driver that keeps records.

A driver declares `records` when it keeps small records with a time to live
beside its jobs. Workers write their heartbeat there (and remove it on a
clean stop), and a success someone asked about is recorded there before the
job is deleted. One that keeps none refuses `workers()` and `result()` with a
clear error, and its workers still run. Both are held here.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from rainier_queue import Job, JobContext, JobRegistry, QueueManager, Worker, WorkerOptions
from rainier_queue.context import Dependencies
from rainier_queue.errors import UnsupportedOperation
from rainier_queue.jobstate import RecordStore
from rainier_queue.lookup import JobFailedError, ResultNotKept
from rainier_queue.queue import Queue

WITHIN = 30.0
"""Seconds a poll waits for what a worker does (a loaded machine is slow, never wrong)."""


class Gate:
    """Holds a job's handler until the test opens it."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.open = asyncio.Event()


class Held(Job):
    name = "records-held"

    async def handle(self, ctx: JobContext) -> None:
        gate = ctx.resolve(Gate)
        gate.started.set()
        await gate.open.wait()


class Adds(Job):
    name = "records-adds"
    keep_result = timedelta(minutes=5)
    a: int
    b: int

    async def handle(self, ctx: JobContext) -> int:
        return self.a + self.b


class ReturnsASet(Job):
    name = "records-set"
    keep_result = timedelta(minutes=5)

    async def handle(self, ctx: JobContext) -> object:
        return {1, 2}


class Plain(Job):
    name = "records-plain"

    async def handle(self, ctx: JobContext) -> int:
        return 7


class Fails(Job):
    name = "records-fails"
    tries = 1
    keep_result = timedelta(minutes=5)

    async def handle(self, ctx: JobContext) -> None:
        raise ValueError("no stock")


class Flaky(Job):
    """Fails its first two attempts, then succeeds."""

    name = "records-flaky"
    tries = 3

    async def handle(self, ctx: JobContext) -> None:
        if ctx.attempt < 3:
            raise ValueError(f"flaky on attempt {ctx.attempt}")

    def backoff(self, attempt: int) -> timedelta:
        return timedelta(0)


REGISTRY = JobRegistry([Held, Adds, ReturnsASet, Plain, Fails, Flaky])


def keeping(queue: Queue) -> QueueManager:
    if not queue.capabilities.records:
        assert not isinstance(queue, RecordStore), f"{queue.name} keeps records but hides it"
        pytest.skip(f"{queue.name} declares it keeps no records")
    assert isinstance(queue, RecordStore), f"{queue.name} declares records it lacks"
    return QueueManager(queue, registry=REGISTRY)


async def until(check: Callable[[], Any]) -> Any:
    """Poll `check` (a coroutine function) until it returns something true."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WITHIN
    while True:
        value = await check()
        if value:
            return value
        if loop.time() > deadline:
            raise AssertionError("not seen in time")
        await asyncio.sleep(0.02)


def worker(queue: Queue, gate: Gate | None = None, **options: Any) -> Worker:
    return Worker(
        queue,
        REGISTRY,
        WorkerOptions(stop_when_empty=True, drain_wait=timedelta(0), concurrency=2, **options),
        dependencies=Dependencies([gate] if gate is not None else []),
    )


async def test_a_driver_without_records_refuses_workers_and_results_clearly(
    queue: Queue,
) -> None:
    if queue.capabilities.records:
        pytest.skip(f"{queue.name} keeps records")
    manager = QueueManager(queue, registry=REGISTRY)
    with pytest.raises(UnsupportedOperation, match=f"the {queue.name} driver keeps no records"):
        await manager.workers()
    with pytest.raises(UnsupportedOperation, match="cannot keep results"):
        await manager.result("01234567-89ab-7def-8123-456789abcdef", timeout=1)


async def test_records_expire_and_are_listed_by_the_start_of_their_name(queue: Queue) -> None:
    keeping(queue)
    assert isinstance(queue, RecordStore)
    await queue.put_record("worker:a", b'{"a":1}', timedelta(minutes=5))
    await queue.put_record("worker:b", b'{"b":1}', timedelta(minutes=5))
    await queue.put_record("job:x", b"x", timedelta(milliseconds=200))
    await queue.put_record("worker:a", b'{"a":2}', timedelta(minutes=5))

    assert sorted(await queue.records("worker:")) == [b'{"a":2}', b'{"b":1}']
    assert await queue.get_record("worker:a") == b'{"a":2}'
    assert await queue.forget_record("worker:b") is True
    assert await queue.forget_record("worker:b") is False
    assert await queue.records("worker:") == [b'{"a":2}']

    async def expired() -> bool:
        return await queue.get_record("job:x") is None and await queue.records("job:") == []

    await until(expired)
    await queue.forget_record("worker:a")


async def test_a_running_worker_is_listed_with_its_jobs_and_removed_when_it_stops(
    queue: Queue,
) -> None:
    manager = keeping(queue)
    gate = Gate()
    job_id = await manager.dispatch(Held())
    assert job_id is not None
    running = worker(queue, gate, heartbeat=timedelta(milliseconds=100))
    task = asyncio.create_task(running.run())
    await asyncio.wait_for(gate.started.wait(), WITHIN)

    async def listed() -> Any:
        beats = await manager.workers()
        return beats if beats and [r.job_id for r in beats[0].running] == [job_id] else None

    [beat] = await until(listed)
    state = await manager.status(job_id)
    gate.open.set()
    await task

    assert beat.worker_id == running.worker_id
    assert (beat.queues, beat.concurrency, beat.is_gone()) == (("default",), 2, False)
    assert beat.running[0].name == "records-held"
    assert beat.running[0].attempt == 1
    if queue.capabilities.job_lookup:
        assert (state.status, state.worker, state.attempts) == ("running", running.worker_id, 1)
        assert state.since == beat.running[0].started_at
    assert await manager.workers() == [], "a clean stop removes the heartbeat"


async def test_a_result_is_kept_when_the_job_asks_and_failures_and_misses_say_why(
    queue: Queue,
) -> None:
    manager = keeping(queue)
    adds = await manager.dispatch(Adds(a=2, b=3))
    unjson = await manager.dispatch(ReturnsASet())
    plain = await manager.dispatch(Plain())
    fails = await manager.dispatch(Fails())
    assert adds
    assert unjson
    assert plain
    assert fails
    waiting = asyncio.create_task(manager.result(adds, timeout=WITHIN))

    await worker(queue).run()

    assert await waiting == 5
    state = await manager.status(adds)
    assert (state.status, state.result, state.worker is not None) == ("succeeded", 5, True)
    with pytest.raises(ResultNotKept, match="is not JSON"):
        await manager.result(unjson, timeout=0)
    if queue.capabilities.job_lookup:
        with pytest.raises(JobFailedError, match="no stock"):
            await manager.result(fails, timeout=0)
        # Nobody asked to record it: a success leaves nothing behind.
        assert (await manager.status(plain)).status == "unknown"
        with pytest.raises(TimeoutError, match="unknown"):
            await manager.result(plain, timeout=0)


async def test_keep_succeeded_records_every_success_without_its_result(queue: Queue) -> None:
    manager = keeping(queue)
    plain = await manager.dispatch(Plain())
    assert plain is not None

    await worker(queue, keep_succeeded=timedelta(minutes=5)).run()

    state = await manager.status(plain)
    assert (state.status, state.has_result) == ("succeeded", False)
    with pytest.raises(ResultNotKept, match="no `keep_result`"):
        await manager.result(plain, timeout=0)


async def test_the_attempts_that_did_not_succeed_are_kept_with_their_errors(queue: Queue) -> None:
    manager = keeping(queue)
    flaky = await manager.dispatch(Flaky())
    assert flaky is not None

    running = worker(queue, keep_succeeded=timedelta(minutes=5))
    await running.run()

    state = await manager.status(flaky)
    assert state.status == "succeeded"
    assert [(a.number, a.error, a.worker) for a in state.attempt_history] == [
        (1, "ValueError: flaky on attempt 1", running.worker_id),
        (2, "ValueError: flaky on attempt 2", running.worker_id),
    ]
