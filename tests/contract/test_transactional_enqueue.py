# SPDX-License-Identifier: MIT
"""Transactional enqueue, both ways: the job exists exactly when the application's
transaction commits, on every driver that declares it; the rest offer no `push_in`.

Each driver that declares `transactional_enqueue` hands the suite the
application's own connection to its store (`Backend.transaction`): psycopg on
PostgreSQL, aiomysql on MySQL/MariaDB, Python's sqlite3 on SQLite.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from rainier_queue.context import JobContext
from rainier_queue.errors import PayloadError
from rainier_queue.job import Job
from rainier_queue.queue import Queue, TransactionalEnqueue

from ..app_transactions import AppTransaction
from .backends import Backend
from .jobs import a_job


class Shipped(Job):
    name = "shipped"
    order: int

    def handle(self, ctx: JobContext) -> None:
        return None


async def _opened(backend: Backend, queue: Queue, tmp_path: Path) -> AppTransaction:
    if not queue.capabilities.transactional_enqueue:
        assert not isinstance(queue, TransactionalEnqueue), (
            f"{queue.name} offers push_in but declares no transactional enqueue"
        )
        pytest.skip(f"{queue.name} declares no transactional enqueue (and offers no push_in)")
    assert backend.transaction is not None, (
        f"{queue.name} declares transactional enqueue: give the suite the application's "
        f"connection (`transaction` in tests/contract/backend_{backend.name}.py)"
    )
    await queue.size("default")  # the tables first, as `rainier-queue provision` makes them
    return await backend.transaction(tmp_path)


async def test_a_job_pushed_in_a_committed_transaction_exists_from_the_commit(
    backend: Backend, queue: Queue, tmp_path: Path
) -> None:
    app = await _opened(backend, queue, tmp_path)
    try:
        assert isinstance(queue, TransactionalEnqueue)
        job_id = await queue.push_in(app.connection, a_job(payload="committed"))
        assert await queue.size("default") == 0, "invisible until the commit"
        await app.commit()
    finally:
        await app.close()

    [got] = await queue.reserve("default")
    assert (got.job.id, got.job.payload) == (job_id, "committed")


async def test_a_job_pushed_in_a_rolled_back_transaction_never_exists(
    backend: Backend, queue: Queue, tmp_path: Path
) -> None:
    app = await _opened(backend, queue, tmp_path)
    try:
        assert isinstance(queue, TransactionalEnqueue)
        await queue.push_in(app.connection, a_job(payload="rolled back"))
        await app.rollback()
    finally:
        await app.close()

    assert await queue.size("default") == 0
    assert await queue.reserve("default") == []


async def test_a_job_object_is_packed_and_a_bad_one_refused_leaving_the_transaction_usable(
    backend: Backend, queue: Queue, tmp_path: Path
) -> None:
    app = await _opened(backend, queue, tmp_path)
    try:
        assert isinstance(queue, TransactionalEnqueue)
        with pytest.raises(PayloadError):
            await queue.push_in(app.connection, a_job(payload={"when": datetime.now(UTC)}))
        job_id = await queue.push_in(app.connection, Shipped(order=7))
        await app.commit()
    finally:
        await app.close()

    [got] = await queue.reserve("default")
    assert (got.job.id, got.job.name, got.job.payload) == (job_id, "shipped", {"order": 7})
