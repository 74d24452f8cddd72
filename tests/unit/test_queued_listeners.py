# SPDX-License-Identifier: MIT
"""Queued listeners: an event becomes a dispatch, the job built when the event happens.

The first three tests pin the upstream's own checklist items for queued
listeners (upstream-spec §3, rainier-framework): an event with a queued
listener records one job with the copied field; no listener queues nothing;
with no queue bound the failure mentions `QueueManager`. The rest hold the
rules its design notes give (§4: the job is built at event time, ids copied,
not models) and what this port adds.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import timedelta

import pytest

from rainier_queue import Job, JobContext, JobRegistry, QueuedListeners, QueueManager
from rainier_queue.cache.memory import MemoryCache
from rainier_queue.drivers.memory import MemoryQueue
from rainier_queue.errors import ConfigurationError, PayloadError, UnsupportedOperation
from rainier_queue.locks import LockManager


@dataclass
class Order:
    """A live application object: what a job must never carry."""

    id: int
    total: int


@dataclass
class OrderPlaced:
    order: Order


@dataclass
class ExpressOrderPlaced(OrderPlaced):
    pass


@dataclass
class UserSignedUp:
    user_id: int


class SendReceipt(Job):
    name = "send-receipt"
    queue = "default"
    order_id: int
    total: int

    async def handle(self, ctx: JobContext) -> None:
        return None


class UniqueReceipt(SendReceipt):
    name = "unique-receipt"

    def unique_id(self) -> str:
        return str(self.order_id)


class CarriesAnything(Job):
    name = "carries-anything"
    thing: object

    async def handle(self, ctx: JobContext) -> None:
        return None


def receipt(event: OrderPlaced) -> SendReceipt:
    return SendReceipt(order_id=event.order.id, total=event.order.total)


REGISTRY = JobRegistry([SendReceipt, UniqueReceipt])


async def test_an_event_with_a_queued_listener_records_one_job_with_the_copied_field() -> None:
    manager = QueueManager.fake(registry=REGISTRY)
    listeners = QueuedListeners(manager)
    listeners.on(OrderPlaced, receipt, queue="mail")

    ids = await listeners.emit(OrderPlaced(Order(id=7, total=120)))

    manager.assert_pushed(SendReceipt, times=1, where=lambda job: job.order_id == 7)
    [envelope] = manager.pushed_envelopes(SendReceipt)
    assert ids == [envelope.id]
    assert envelope.queue == "mail"
    assert envelope.payload == {"order_id": 7, "total": 120}


async def test_no_listener_queues_nothing_and_needs_no_manager() -> None:
    manager = QueueManager.fake(registry=REGISTRY)
    listeners = QueuedListeners(manager)
    listeners.on(OrderPlaced, receipt)
    unbound = QueuedListeners()

    assert await listeners.emit(UserSignedUp(user_id=1)) == []
    assert await unbound.emit(OrderPlaced(Order(id=1, total=1))) == []
    manager.assert_nothing_pushed()


async def test_with_no_manager_bound_the_failure_names_queue_manager_and_how_to_bind() -> None:
    listeners = QueuedListeners()
    listeners.on(OrderPlaced, receipt)

    with pytest.raises(ConfigurationError, match="QueueManager") as failed:
        await listeners.emit(OrderPlaced(Order(id=1, total=1)))

    assert "listeners.bind(manager)" in str(failed.value)
    assert "OrderPlaced" in str(failed.value)


async def test_the_job_is_built_when_the_event_happens_not_when_a_worker_runs_it() -> None:
    manager = QueueManager.fake(registry=REGISTRY)
    listeners = QueuedListeners(manager)
    listeners.on(OrderPlaced, receipt)
    order = Order(id=7, total=120)

    await listeners.emit(OrderPlaced(order))
    order.total = 999  # the live object changes after the event

    [envelope] = manager.pushed_envelopes(SendReceipt)
    assert envelope.payload["total"] == 120, "the job carries what was true at the event"


async def test_a_listener_that_builds_a_job_carrying_a_live_object_fails_at_the_event() -> None:
    manager = QueueManager.fake(registry=JobRegistry([CarriesAnything]))
    listeners = QueuedListeners(manager)
    listeners.on(OrderPlaced, lambda e: CarriesAnything(thing=asyncio.Event()))

    with pytest.raises(PayloadError, match="has no JSON form"):
        await listeners.emit(OrderPlaced(Order(id=1, total=1)))

    manager.assert_nothing_pushed()


async def test_every_listener_queues_its_job_and_a_failing_builder_queues_none() -> None:
    manager = QueueManager.fake(registry=REGISTRY)
    listeners = QueuedListeners(manager)
    listeners.on(OrderPlaced, receipt)
    listeners.on(ExpressOrderPlaced, receipt, queue="express", delay=timedelta(minutes=5))
    listeners.on(OrderPlaced, lambda e: None)  # lets every event pass

    await listeners.emit(ExpressOrderPlaced(Order(id=2, total=5)))

    assert [e.queue for e in manager.pushed_envelopes(SendReceipt)] == ["default", "express"]
    express = manager.pushed_envelopes(SendReceipt)[1]
    assert express.available_at - express.created_at == timedelta(minutes=5)

    def broken(event: OrderPlaced) -> SendReceipt:
        raise LookupError("no such customer")

    listeners.on(OrderPlaced, broken)
    with pytest.raises(LookupError):
        await listeners.emit(OrderPlaced(Order(id=3, total=5)))
    assert len(manager.pushed_envelopes(SendReceipt)) == 2, "nothing of the failed event"


async def test_a_listener_that_returns_something_else_than_a_job_is_told_what_to_return() -> None:
    listeners = QueuedListeners(QueueManager.fake(registry=REGISTRY))
    listeners.on(OrderPlaced, lambda e: e.order)  # type: ignore[arg-type, return-value]

    with pytest.raises(TypeError, match="returned Order, not a Job"):
        await listeners.emit(OrderPlaced(Order(id=1, total=1)))


async def test_listeners_bound_later_dispatch_through_a_real_manager_as_a_dispatch_does() -> None:
    queue = MemoryQueue()
    locks = LockManager(MemoryCache())
    listeners = QueuedListeners()

    @listeners.on(OrderPlaced, queue="mail")
    def unique_receipt(event: OrderPlaced) -> UniqueReceipt:
        return UniqueReceipt(order_id=event.order.id, total=event.order.total)

    listeners.bind(QueueManager(queue, registry=REGISTRY, locks=locks))
    first = await listeners.emit(OrderPlaced(Order(id=4, total=1)))
    again = await listeners.emit(OrderPlaced(Order(id=4, total=1)))

    assert first[0] is not None
    assert again == [None], "the duplicate of a unique job is dropped, as by dispatch"
    assert await queue.size("mail") == 1


def test_a_view_without_an_event_loop_emits_through_the_blocking_facade() -> None:
    queue = MemoryQueue()
    manager = QueueManager(queue, registry=REGISTRY)
    listeners = QueuedListeners(manager)
    listeners.on(OrderPlaced, receipt)
    try:
        [job_id] = listeners.emit_blocking(OrderPlaced(Order(id=5, total=1)))
        assert job_id is not None
        assert manager.blocking().size("default") == 1
    finally:
        manager.blocking().close()


async def test_emitting_in_a_transaction_is_refused_where_the_driver_cannot() -> None:
    queue = MemoryQueue()
    listeners = QueuedListeners(QueueManager(queue, registry=REGISTRY))
    listeners.on(OrderPlaced, receipt)

    with pytest.raises(UnsupportedOperation, match="cannot push inside your transaction"):
        await listeners.emit_in(object(), OrderPlaced(Order(id=1, total=1)))

    assert await queue.size("default") == 0
