# SPDX-License-Identifier: MIT
"""The records' layout, when a worker counts as gone, and the lookup's joins, on memory."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from rainier_queue import Job, JobContext, JobRegistry, QueueManager, Worker, WorkerOptions
from rainier_queue._clock import utcnow
from rainier_queue.drivers.memory import MemoryQueue
from rainier_queue.envelope import QueuedJob
from rainier_queue.jobstate import (
    GONE_AFTER,
    Outcome,
    RunningJob,
    WorkerBeat,
    keep_record_for,
    worker_key,
)


def a_beat(**changes: object) -> WorkerBeat:
    now = utcnow()
    fields: dict[str, object] = {
        "worker_id": "web-1:42:abc",
        "host": "web-1",
        "pid": 42,
        "queues": ("mail", "default"),
        "concurrency": 4,
        "started_at": now - timedelta(minutes=5),
        "last_beat": now,
        "running": (RunningJob(job_id="j1", name="send", queue="mail", attempt=2, started_at=now),),
        "processed": 10,
        "retried": 2,
        "failed": 1,
    }
    fields.update(changes)
    return WorkerBeat(**fields)  # type: ignore[arg-type]


def test_a_heartbeat_and_an_outcome_read_back_as_they_were_written() -> None:
    beat = a_beat()
    outcome = Outcome(
        job_id="j1",
        name="send",
        queue="mail",
        attempt=1,
        finished_at=utcnow(),
        worker="web-1:42:abc",
        has_result=True,
        result={"sent": [1, 2]},
    )
    assert WorkerBeat.from_json(beat.to_json()) == beat
    assert Outcome.from_json(outcome.to_json()) == outcome


def test_a_worker_is_gone_after_a_minute_without_a_beat_or_six_of_its_own_beats() -> None:
    now = utcnow()
    assert not a_beat(last_beat=now - GONE_AFTER + timedelta(seconds=1)).is_gone(now)
    assert a_beat(last_beat=now - GONE_AFTER - timedelta(seconds=1)).is_gone(now)
    slow = a_beat(last_beat=now - timedelta(minutes=5), every=timedelta(minutes=1))
    assert not slow.is_gone(now)


def test_the_keep_record_header_is_read_as_seconds_and_ignored_when_it_is_not_one() -> None:
    assert keep_record_for({"rq-keep-record": "86400"}) == timedelta(days=1)
    assert keep_record_for({"rq-keep-record": "soon"}) is None
    assert keep_record_for({"rq-keep-record": "0"}) is None
    assert keep_record_for({}) is None


async def test_a_reserved_job_whose_lease_lapsed_is_queued_again_and_says_why() -> None:
    queue = MemoryQueue(lease=timedelta(milliseconds=1))
    manager = QueueManager(queue)
    job = QueuedJob.create("lapsing", None)
    await queue.push(job)
    [reserved] = await queue.reserve("default")
    assert reserved.lease_until is not None
    for _ in range(1000):  # a 1 ms lease: over at once
        if utcnow() > reserved.lease_until:
            break
        await asyncio.sleep(0.001)

    state = await manager.status(job.id)

    assert state.status == "queued"
    assert state.reason is not None
    assert "lease lapsed" in state.reason


async def test_a_heartbeat_that_is_not_one_is_left_out_of_the_workers() -> None:
    queue = MemoryQueue()
    await queue.put_record(worker_key("junk"), b"not json", timedelta(minutes=1))
    await queue.put_record(worker_key("ok"), a_beat().to_json(), timedelta(minutes=1))
    assert [b.worker_id for b in await QueueManager(queue).workers()] == ["web-1:42:abc"]


class Adds(Job):
    name = "unit-adds"
    keep_result = timedelta(minutes=1)
    a: int

    async def handle(self, ctx: JobContext) -> int:
        return self.a * 2


def test_the_blocking_facade_answers_status_result_and_workers() -> None:
    queue = MemoryQueue()
    registry = JobRegistry([Adds])
    manager = QueueManager(queue, registry=registry)
    with manager.blocking() as blocking:
        job_id = blocking.dispatch(Adds(a=21))
        assert job_id is not None
        assert blocking.status(job_id).status == "queued"
        options = WorkerOptions(stop_when_empty=True)
        blocking._call(lambda: Worker(queue, registry, options).run(), sends=False)
        assert blocking.result(job_id, timeout=5) == 42
        assert blocking.status(job_id).status == "succeeded"
        assert blocking.workers() == []


async def test_a_heartbeat_that_cannot_be_written_does_not_stop_the_worker(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Refusing(MemoryQueue):
        async def put_record(self, key: str, value: bytes, ttl: timedelta) -> None:
            raise ConnectionError("the store is down")

    queue = Refusing()
    registry = JobRegistry([Adds])
    await QueueManager(queue, registry=registry).dispatch(Adds(a=1))
    options = WorkerOptions(stop_when_empty=True, heartbeat=timedelta(milliseconds=10))
    stats = await Worker(queue, registry, options).run()
    assert stats.processed == 1
    assert "could not write this worker's heartbeat" in caplog.text
