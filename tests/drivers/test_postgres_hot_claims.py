# SPDX-License-Identifier: MIT
"""A claim of a job without an ordering key writes no index entry on PostgreSQL.

PostgreSQL updates a row in place on its page, with no new index entry (a HOT
update), only when the update changes no column that any index of the table names,
in its key, its expressions or its predicate. A claim writes the lease columns, so
one index that names any of them costs every claim an entry in every index, and a
long drain bloats them all: schema migration 7's `jobs_ordering_held` did that, and
a million-job backlog drained at a twentieth of its speed. These tests hold the
line: first by reading the indexes' definitions, then by counting the HOT updates
that real claims made.
"""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import AsyncIterator

import psycopg
import pytest

from rainier_queue.drivers.database.postgres import PostgresQueue
from rainier_queue.envelope import QueuedJob

from ..postgres import PG_URL, drop_prefixed, require_postgres

pytestmark = pytest.mark.timeout(60)

CLAIM_WRITES = ("attempts", "reservation_token", "reserved_at", "lease_until")
"""The columns a claim of a row without an ordering key changes."""


@pytest.fixture
async def queue() -> AsyncIterator[PostgresQueue]:
    require_postgres()
    prefix = f"hot{uuid.uuid4().hex[:10]}_"
    opened = PostgresQueue(PG_URL, prefix=prefix)
    await opened.migrate()
    yield opened
    await opened.aclose()
    await drop_prefixed(prefix)


async def fetch(sql: str, *params: object) -> list[tuple[object, ...]]:
    async with await psycopg.AsyncConnection.connect(PG_URL) as conn:
        return await (await conn.execute(sql, params)).fetchall()


async def test_no_index_of_the_jobs_table_names_a_column_a_plain_claim_changes(
    queue: PostgresQueue,
) -> None:
    rows = await fetch(
        "SELECT pg_get_indexdef(indexrelid) FROM pg_index WHERE indrelid = %s::regclass",
        queue._tables.jobs,
    )
    definitions = [str(row[0]) for row in rows]
    assert len(definitions) >= 4, definitions  # the key, id, due order, ordering keys
    for definition in definitions:
        for column in CLAIM_WRITES:
            assert not re.search(rf"\b{column}\b", definition), (
                f"{definition} names {column}, which every claim changes: no claim "
                "can be a HOT update"
            )


async def test_most_claims_of_plain_jobs_are_hot_updates(queue: PostgresQueue) -> None:
    count = 400
    await queue.push_many([QueuedJob.create("plain", n) for n in range(count)])
    claimed = 0
    while batch := await queue.reserve("default", limit=50):
        claimed += len(batch)
        await queue.acknowledge_many(batch)
    assert claimed == count
    await queue.aclose()  # a server process sends its counts on when it ends

    stats: tuple[object, ...] = (0, 0)
    for _ in range(200):  # the counts arrive a little after the connections close
        rows = await fetch(
            "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relid = %s::regclass",
            queue._tables.jobs,
        )
        stats = rows[0]
        if int(str(stats[0])) >= count:
            break
        await asyncio.sleep(0.05)
    updates, hot = (int(str(value)) for value in stats)
    assert updates >= count, f"the statistics never showed the {count} claims: {stats}"
    assert hot * 2 > updates, f"{hot} of {updates} claims were HOT updates"
