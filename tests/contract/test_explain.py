# SPDX-License-Identifier: MIT
"""`explain`: why a job is not running, per case, on every driver where the case can arise.

Which cases a driver can answer follows from what it declares: finding a job
by id (`job_lookup`) for every state held in storage, worker heartbeats
(`records`) for who holds a job and whether anyone serves its queue, and
pause marks (`pausable`). A driver that cannot look a job up gets the
"cannot look up" answer, with what to use instead; that is held here too.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

import pytest

from rainier_queue import Job, JobContext, JobRegistry, QueueManager, Worker, WorkerOptions
from rainier_queue._clock import utcnow
from rainier_queue.context import Dependencies
from rainier_queue.explain import Explanation, explain
from rainier_queue.job import ORDERING_KEY
from rainier_queue.jobstate import OrderingLookup, RecordStore, RunningJob, WorkerBeat, worker_key
from rainier_queue.overview import overview
from rainier_queue.queue import Pausable, Queue

from .jobs import a_job, reserve_one

WITHIN = 30.0
"""Seconds a poll waits for what a worker does (a loaded machine is slow, never wrong)."""


class Gate:
    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.open = asyncio.Event()


class Held(Job):
    name = "explain-held"

    async def handle(self, ctx: JobContext) -> None:
        gate = ctx.resolve(Gate)
        gate.started.set()
        await gate.open.wait()


class Plain(Job):
    name = "explain-plain"

    async def handle(self, ctx: JobContext) -> None:
        return None


REGISTRY = JobRegistry([Held, Plain])


def needs(queue: Queue, *flags: str) -> None:
    for flag in flags:
        if not getattr(queue.capabilities, flag):
            pytest.skip(f"{queue.name} does not declare {flag}")


async def until(check: Callable[[], Awaitable[Any]]) -> Any:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WITHIN
    while True:
        value = await check()
        if value:
            return value
        if loop.time() > deadline:
            raise AssertionError("not seen in time")
        await asyncio.sleep(0.05)


def codes(answer: Explanation) -> list[str]:
    return [cause.code for cause in answer.causes]


def text(answer: Explanation) -> str:
    return "\n".join(answer.lines)


async def test_a_driver_that_cannot_look_up_says_so_and_what_to_use_instead(queue: Queue) -> None:
    if queue.capabilities.job_lookup:
        pytest.skip(f"{queue.name} can look a job up by id")
    answer = await explain(queue, "01234567-89ab-7def-8123-456789abcdef")

    assert answer.code == "cannot_look_up"
    assert f"the {queue.name} driver cannot look a job up by id" in text(answer)
    assert "`rainier-queue size --states`" in text(answer)
    assert ("`rainier-queue jobs --running`" in text(answer)) == queue.capabilities.records


async def test_an_id_nobody_knows_is_unknown_and_says_why(queue: Queue) -> None:
    needs(queue, "job_lookup")
    answer = await explain(queue, "01234567-89ab-7def-8123-456789abcdef")

    assert answer.code == "unknown"
    assert "no such job" in text(answer)
    assert answer.to_data()["code"] == "unknown"


async def test_a_delayed_job_is_not_due_until_its_time_and_a_retry_says_it_backs_off(
    queue: Queue,
) -> None:
    needs(queue, "job_lookup")
    later = a_job(delay=timedelta(hours=1))
    await queue.push(later)
    retried = a_job(queue="retries")
    await queue.push(retried)
    await queue.release(await reserve_one(queue, "retries"), delay=timedelta(hours=2))

    delayed = await explain(queue, later.id)
    backing_off = await explain(queue, retried.id)

    assert delayed.code == "not_due"
    assert "not due until" in text(delayed)
    assert "dispatched with a delay" in text(delayed)
    assert delayed.state.due_at is not None
    assert delayed.state.due_at.strftime("%Y-%m-%d %H:%M:%S") in text(delayed)
    assert backing_off.code == "not_due"
    assert "attempt 1 failed" in text(backing_off)
    assert "retry backoff" in text(backing_off)


async def test_a_job_in_a_paused_queue_says_so_and_names_the_resume_command(
    queue: Queue,
) -> None:
    needs(queue, "job_lookup", "pausable")
    assert isinstance(queue, Pausable)
    job = a_job()
    await queue.push(job)
    await queue.pause("default")
    try:
        paused = await explain(queue, job.id)
    finally:
        await queue.resume("default")
    resumed = await explain(queue, job.id)

    assert paused.code == "paused"
    assert "its queue `default` is paused" in text(paused)
    assert "`rainier-queue resume default`" in text(paused)
    assert "paused" not in codes(resumed)


async def test_a_job_no_live_worker_serves_says_so_with_or_without_gone_workers(
    queue: Queue,
) -> None:
    needs(queue, "job_lookup", "records")
    assert isinstance(queue, RecordStore)
    job = a_job(queue="lonely")
    await queue.push(job)

    nobody = await explain(queue, job.id)
    await queue.put_record(
        worker_key("dead:1:x"), _beat("dead:1:x", minutes_ago=5).to_json(), timedelta(minutes=5)
    )
    after_a_death = await explain(queue, job.id)
    leaving = dataclasses.replace(_beat("leaving:1:z", minutes_ago=0), stopping=True)
    await queue.put_record(worker_key(leaving.worker_id), leaving.to_json(), timedelta(minutes=5))
    while_one_stops = await explain(queue, job.id)
    await queue.forget_record(worker_key(leaving.worker_id))

    assert nobody.code == "no_worker"
    assert "no live worker serves queue `lonely`" in text(nobody)
    assert "no worker has a heartbeat on this connection" in text(nobody)
    assert "`rainier-queue work --queue lonely`" in text(nobody)
    assert after_a_death.code == "no_worker"
    assert "no worker has beaten in 5m" in text(after_a_death)
    assert while_one_stops.code == "no_worker"
    assert "the workers still beating are stopping: leaving:1:z" in text(while_one_stops)
    await queue.forget_record(worker_key("dead:1:x"))


async def test_a_job_held_by_a_live_worker_names_it_and_a_job_elsewhere_names_what_it_serves(
    queue: Queue,
) -> None:
    needs(queue, "records")
    manager = QueueManager(queue, registry=REGISTRY)
    gate = Gate()
    held = await manager.dispatch(Held())
    waiting = await manager.dispatch(Plain())
    elsewhere = await manager.dispatch(Plain(), queue="elsewhere")
    assert held
    assert waiting
    assert elsewhere
    worker = Worker(
        queue,
        REGISTRY,
        WorkerOptions(concurrency=1, reserve_ahead=0, heartbeat=timedelta(milliseconds=100)),
        dependencies=Dependencies([gate]),
    )
    task = asyncio.create_task(worker.run())
    try:
        await asyncio.wait_for(gate.started.wait(), WITHIN)

        async def listed() -> Explanation | None:
            answer = await explain(queue, held)
            return answer if answer.code == "running" else None

        running = await until(listed)
        in_line = await explain(queue, waiting)
        other = await explain(queue, elsewhere)
    finally:
        gate.open.set()
        worker.stop()
        await asyncio.wait_for(task, WITHIN)

    assert f"leased by worker {worker.worker_id} on host " in text(running)
    assert "the worker is alive" in text(running)
    if not queue.capabilities.job_lookup:  # the heartbeat is the one witness there
        assert "cannot look a job up by id: this is what the worker's heartbeat" in text(running)
        assert (in_line.code, other.code) == ("cannot_look_up", "cannot_look_up")
        return
    assert in_line.code == "waiting"
    assert f"served by {worker.worker_id}" in text(in_line)
    assert other.code == "no_worker"
    assert "no live worker serves queue `elsewhere`; live workers serve `default`" in text(other)


async def test_a_job_held_by_a_gone_worker_says_it_comes_back_when_its_lease_ends(
    queue: Queue,
) -> None:
    needs(queue, "records")
    assert isinstance(queue, RecordStore)
    job = a_job()
    await queue.push(job)
    await reserve_one(queue)
    # What a worker that died leaves: its reservation, and its last heartbeat growing old.
    dead = _beat("dead:2:y", minutes_ago=3, running=job.id)
    await queue.put_record(worker_key(dead.worker_id), dead.to_json(), timedelta(minutes=5))
    waiting = a_job()
    await queue.push(waiting)

    answer = await explain(queue, job.id)
    seen = await overview(queue, ["default"])

    assert answer.code == "held_by_gone_worker"
    assert "leased by worker dead:2:y on host dead" in text(answer)
    assert "that worker is gone (no beat for 3m" in text(answer)
    if queue.capabilities.job_lookup:
        assert "the job comes back when its lease ends at" in text(answer)
    else:
        assert "the job comes back when its lease ends," in text(answer)
    assert seen is not None
    assert [(s.job_id, s.worker.worker_id) for s in seen.stranded] == [(job.id, "dead:2:y")]
    assert seen.looked_up == queue.capabilities.job_lookup
    assert [(u.queue, u.jobs) for u in seen.unserved] == [("default", 1)]
    await queue.forget_record(worker_key(dead.worker_id))


async def test_a_lapsed_lease_says_the_next_reserve_takes_it(short_lease_queue: Queue) -> None:
    queue = short_lease_queue
    needs(queue, "job_lookup", "reclaims_lapsed_leases")
    job = a_job()
    await queue.push(job)
    await queue.reserve("default")

    async def lapsed() -> Explanation | None:
        answer = await explain(queue, job.id)
        return answer if "lease_lapsed" in codes(answer) else None

    answer = await until(lapsed)

    assert "its lease ended at" in text(answer)
    assert "the next worker to reserve from `default` takes it again" in text(answer)


async def test_a_failed_job_gives_its_error_and_the_retry_command(queue: Queue) -> None:
    needs(queue, "job_lookup", "failed_listing")
    job = a_job(max_attempts=1)
    await queue.push(job)
    await queue.fail(await reserve_one(queue), "card declined\n\nTraceback: ...")

    answer = await explain(queue, job.id)

    assert answer.code == "failed"
    assert "it failed after 1 attempt(s): card declined" in text(answer)
    assert f"`rainier-queue retry {job.id}`" in text(answer)


async def test_a_recorded_success_says_it_is_done(queue: Queue) -> None:
    needs(queue, "records")
    manager = QueueManager(queue, registry=REGISTRY)
    job_id = await manager.dispatch(Plain())
    assert job_id is not None
    worker = Worker(
        queue,
        REGISTRY,
        WorkerOptions(
            stop_when_empty=True, drain_wait=timedelta(0), keep_succeeded=timedelta(minutes=5)
        ),
    )
    await worker.run()

    answer = await explain(queue, job_id)

    assert answer.code == "succeeded"
    assert f"on worker {worker.worker_id}" in text(answer)


async def test_overview_without_heartbeats_says_it_cannot_tell(queue: Queue) -> None:
    if queue.capabilities.records:
        pytest.skip(f"{queue.name} keeps heartbeats")
    assert await overview(queue, ["default"]) is None


def _beat(worker_id: str, *, minutes_ago: int, running: str | None = None) -> WorkerBeat:
    then = utcnow() - timedelta(minutes=minutes_ago)
    jobs = (
        (
            RunningJob(
                job_id=running, name="contract-job", queue="default", attempt=1, started_at=then
            ),
        )
        if running
        else ()
    )
    return WorkerBeat(
        worker_id=worker_id,
        host=worker_id.split(":")[0],
        pid=1,
        queues=("default",),
        concurrency=1,
        started_at=then,
        last_beat=then,
        running=jobs,
    )


async def test_a_job_behind_an_earlier_one_of_its_ordering_key_names_that_job(
    queue: Queue,
) -> None:
    if not queue.capabilities.ordering_keys:
        pytest.skip(f"{queue.name} keeps no ordering keys, and refuses a job with one")
    first = a_job(headers={ORDERING_KEY: "account-1"})
    second = a_job(headers={ORDERING_KEY: "account-1"})
    await queue.push(first)
    await queue.push(second)

    before = await explain(queue, second.id)
    running = await reserve_one(queue)
    while_it_runs = await explain(queue, second.id)
    head = await explain(queue, first.id)

    if not isinstance(queue, OrderingLookup):
        # Kafka and SQS FIFO keep the order in the broker, and cannot look a job up.
        assert before.code != "ordered_behind"
        return
    assert running.job.id == first.id
    for answer in (before, while_it_runs):
        assert answer.code == "ordered_behind"
        assert "waiting behind an earlier job with the same ordering key" in text(answer)
        assert first.id in text(answer)
    assert head.code != "ordered_behind", "the first of its key waits on nothing of its key"
    await queue.acknowledge(running)
    assert (await explain(queue, second.id)).code != "ordered_behind"
