# SPDX-License-Identifier: MIT
"""A PostgreSQL statement rolled back as a deadlock's victim is run again, not reported.

PostgreSQL breaks a deadlock by rolling back one side. Nothing of that
statement was applied, so running it again is safe, and reporting it as an
outage instead would leave the jobs it acknowledged to run a second time
once their leases lapse. The test makes a real deadlock against the queue's
own acknowledgement and checks that it lands.

How the queue's statement is made the victim: another connection locks the
second of two reserved jobs; the queue's `DELETE` locks the first and waits
for the second; the other connection then asks for the first. Each side
looks for a deadlock once it has waited its `deadlock_timeout`, and the
queue's (0.5 s) is far shorter than the other's (30 s), so the queue's
statement is the one rolled back.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import quote

import psycopg
import pytest

from rainier_queue.drivers import open_queue
from rainier_queue.drivers.database.postgres import PostgresQueue
from rainier_queue.envelope import QueuedJob

from ..postgres import PG_URL, drop_prefixed, require_postgres


@pytest.fixture
async def prefix() -> AsyncIterator[str]:
    require_postgres()
    name = f"rqd{uuid.uuid4().hex[:10]}_"
    yield name
    await drop_prefixed(name)


async def wait_until_blocked(admin: psycopg.AsyncConnection[Any], name: str) -> None:
    """Until the queue's connection (application_name `name`) waits on a row lock."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        cur = await admin.execute(
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE application_name = %s AND wait_event_type = 'Lock'",
            (name,),
        )
        row = await cur.fetchone()
        if row is not None and row[0]:
            return
        await asyncio.sleep(0.002)
    raise AssertionError("the queue's acknowledgement never waited on the other connection")


async def test_an_acknowledgement_chosen_as_a_deadlock_victim_is_run_again(prefix: str) -> None:
    app = f"rq-deadlock-{uuid.uuid4().hex[:6]}"
    settings = quote("-c deadlock_timeout=500ms")
    queue = open_queue(f"{PG_URL}?prefix={prefix}&application_name={app}&options={settings}")
    assert isinstance(queue, PostgresQueue)
    other = await psycopg.AsyncConnection.connect(PG_URL)
    admin: psycopg.AsyncConnection[Any] = await psycopg.AsyncConnection.connect(
        PG_URL, autocommit=True
    )
    try:
        await queue.push_many([QueuedJob.create("note", {"n": n}) for n in range(2)])
        first, second = sorted(await queue.reserve("default", limit=2), key=lambda r: r.job.id)
        jobs = f"{prefix}jobs"
        await other.execute("SET deadlock_timeout = '30s'")
        await other.execute(f"SELECT 1 FROM {jobs} WHERE id = %s FOR UPDATE", (second.job.id,))

        acknowledging = asyncio.create_task(queue.acknowledge_many([first, second]))
        await wait_until_blocked(admin, app)  # it holds the first job's row, wants the second
        # Now the other side wants the first: a deadlock, which the queue's side loses.
        await other.execute(f"SELECT 1 FROM {jobs} WHERE id = %s FOR UPDATE", (first.job.id,))
        await other.commit()

        outcomes = await asyncio.wait_for(acknowledging, 30)

        assert outcomes == [None, None]
        assert await queue.size("default") == 0
        assert await queue.reserve("default", limit=2) == []
    finally:
        await other.close()
        await admin.close()
        await queue.aclose()
