# SPDX-License-Identifier: MIT
"""Jobs stored under an older schema are worked after the upgrade, on every SQL database.

Migration 3 moved the lease's end out of the indexed `due_at` into
`lease_until`. A database upgraded in place holds rows written the old way:
waiting, delayed, and reserved (with the lease's end in `due_at`), some of
them by a worker that is still running its job. Each must come out of the
upgrade as it went in: the waiting ones claimable, the delayed ones not yet,
a live lease still hiding its job (and still the old worker's to renew and
settle), a lapsed one claimable again.

The old tables are made by the shipped migrations 1 and 2, and the old
writes by the old statements, spelled out here as SQL.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import timedelta

import pytest

from rainier_queue.drivers.database import DatabaseQueue, row_for
from rainier_queue.drivers.database import schema as schema_module
from rainier_queue.drivers.database.dialect import Session
from rainier_queue.drivers.database.statements import ENVELOPE
from rainier_queue.envelope import QueuedJob
from rainier_queue.errors import BrokerError, LeaseLost
from rainier_queue.queue import Reservation

from .conftest import SQLOpener, migrations_up_to

pytestmark = pytest.mark.timeout(60)

HOUR_US = 3_600_000_000


@pytest.fixture
def before_migration_3() -> Iterator[Callable[[], None]]:
    """Migrations up to 2 only, as the previous release shipped them, until the
    test calls the function given (the upgrade to this code)."""
    with migrations_up_to(2) as upgrade:
        yield upgrade


def a_job(name: str, *, delay: timedelta | None = None) -> QueuedJob:
    return QueuedJob.create("upgrade", {"name": name}, max_attempts=5, delay=delay)


async def old_claim(queue: DatabaseQueue, job: QueuedJob, token: str, lease_us: int) -> None:
    """Reserve `job` as the code before migration 3 did: the lease's end went into due_at."""
    dialect, jobs = queue._dialect, queue._tables.jobs

    async def work(s: Session) -> None:
        now = await dialect.now(s)
        sql = dialect.sql(
            f"UPDATE {jobs} SET attempts = attempts + 1, reservation_token = ?, "
            "reserved_at = ?, due_at = ? WHERE id = ?"
        )
        assert await s.execute(sql, (token, now, now + lease_us, job.id)) == 1

    await dialect.run(work)


async def old_push(queue: DatabaseQueue, jobs: list[QueuedJob]) -> None:
    """Push `jobs` as the code before migration 7 did: no ordering_key column written."""
    dialect, table = queue._dialect, queue._tables.jobs
    await queue._ensure_schema()
    sql = dialect.sql(f"INSERT INTO {table} ({ENVELOPE}, due_at) VALUES ({', '.join('?' * 11)})")

    async def work(s: Session) -> None:
        for job in jobs:
            row = row_for(job)
            await s.execute(sql, (*row[:10], row[11]))

    await dialect.run(work)


def held(job: QueuedJob, token: str) -> Reservation:
    """The reservation an old worker still holds in memory."""
    return Reservation(job=job, token=token, lease_until=None, lease=timedelta(seconds=90))


async def write_old_rows(
    queue: DatabaseQueue,
) -> tuple[QueuedJob, QueuedJob, QueuedJob, QueuedJob]:
    waiting, delayed = a_job("waiting"), a_job("delayed", delay=timedelta(hours=1))
    live, lapsed = a_job("live"), a_job("lapsed")
    await old_push(queue, [waiting, delayed, live, lapsed])
    await old_claim(queue, live, "old-live", HOUR_US)
    await old_claim(queue, lapsed, "old-lapsed", -1_000_000)
    return waiting, delayed, live, lapsed


async def test_rows_written_before_the_lease_column_are_worked_after_it(
    sql_opener: SQLOpener, before_migration_3: Callable[[], None]
) -> None:
    upgrade = before_migration_3
    old = sql_opener()
    assert await old.migrate() == ["0001_jobs", "0002_failed_jobs"]
    waiting, delayed, live, lapsed = await write_old_rows(old)
    upgrade()

    queue = sql_opener()
    counts = await queue.counts("default")
    assert (counts.waiting, counts.delayed, counts.reserved) == (1, 1, 2)

    claimed = await queue.reserve("default", limit=10)

    by_id = {r.job.id: r for r in claimed}
    assert set(by_id) == {waiting.id, lapsed.id}
    assert by_id[waiting.id].job.attempts == 1
    assert by_id[lapsed.id].job.attempts == 2  # the old delivery counted, and this one
    last = schema_module.EXPECTED_VERSION
    assert await queue.schema_status() == (last, last)
    # The old worker whose lease lapsed has lost the job; the one still inside
    # its lease keeps it, renews it, and settles it.
    with pytest.raises(LeaseLost):
        await queue.acknowledge(held(lapsed, "old-lapsed"))
    await queue.renew(held(live, "old-live"))
    assert await queue.reserve("default", limit=10) == []
    await queue.acknowledge(held(live, "old-live"))
    for reservation in claimed:
        await queue.acknowledge(reservation)
    counts = await queue.counts("default")
    assert (counts.waiting, counts.delayed, counts.reserved) == (0, 1, 0)
    assert counts.next_due is not None
    assert abs((counts.next_due - delayed.available_at).total_seconds()) < 120


async def test_a_job_reserved_before_the_upgrade_comes_back_when_its_old_lease_ends(
    sql_opener: SQLOpener, before_migration_3: Callable[[], None]
) -> None:
    upgrade = before_migration_3
    old = sql_opener()
    await old.migrate()
    job = a_job("short lease")
    await old_push(old, [job])
    await old_claim(old, job, "old-short", 6_000_000)  # time for the upgrade, loaded
    upgrade()

    queue = sql_opener()
    assert await queue.reserve("default") == []
    batch: list[Reservation] = []
    for _ in range(50):  # a wait may end early: the contract allows it
        await queue.wait_for_work(["default"], timedelta(seconds=10))
        if batch := await queue.reserve("default"):
            break
    (again,) = batch

    assert again.job.id == job.id
    assert again.job.attempts == 2
    await queue.acknowledge(again)
    with pytest.raises(LeaseLost):
        await queue.acknowledge(held(job, "old-short"))


async def test_a_worker_from_before_the_upgrade_cannot_take_a_job_a_new_worker_holds(
    sql_opener: SQLOpener,
) -> None:
    # Old code claims by moving due_at and knows nothing of lease_until: left
    # running after the upgrade it would take jobs new workers hold. The
    # schema refuses its claim instead.
    queue = sql_opener()
    job = a_job("held")
    await queue.push(job)
    (reservation,) = await queue.reserve("default")

    with pytest.raises(BrokerError):
        await old_claim(queue, job, "old-worker", HOUR_US)

    await queue.renew(reservation)
    await queue.acknowledge(reservation)
    assert await queue.size("default") == 0


async def test_a_migration_numbered_below_one_applied_already_is_applied_all_the_same(
    sql_opener: SQLOpener,
) -> None:
    # Migrations are numbered across branches: 0007_ordering_keys reached some
    # databases before 0006_batches was merged. That 6 must still be applied.
    shipped = schema_module.MIGRATIONS
    schema_module.MIGRATIONS = tuple(m for m in shipped if m.version != 6)
    try:
        queue = sql_opener()
        assert "0007_ordering_keys" in await queue.migrate()
    finally:
        schema_module.MIGRATIONS = shipped
    last = schema_module.EXPECTED_VERSION
    assert await queue.schema_status() == (5, last)
    assert await sql_opener().migrate() == ["0006_batches"]
    assert await queue.schema_status() == (last, last)
    assert await sql_opener().migrate() == []
