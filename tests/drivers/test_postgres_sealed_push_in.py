# SPDX-License-Identifier: MIT
"""A push inside the application's own PostgreSQL transaction seals like any other push.

`push_in` packs and writes the job itself, outside the manager, so it is
the one path onto a queue that seals in the driver (docs/encryption.md):
held here by reading the committed row with psycopg.
"""

from __future__ import annotations

import base64
import os
import uuid
from collections.abc import AsyncIterator

import psycopg
import pytest

from rainier_queue.connections import open_queue
from rainier_queue.drivers.database.postgres import PostgresQueue
from rainier_queue.drivers.database.postgres.push import COPY_FROM
from rainier_queue.envelope import QueuedJob

from ..postgres import PG_URL, drop_prefixed, require_postgres

pytestmark = pytest.mark.timeout(60)

KEY = base64.urlsafe_b64encode(os.urandom(32)).decode()


@pytest.fixture
async def queue() -> AsyncIterator[PostgresQueue]:
    require_postgres()
    prefix = f"rqt{uuid.uuid4().hex[:10]}_"
    opened = open_queue(f"{PG_URL}?prefix={prefix}", {"encryption": {"keys": {"k1": KEY}}})
    assert isinstance(opened, PostgresQueue)
    try:
        yield opened
    finally:
        await opened.aclose()
        await drop_prefixed(prefix)


@pytest.mark.parametrize("count", [1, COPY_FROM], ids=["insert", "copy"])
async def test_a_job_pushed_in_a_transaction_is_stored_sealed(
    queue: PostgresQueue, count: int
) -> None:
    secret = f"card-{uuid.uuid4().hex}"
    jobs = [QueuedJob.create("pg-sealed", {"card": secret}) for _ in range(count)]
    async with await psycopg.AsyncConnection.connect(PG_URL) as conn, conn.transaction():
        await queue.push_many_in(conn, jobs)

    async with await psycopg.AsyncConnection.connect(PG_URL) as conn:
        rows = await (await conn.execute(f"SELECT payload FROM {queue.prefix}jobs")).fetchall()
    assert len(rows) == count
    assert all('"key":"k1"' in row[0] and secret not in row[0] for row in rows)
    keys = queue.payload_keys
    assert keys is not None
    got = await queue.reserve("default", limit=count)
    assert {keys.open(r.job)["card"] for r in got} == {secret}
