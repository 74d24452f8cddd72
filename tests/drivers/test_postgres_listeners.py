# SPDX-License-Identifier: MIT
"""Queued listeners inside the application's own PostgreSQL transaction (`emit_in`).

The job an event queues exists exactly when the transaction that made the
event commits: a rollback takes it back with the order it announced.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass

import psycopg
import pytest

from rainier_queue import Job, JobContext, JobRegistry, QueuedListeners, QueueManager
from rainier_queue.drivers import open_queue
from rainier_queue.drivers.database.postgres import PostgresQueue
from rainier_queue.errors import UnsupportedOperation

from ..postgres import PG_URL, drop_prefixed, require_postgres


@dataclass
class OrderPlaced:
    order_id: int


class SendReceipt(Job):
    name = "send-receipt"
    order_id: int

    async def handle(self, ctx: JobContext) -> None:
        return None


class UniqueReceipt(SendReceipt):
    name = "unique-receipt"

    def unique_id(self) -> str:
        return str(self.order_id)


@pytest.fixture
async def queue() -> AsyncIterator[PostgresQueue]:
    require_postgres()
    prefix = f"rql{uuid.uuid4().hex[:10]}_"
    opened = open_queue(f"{PG_URL}?prefix={prefix}")
    assert isinstance(opened, PostgresQueue)
    await opened.migrate()
    yield opened
    await opened.aclose()
    await drop_prefixed(prefix)


def listening(queue: PostgresQueue) -> QueuedListeners:
    listeners = QueuedListeners(QueueManager(queue, registry=JobRegistry([SendReceipt])))
    listeners.on(OrderPlaced, lambda e: SendReceipt(order_id=e.order_id), queue="mail")
    return listeners


async def place_and_fail(conn: psycopg.AsyncConnection[object], listeners: QueuedListeners) -> None:
    """An order whose transaction fails after its event was emitted."""
    async with conn.transaction():
        await listeners.emit_in(conn, OrderPlaced(order_id=2))
        raise RuntimeError("the order failed, so it is rolled back")


async def test_a_job_queued_by_a_listener_in_a_transaction_exists_exactly_when_it_commits(
    queue: PostgresQueue,
) -> None:
    listeners = listening(queue)

    async with await psycopg.AsyncConnection.connect(PG_URL) as conn:
        async with conn.transaction():
            [job_id] = await listeners.emit_in(conn, OrderPlaced(order_id=1))
            assert await queue.size("mail") == 0, "invisible until the commit"
        with pytest.raises(RuntimeError, match="rolled back"):
            await place_and_fail(conn, listeners)

    [reserved] = await queue.reserve("mail", limit=5)
    assert (reserved.job.id, reserved.job.payload) == (job_id, {"order_id": 1})


async def test_a_unique_job_is_refused_in_a_transaction_and_nothing_is_queued(
    queue: PostgresQueue,
) -> None:
    listeners = listening(queue)
    listeners.on(OrderPlaced, lambda e: UniqueReceipt(order_id=e.order_id))

    async with await psycopg.AsyncConnection.connect(PG_URL) as conn, conn.transaction():
        with pytest.raises(UnsupportedOperation, match="unique job `unique-receipt`"):
            await listeners.emit_in(conn, OrderPlaced(order_id=3))

    assert await queue.size("mail") == 0
    assert await queue.size("default") == 0
