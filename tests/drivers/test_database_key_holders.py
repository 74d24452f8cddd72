# SPDX-License-Identifier: MIT
"""A key held by a later row: the SQL databases' second ordering-key test.

Two producers can commit a key's jobs out of order: the one with the later `seq`
commits first, a worker claims it (nothing earlier is visible yet), and then the
earlier row appears. That earlier row has nothing before it, so only the second
test keeps it from running beside the first: no row of its key may hold a lease.
The held rows are found by `held_key` (schema migration 8), which a claim sets and
a release clears; a row reserved before migration 8 must come out of it holding its
key as well.

The out-of-order commit is made here by inserting the earlier row with the `seq` a
plain job had, after that job was worked: the state the race leaves, made on purpose.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from rainier_queue.drivers.database import DatabaseQueue, row_for
from rainier_queue.drivers.database.dialect import Session
from rainier_queue.drivers.database.statements import PUSHED
from rainier_queue.envelope import QueuedJob
from rainier_queue.job import ORDERING_KEY
from rainier_queue.queue import Reservation

from .conftest import SQLOpener, migrations_up_to

pytestmark = pytest.mark.timeout(60)


def keyed(name: str, key: str | None = "account-1") -> QueuedJob:
    headers = {ORDERING_KEY: key} if key else {}
    return QueuedJob.create("keyed", {"name": name}, headers=headers)


async def seq_of(queue: DatabaseQueue, job: QueuedJob) -> int:
    dialect, jobs = queue._dialect, queue._tables.jobs
    sql = dialect.sql(f"SELECT seq FROM {jobs} WHERE id = ?")
    rows = await dialect.run(lambda s: s.fetchall(sql, (job.id,)), write=False)
    return int(rows[0][0])


async def insert_at(queue: DatabaseQueue, job: QueuedJob, seq: int) -> None:
    """Write `job`'s row under `seq`: a push whose commit came after a later one's."""
    dialect, jobs = queue._dialect, queue._tables.jobs
    row = row_for(job)
    sql = dialect.sql(
        f"INSERT INTO {jobs} (seq, {PUSHED}, due_at) VALUES ({', '.join('?' * (len(row) + 1))})"
    )

    async def work(s: Session) -> None:
        await s.execute(sql, (seq, *row))

    await dialect.run(work)


async def a_later_row_holding_the_key(queue: DatabaseQueue) -> tuple[Reservation, QueuedJob]:
    """The key `account-1` held by a reserved row, and an earlier row of it waiting."""
    plain, later, earlier = keyed("plain", None), keyed("later"), keyed("earlier")
    await queue.push_many([plain, later])
    taken = await queue.reserve("default", limit=2)
    assert [r.job.id for r in taken] == [plain.id, later.id]
    free_seq = await seq_of(queue, plain)
    await queue.acknowledge(taken[0])
    await insert_at(queue, earlier, free_seq)
    return taken[1], earlier


async def test_an_earlier_row_waits_while_a_later_one_of_its_key_holds_a_lease(
    sql_opener: SQLOpener,
) -> None:
    queue = sql_opener()
    holder, earlier = await a_later_row_holding_the_key(queue)
    other = keyed("other key", "account-2")
    await queue.push(other)

    assert [r.job.id for r in await queue.reserve("default", limit=5)] == [other.id]
    await queue.renew(holder)
    assert await queue.reserve("default", limit=5) == []

    await queue.acknowledge(holder)
    (next_one,) = await queue.reserve("default", limit=5)
    assert next_one.job.id == earlier.id


async def test_a_released_row_lets_go_of_its_key_and_the_earlier_row_goes_first(
    sql_opener: SQLOpener,
) -> None:
    queue = sql_opener()
    holder, earlier = await a_later_row_holding_the_key(queue)

    await queue.release(holder)

    (first,) = await queue.reserve("default", limit=5)
    assert first.job.id == earlier.id  # the later row waits behind it now, as pushed
    await queue.acknowledge(first)
    (second,) = await queue.reserve("default", limit=5)
    assert second.job.id == holder.job.id


@pytest.fixture
def before_migration_8() -> Iterator[Callable[[], None]]:
    """The schema as migration 7 left it, until the test calls the function given."""
    with migrations_up_to(7) as upgrade:
        yield upgrade


async def test_a_row_reserved_before_migration_8_still_holds_its_key_after_it(
    sql_opener: SQLOpener, before_migration_8: Callable[[], None]
) -> None:
    old = sql_opener()
    await old.migrate()
    plain, later, earlier = keyed("plain", None), keyed("later"), keyed("earlier")
    await old.push_many([plain, later])
    dialect, jobs = old._dialect, old._tables.jobs
    claim = dialect.sql(  # as migration 7's code claimed: no held_key to write
        f"UPDATE {jobs} SET attempts = attempts + 1, reservation_token = ?, reserved_at = ?, "
        "lease_until = ? WHERE id = ?"
    )

    async def old_claim(s: Session) -> None:
        now = await dialect.now(s)
        assert await s.execute(claim, ("old-token", now, now + 3_600_000_000, later.id)) == 1

    await dialect.run(old_claim)
    free_seq = await seq_of(old, plain)
    await dialect.run(
        lambda s: s.execute(dialect.sql(f"DELETE FROM {jobs} WHERE id = ?"), (plain.id,))
    )
    await insert_at(old, earlier, free_seq)
    before_migration_8()

    queue = sql_opener()
    assert "0008_held_keys" in await queue.migrate()
    assert await queue.reserve("default", limit=5) == []
