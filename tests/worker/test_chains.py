# SPDX-License-Identifier: MIT
"""Chains through a real worker: each step after the one before succeeded, the next step
written before the finished one is acknowledged, and a failure that stops the chain and
says where."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Sequence
from datetime import timedelta

import pytest

from rainier_queue import Dependencies, Job, JobContext, JobRegistry, QueueManager, chain
from rainier_queue.drivers.memory import MemoryQueue
from rainier_queue.errors import PayloadError
from rainier_queue.instrument import PortCall, QueueObserver
from rainier_queue.worker import Worker, WorkerOptions

from .jobs import Journal, journal_of


class Step(Job):
    name = "step"
    tries = 2
    text: str

    async def handle(self, ctx: JobContext) -> None:
        journal_of(ctx).ran.append(self.text)


class Broken(Job):
    name = "broken"
    tries = 1
    text: str

    async def handle(self, ctx: JobContext) -> None:
        journal_of(ctx).ran.append(self.text)
        raise RuntimeError(f"{self.text} breaks")


class Flaky(Job):
    name = "flaky-step"
    tries = 3
    text: str

    async def handle(self, ctx: JobContext) -> None:
        journal_of(ctx).ran.append(f"{self.text}#{ctx.attempt}")
        if ctx.attempt < 2:
            raise RuntimeError("not yet")

    def backoff(self, attempt: int) -> timedelta:
        return timedelta(0)


class OneTry(Job):
    """One try, which fails until the journal's gate is opened (its cause fixed)."""

    name = "one-try"
    tries = 1
    text: str

    async def handle(self, ctx: JobContext) -> None:
        journal = journal_of(ctx)
        journal.ran.append(self.text)
        if not journal.gate.is_set():
            raise RuntimeError(f"{self.text} cannot yet")


class Unique(Step):
    name = "unique-step"

    def unique_id(self) -> str:
        return self.text


REGISTRY = JobRegistry([Step, Broken, Flaky])


async def drain(
    queue: MemoryQueue,
    journal: Journal,
    *,
    observers: Sequence[QueueObserver] = (),
    registry: JobRegistry = REGISTRY,
) -> None:
    """Run a worker on `queue` until it is empty."""
    options = WorkerOptions(concurrency=4, stop_when_empty=True)
    worker = Worker(
        queue, registry, options, dependencies=Dependencies([journal]), observers=observers
    )
    await asyncio.wait_for(worker.run(), 30)


async def test_each_step_runs_after_the_one_before_it_succeeded() -> None:
    queue = MemoryQueue()
    journal = Journal()

    first = await chain(Step(text="a"), Flaky(text="b"), Step(text="c")).dispatch(
        QueueManager(queue, registry=REGISTRY)
    )
    assert first is not None
    assert await queue.size("default") == 1, "only the first step is queued at first"
    await drain(queue, journal)

    assert journal.ran == ["a", "b#1", "b#2", "c"], "a retry of a step is waited for"
    assert await queue.failed_jobs() == []


async def test_the_next_step_is_written_before_the_finished_step_is_acknowledged() -> None:
    queue = MemoryQueue()
    calls: list[tuple[str, tuple[str, ...]]] = []

    def observe(call: PortCall) -> None:
        if call.operation in ("push", "acknowledge"):
            calls.append((call.operation, tuple(j.payload["text"] for j in call.jobs)))

    await chain(Step(text="a"), Step(text="b")).dispatch(QueueManager(queue, registry=REGISTRY))
    await drain(queue, Journal(), observers=[observe])

    assert calls == [("push", ("b",)), ("acknowledge", ("a",)), ("acknowledge", ("b",))]


async def test_a_step_that_fails_for_good_stops_the_chain_and_its_failure_says_where() -> None:
    queue = MemoryQueue()
    journal = Journal()

    await chain(Step(text="a"), Broken(text="b"), Step(text="c"), Step(text="d")).dispatch(
        QueueManager(queue, registry=REGISTRY)
    )
    await drain(queue, journal)

    assert journal.ran == ["a", "b"]
    [failed] = await queue.failed_jobs()
    assert failed.job.name == "broken"
    assert "b breaks" in failed.error
    assert "step 2 of 4 of chain" in failed.error
    assert "not dispatched: `step`, `step`" in failed.error
    assert await queue.size("default") == 0

    # Retried (once its cause is fixed: here it fails again), the chain goes on from it.
    assert await queue.retry_failed(failed.job.id)
    await drain(queue, journal)
    assert journal.ran == ["a", "b", "b"], "it failed again, so still nothing after it"


async def test_a_retried_failed_step_goes_on_with_the_rest_of_the_chain_once_it_succeeds() -> None:
    queue = MemoryQueue()
    journal = Journal()
    registry = JobRegistry([Step, OneTry])
    await chain(Step(text="a"), OneTry(text="b"), Step(text="c")).dispatch(
        QueueManager(queue, registry=registry)
    )
    await drain(queue, journal, registry=registry)
    [failed] = await queue.failed_jobs()
    assert journal.ran == ["a", "b"]

    journal.gate.set()  # the cause is fixed
    assert await queue.retry_failed(failed.job.id)
    await drain(queue, journal, registry=registry)

    assert journal.ran == ["a", "b", "b", "c"]
    assert await queue.failed_jobs() == []


async def test_a_chain_is_checked_whole_when_it_is_dispatched() -> None:
    queue = MemoryQueue()
    manager = QueueManager(queue, registry=REGISTRY)

    class Carries(Job):
        name = "carries"
        thing: object

        async def handle(self, ctx: JobContext) -> None:
            return None

    with pytest.raises(PayloadError):
        await chain(Step(text="a"), Carries(thing=asyncio.Event())).dispatch(manager)
    with pytest.raises(ValueError, match="step 2, `unique-step`, is a unique job"):
        chain(Step(text="a"), Unique(text="b"))
    with pytest.raises(ValueError, match="at least two jobs"):
        chain(Step(text="a"))
    with pytest.raises(TypeError, match="chain step 2 is a str"):
        chain(Step(text="a"), "b")  # type: ignore[arg-type]
    assert await queue.size("default") == 0, "nothing queued by a chain refused"


async def test_the_fake_runs_a_chain_in_order_and_stops_it_at_a_failure() -> None:
    manager = QueueManager.fake(registry=REGISTRY)
    journal = Journal()
    await chain(Step(text="a"), Step(text="b")).dispatch(manager)
    await chain(Step(text="x"), Broken(text="y"), Step(text="z")).dispatch(manager)

    runs = await manager.run_all(dependencies=Dependencies([journal]), raise_failures=False)

    assert journal.ran == ["a", "x", "b", "y"]
    assert [run.succeeded for run in runs] == [True, True, True, False]
    manager.assert_pushed(Step, times=3)  # a, x, b: z was never pushed


async def test_on_a_connection_that_encrypts_no_later_step_travels_in_the_clear() -> None:
    pytest.importorskip("cryptography")
    from rainier_queue.envelope.sealing import KeyRing

    queue = MemoryQueue()
    queue.payload_keys = KeyRing({"k1": os.urandom(32)})
    journal = Journal()
    pushed: list[str] = []

    def observe(call: PortCall) -> None:
        if call.operation == "push":
            pushed.extend(json.dumps([j.payload, dict(j.headers)]) for j in call.jobs)

    manager = QueueManager(queue, registry=REGISTRY, observers=[observe])
    await chain(Step(text="first"), Step(text="second"), Step(text="third")).dispatch(manager)
    await drain(queue, journal, observers=[observe])

    assert journal.ran == ["first", "second", "third"], "each step opened and ran in turn"
    assert len(pushed) == 3, "the first step by dispatch, the next two by the worker"
    for stored in pushed:
        for text in ("first", "second", "third"):
            assert text not in stored, f"{text!r} travelled in the clear: {stored}"


async def test_a_worker_without_the_key_ring_fails_the_step_rather_than_push_a_sealed_one() -> None:
    pytest.importorskip("cryptography")
    from rainier_queue.envelope.sealing import KeyRing

    sealing = MemoryQueue()
    sealing.payload_keys = KeyRing({"k1": os.urandom(32)})
    await chain(Step(text="a"), Step(text="b")).dispatch(QueueManager(sealing, registry=REGISTRY))
    [queued] = [r.job for r in await sealing.reserve("default", limit=1)]

    # The first step's payload opened but the worker's queue has no ring for the next one.
    plain = sealing.payload_keys.open(queued)
    queue = MemoryQueue()
    await queue.push(queued.with_changes(payload=plain))
    await drain(queue, Journal())

    [failed] = await queue.failed_jobs()
    assert "has no key ring" in failed.error
    assert "`encryption`" in failed.error
    assert await queue.size("default") == 0, "nothing pushed sealed under the wrong id"
