# SPDX-License-Identifier: MIT
"""What only the PostgreSQL queue promises: wake-ups, transactional enqueue, its clock, its URL.

The generic behaviour (leases, fencing, the failed store) is the contract
suite's; these tests cover what follows from PostgreSQL itself.
"""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from rainier_queue import Job, JobContext
from rainier_queue.cache.postgres import PostgresCache
from rainier_queue.cache.stores import open_cache
from rainier_queue.drivers import open_queue
from rainier_queue.drivers.database.postgres import PostgresQueue
from rainier_queue.drivers.database.postgres import push as push_module
from rainier_queue.drivers.database.postgres.push import COPY_FROM
from rainier_queue.envelope import QueuedJob
from rainier_queue.errors import (
    BrokerRejected,
    ConfigurationError,
    LeaseLost,
    PayloadError,
)
from rainier_queue.queue import Diagnosable

from ..postgres import PG_URL, drop_prefixed, require_postgres

pytestmark = pytest.mark.timeout(60)


def a_job(payload: object = None, *, queue: str = "default") -> QueuedJob:
    return QueuedJob.create("pg-test", payload, queue=queue)


@pytest.fixture
async def prefix() -> AsyncIterator[str]:
    require_postgres()
    name = f"rqt{uuid.uuid4().hex[:10]}_"
    yield name
    await drop_prefixed(name)


@pytest.fixture
async def opened(prefix: str) -> AsyncIterator[Callable[..., PostgresQueue]]:
    queues: list[PostgresQueue] = []

    def opener(**options: Any) -> PostgresQueue:
        queue = open_queue(f"{PG_URL}?prefix={prefix}", options)
        assert isinstance(queue, PostgresQueue)
        queues.append(queue)
        return queue

    yield opener
    for queue in queues:
        await queue.aclose()


# -- LISTEN / NOTIFY --------------------------------------------------------------


async def test_a_push_to_another_queue_does_not_wake_the_worker(
    opened: Callable[..., PostgresQueue],
) -> None:
    worker_side, pusher = opened(), opened()
    await worker_side.migrate()
    while not worker_side.listening:
        await worker_side.wait_for_work(["emails"], timedelta(milliseconds=50))

    waiting = asyncio.create_task(worker_side.wait_for_work(["emails"], timedelta(seconds=30)))
    await asyncio.sleep(0.1)
    await pusher.push(a_job(queue="reports"))
    await asyncio.sleep(0.3)
    assert not waiting.done(), "a push to `reports` is no news for a worker on `emails`"
    await pusher.push(a_job(queue="emails"))
    await waiting


async def test_the_listener_coming_up_does_not_end_a_wait_with_nothing_to_do(
    opened: Callable[..., PostgresQueue],
) -> None:
    # The listener wakes every wait when it connects, so that a push made while
    # nobody listened is found; a wait that then finds nothing goes on waiting.
    # It used to end empty, and an idle worker's first wait was cut short.
    worker_side, pusher = opened(), opened()
    await worker_side.migrate()
    waiting = asyncio.create_task(worker_side.wait_for_work(["default"], timedelta(minutes=1)))
    for _ in range(1000):  # this wait started the listener; a liveness bound
        if worker_side.listening:
            break
        await asyncio.sleep(0.01)
    assert worker_side.listening
    await asyncio.sleep(0.3)  # its wake-up has been handled
    assert not waiting.done(), "the wait ended with nothing pushed"

    await pusher.push(a_job())
    await asyncio.wait_for(waiting, 10)  # a liveness bound, not a latency


async def test_a_worker_whose_listener_was_cut_off_still_finds_the_next_job(
    opened: Callable[..., PostgresQueue],
) -> None:
    worker_side, pusher = opened(), opened()
    await worker_side.migrate()
    while not worker_side.listening:
        await worker_side.wait_for_work(["default"], timedelta(milliseconds=50))

    async with await psycopg.AsyncConnection.connect(PG_URL, autocommit=True) as admin:
        cut = await admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE application_name = 'rainier-queue listener' AND query LIKE %s",
            (f"LISTEN%{worker_side.prefix}jobs%",),
        )
        assert [row[0] for row in await cut.fetchall()] == [True], "the listener was cut off"
    waiting = asyncio.create_task(worker_side.wait_for_work(["default"], timedelta(seconds=30)))
    await pusher.push(a_job("after the cut"))

    # Woken by the NOTIFY if the listener was back in time, else by its reconnect.
    await waiting
    assert [r.job.payload for r in await worker_side.reserve("default")] == ["after the cut"]


# -- transactional enqueue --------------------------------------------------------


async def test_a_job_pushed_in_a_committed_transaction_exists(
    opened: Callable[..., PostgresQueue],
) -> None:
    queue = opened()
    async with await psycopg.AsyncConnection.connect(PG_URL) as conn, conn.transaction():
        await conn.execute("SELECT 1")  # the application's own writes
        await queue.push_in(conn, a_job("committed"))
        assert await queue.size("default") == 0, "invisible until the commit"

    assert [r.job.payload for r in await queue.reserve("default")] == ["committed"]


@pytest.mark.parametrize("through", ["connection", "cursor"])
async def test_a_big_batch_pushed_in_a_transaction_goes_by_copy_and_exists_at_commit(
    opened: Callable[..., PostgresQueue], through: str
) -> None:
    queue = opened()
    jobs = [a_job(n) for n in range(3 * COPY_FROM)]
    async with await psycopg.AsyncConnection.connect(PG_URL) as conn, conn.transaction():
        if through == "cursor":
            async with conn.cursor() as cur:
                ids = await queue.push_many_in(cur, jobs)
        else:
            ids = await queue.push_many_in(conn, jobs)
        assert await queue.size("default") == 0, "invisible until the commit"

    got = await queue.reserve("default", limit=len(jobs))
    assert [r.job.id for r in got] == ids == [job.id for job in jobs]


async def test_a_bad_payload_in_a_big_transactional_batch_leaves_the_transaction_usable(
    opened: Callable[..., PostgresQueue],
) -> None:
    queue = opened()
    jobs = [a_job(n) for n in range(COPY_FROM)]
    jobs[-1] = a_job({"when": datetime.now(UTC)})
    async with await psycopg.AsyncConnection.connect(PG_URL) as conn, conn.transaction():
        with pytest.raises(PayloadError):
            await queue.push_many_in(conn, jobs)
        await queue.push_in(conn, a_job("after the bad batch"))  # still a working transaction

    assert [r.job.payload for r in await queue.reserve("default", limit=50)] == [
        "after the bad batch"
    ]


@pytest.mark.parametrize("batch", [2, COPY_FROM], ids=["one-insert", "copy"])
async def test_a_job_pushed_in_a_rolled_back_transaction_never_exists(
    opened: Callable[..., PostgresQueue], batch: int
) -> None:
    queue = opened()

    async def application_code(conn: psycopg.AsyncConnection[Any]) -> None:
        async with conn.transaction():
            await queue.push_many_in(conn, [a_job("rolled back") for _ in range(batch)])
            raise RuntimeError("the application's write failed")

    async with await psycopg.AsyncConnection.connect(PG_URL) as conn:
        with pytest.raises(RuntimeError):
            await application_code(conn)

    assert await queue.size("default") == 0
    assert await queue.reserve("default") == []


@pytest.mark.parametrize("batch", [1, COPY_FROM], ids=["one-insert", "copy"])
async def test_a_sync_connection_pushes_at_commit_and_not_at_rollback(
    opened: Callable[..., PostgresQueue], batch: int
) -> None:
    queue = opened()
    await queue.migrate()

    def application_code() -> None:
        with psycopg.connect(PG_URL) as conn:
            with conn.transaction():
                queue.push_many_in_sync(conn, [a_job("kept") for _ in range(batch)])
            try:
                with conn.transaction():
                    with conn.cursor() as cur:
                        queue.push_many_in_sync(cur, [a_job("dropped") for _ in range(batch)])
                    raise LookupError("rolled back")
            except LookupError:
                pass

    await asyncio.to_thread(application_code)

    got = await queue.reserve("default", limit=3 * batch)
    assert [r.job.payload for r in got] == ["kept"] * batch


@pytest.mark.parametrize("batch", [1, COPY_FROM], ids=["one-insert", "copy"])
async def test_a_commit_wakes_a_waiting_worker(
    opened: Callable[..., PostgresQueue], batch: int
) -> None:
    queue = opened()
    await queue.migrate()
    while not queue.listening:
        await queue.wait_for_work(["default"], timedelta(milliseconds=50))
    # Waits longer than the test may run: only the notification can end it in time.
    waiting = asyncio.create_task(queue.wait_for_work(["default"], timedelta(minutes=5)))
    async with await psycopg.AsyncConnection.connect(PG_URL) as conn, conn.transaction():
        await queue.push_many_in(conn, [a_job() for _ in range(batch)])
        await asyncio.sleep(0.2)
        assert not waiting.done(), "NOTIFY is delivered at commit, not before"
    await waiting


# -- the server's clock -----------------------------------------------------------


@pytest.mark.parametrize("batch", [1, COPY_FROM], ids=["one-insert", "copy"])
async def test_leases_and_due_times_follow_the_servers_clock_not_the_workers(
    opened: Callable[..., PostgresQueue], monkeypatch: pytest.MonkeyPatch, batch: int
) -> None:
    queue = opened(lease="90s")
    ahead = datetime.now(UTC) + timedelta(hours=1)  # this process's clock is an hour fast
    monkeypatch.setattr(push_module, "utcnow", lambda: ahead)
    skewed = [a_job("skewed").with_changes(available_at=ahead) for _ in range(batch)]
    await queue.push_many(skewed)

    got = await queue.reserve("default")

    assert [r.job.payload for r in got] == ["skewed"], "due now on the server's clock"
    async with await psycopg.AsyncConnection.connect(PG_URL) as conn:
        row = await (await conn.execute("SELECT clock_timestamp()")).fetchone()
    assert row is not None
    lease_left = got[0].lease_until - row[0] if got[0].lease_until else timedelta(0)
    assert timedelta(seconds=30) < lease_left <= timedelta(seconds=90)


# -- fencing --------------------------------------------------------------------------


async def test_a_stale_reservation_cannot_settle_the_job_another_worker_took(
    opened: Callable[..., PostgresQueue],
) -> None:
    queue = opened(lease="0.3s")
    await queue.push(a_job("contested"))
    stale = (await queue.reserve("default"))[0]
    await asyncio.sleep(0.5)
    fresh = (await queue.reserve("default"))[0]

    assert fresh.job.attempts == 2
    with pytest.raises(LeaseLost):
        await queue.acknowledge(stale)
    results = await queue.acknowledge_many([stale, fresh])
    assert isinstance(results[0], LeaseLost)
    assert results[1] is None, "the current reservation settles"
    assert await queue.size("default") == 0


async def test_a_lapsed_lease_behind_where_the_last_claim_stopped_is_still_claimed(
    opened: Callable[..., PostgresQueue], prefix: str
) -> None:
    # Claims start past the last row this process took; a row that becomes
    # claimable behind that point must not be lost to an empty answer.
    queue = opened(lease="90s")
    first, second, third = a_job("first"), a_job("second"), a_job("third")
    for job in (first, second, third):
        await queue.push(job)
    (taken,) = await queue.reserve("default")
    assert taken.job.id == first.id
    assert [r.job.id for r in await queue.reserve("default")] == [second.id]
    async with await psycopg.AsyncConnection.connect(PG_URL, autocommit=True) as conn:
        # As if the first worker died and its lease ran out.
        await conn.execute(f"UPDATE {prefix}jobs SET lease_until = 0 WHERE id = %s", (first.id,))

    assert [r.job.id for r in await queue.reserve("default")] == [third.id]
    (again,) = await queue.reserve("default")

    assert again.job.id == first.id
    assert again.job.attempts == 2
    assert await queue.reserve("default") == []
    with pytest.raises(LeaseLost):
        await queue.acknowledge(taken)


async def test_acknowledging_with_the_next_claim_finds_a_row_behind_the_last_claim(
    opened: Callable[..., PostgresQueue], prefix: str
) -> None:
    queue = opened(lease="90s")
    first, second = a_job("first"), a_job("second")
    await queue.push(first)
    await queue.push(second)
    (one,) = await queue.reserve("default")
    (two,) = await queue.reserve("default")
    async with await psycopg.AsyncConnection.connect(PG_URL, autocommit=True) as conn:
        await conn.execute(f"UPDATE {prefix}jobs SET lease_until = 0 WHERE id = %s", (first.id,))

    outcomes, claimed = await queue.acknowledge_and_reserve([two], "default", limit=5)

    assert outcomes == [None]
    assert [r.job.id for r in claimed] == [first.id]
    await queue.acknowledge(claimed[0])
    assert await queue.size("default") == 0
    assert one.job.id == first.id


async def test_a_reservation_without_its_rows_seq_is_still_acknowledged_and_still_fenced(
    opened: Callable[..., PostgresQueue],
) -> None:
    # Acknowledgements name rows by the seq each reservation carries; one
    # that does not carry it (made elsewhere, kept from before an upgrade)
    # is settled by job id, with the same token fence.
    queue = opened(lease="90s")
    jobs = [a_job(n) for n in range(4)]
    await queue.push_many(jobs)
    held = await queue.reserve("default", limit=3)
    bare = [dataclasses.replace(r, handle=None) for r in held]
    forged = dataclasses.replace(bare[2], token="not-its-token")

    assert await queue.acknowledge_many([bare[0]]) == [None]
    outcomes, claimed = await queue.acknowledge_and_reserve([bare[1], forged], "default", limit=5)

    assert outcomes[0] is None
    assert isinstance(outcomes[1], LeaseLost)
    assert [r.job.id for r in claimed] == [jobs[3].id]
    assert await queue.acknowledge_many([held[2], claimed[0]]) == [None, None]
    assert await queue.size("default") == 0
    assert await queue.reserve("default") == []


@pytest.mark.parametrize("token", ['quo"te', "back\\slash", "comma,brace}", "NULL", ""])
async def test_a_token_of_any_text_in_a_batch_is_fenced_and_reported_not_refused(
    opened: Callable[..., PostgresQueue], token: str
) -> None:
    # A batch's seqs and tokens travel as array literals written by the driver;
    # a token that would need quoting in one must not break the batch or match a row.
    queue = opened(lease="90s")
    await queue.push_many([a_job(n) for n in range(3)])
    first, held = await queue.reserve("default", limit=2)
    forged = dataclasses.replace(held, token=token)

    results = await queue.acknowledge_many([first, forged])
    assert results[0] is None
    assert isinstance(results[1], LeaseLost)
    outcomes, claimed = await queue.acknowledge_and_reserve([forged], "default", limit=5)

    assert isinstance(outcomes[0], LeaseLost)
    assert len(claimed) == 1
    assert await queue.acknowledge_many([held, *claimed]) == [None, None]
    assert await queue.size("default") == 0


# -- schema, options, errors ------------------------------------------------------


async def test_a_missing_schema_with_migrate_off_says_to_run_migrate(
    opened: Callable[..., PostgresQueue],
) -> None:
    queue = opened(migrate="false")
    with pytest.raises(ConfigurationError, match="rainier-queue provision"):
        await queue.push(a_job())


async def test_a_table_prefix_that_is_not_an_identifier_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="not an identifier"):
        open_queue(f"{PG_URL}?prefix=jobs;drop table users;--")
    with pytest.raises(ConfigurationError, match="not an identifier"):
        open_queue(PG_URL, {"schema": 'public"; drop'})


async def test_a_libpq_option_passes_through_and_a_typo_is_refused_at_startup() -> None:
    queue = open_queue(f"{PG_URL}?sslmode=disable&prefix=app_&lease=30s")
    assert "app_" in queue.describe()
    await queue.aclose()
    with pytest.raises(ConfigurationError, match="prefx"):
        open_queue(f"{PG_URL}?prefx=app_")


# -- PgBouncer in transaction mode ------------------------------------------------


async def _prepared_on_the_server(run: Callable[[str], Awaitable[object]]) -> int:
    rows = await run("SELECT count(*) FROM pg_prepared_statements")
    assert isinstance(rows, list)
    return int(rows[0][0])


@pytest.mark.parametrize("prepared", [True, False])
async def test_prepared_statements_can_be_turned_off_for_every_pooled_connection(
    opened: Callable[..., PostgresQueue], prepared: bool
) -> None:
    queue = opened(pool_min=1, pool_max=1, prepared_statements=str(prepared).lower())
    for _ in range(10):  # psycopg prepares a statement on its fifth run
        await queue.reserve("default")

    async def run(statement: str) -> object:
        return (await queue._pg_dialect.one(statement, ()))[1]

    count = await _prepared_on_the_server(run)
    assert (count > 0) is prepared


@pytest.mark.parametrize("prepared", [True, False])
async def test_the_cache_store_takes_the_prepared_statements_option_too(
    prefix: str, prepared: bool
) -> None:
    cache = open_cache(f"{PG_URL}?prefix={prefix}&pool_max=1&prepared_statements={prepared}")
    assert isinstance(cache, PostgresCache)
    try:
        for _ in range(10):
            await cache.get("some-key")

        async def run(statement: str) -> object:
            async with cache._pool.connection() as conn:
                return await (await conn.execute(statement)).fetchall()

        assert (await _prepared_on_the_server(run) > 0) is prepared
    finally:
        await cache.aclose()


@pytest.mark.parametrize("prepared", [True, False])
async def test_claims_are_planned_once_per_connection_when_statements_are_prepared(
    opened: Callable[..., PostgresQueue], prepared: bool
) -> None:
    # A plan per execution costs more server time than a small claim; a plan
    # made for the parameters goes wrong on a table without statistics.
    queue = opened(pool_min=1, pool_max=1, prepared_statements=str(prepared).lower())
    await queue.push_many([a_job(n) for n in range(3)])
    for _ in range(3):
        await queue.reserve("default")

    async def run(statement: str) -> list[Any]:
        return (await queue._pg_dialect.one(statement, ()))[1]

    plans = await run(
        "SELECT generic_plans, custom_plans FROM pg_prepared_statements "
        "WHERE position('SKIP LOCKED' in statement) > 0"
    )
    mode = (await run("SHOW plan_cache_mode"))[0][0]
    jit = (await run("SHOW jit"))[0][0]
    if prepared:
        # psycopg prepares one statement per set of parameter types (a floor's
        # numbers may be sent as int8 or int4), each on its first run.
        assert sum(generic for generic, _ in plans) == 3, "prepared on its first run"
        assert all(custom == 0 for _, custom in plans), "and planned once"
        assert mode == "force_generic_plan"
        # A generic plan is costed without its LIMIT: on a big table, over the JIT
        # threshold, and compiled at every run (25 ms of a 2 ms claim).
        assert jit == "off"
    else:
        assert plans == []
        assert mode == "auto", "a session setting would leak through PgBouncer"
        async with await psycopg.AsyncConnection.connect(PG_URL) as plain:
            default = await (await plain.execute("SHOW jit")).fetchone()
        assert default is not None
        assert jit == default[0], "the server's own setting, untouched"


async def _has_statistics(prefix: str) -> bool:
    async with await psycopg.AsyncConnection.connect(PG_URL, autocommit=True) as conn:
        cur = await conn.execute(
            "SELECT count(*) FROM pg_stats WHERE tablename = %s AND attname = 'due_at'",
            (f"{prefix}jobs",),
        )
        row = await cur.fetchone()
        return row is not None and row[0] > 0


async def test_the_first_claim_on_a_table_nobody_analyzed_leaves_it_with_statistics(
    opened: Callable[..., PostgresQueue], prefix: str
) -> None:
    queue = opened()
    await queue.push_many([a_job(n) for n in range(40)])
    assert not await _has_statistics(prefix)

    assert len(await queue.reserve("default", limit=5)) == 5

    assert await _has_statistics(prefix)


async def test_a_table_empty_at_the_first_claim_is_analyzed_once_a_claim_finds_a_backlog(
    opened: Callable[..., PostgresQueue], prefix: str
) -> None:
    queue = opened()
    assert await queue.reserve("default") == []
    assert not await _has_statistics(prefix), "an empty table has nothing to sample"
    queue._statistics.retry = 0.0
    await queue.push_many([a_job(n) for n in range(40)])

    assert len(await queue.reserve("default", limit=5)) == 5
    await queue._statistics.settled()

    assert await _has_statistics(prefix)


def test_a_prepared_statements_value_that_is_not_true_or_false_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="prepared_statements"):
        open_queue(f"{PG_URL}?prepared_statements=sometimes")
    with pytest.raises(ConfigurationError, match="prepared_statements"):
        open_queue(PG_URL, {"prepared_statements": "nope"})
    with pytest.raises(ConfigurationError, match="prepared_statements"):
        open_cache(f"{PG_URL}?prepared_statements=sometimes")


async def test_workers_migrating_at_once_apply_each_migration_once(
    opened: Callable[..., PostgresQueue],
) -> None:
    queues = [opened() for _ in range(5)]
    applied = await asyncio.gather(*(q.migrate() for q in queues))
    assert sorted(name for names in applied for name in names) == [
        "0001_jobs",
        "0002_failed_jobs",
        "0003_lease_until",
        "0004_paused_queues",
        "0005_records",
        "0006_batches",
        "0007_ordering_keys",
        "0008_held_keys",
    ]


async def test_tables_can_live_in_a_schema_of_their_own(prefix: str) -> None:
    schema = f"s{prefix}"[:-1]
    queue = open_queue(f"{PG_URL}?prefix={prefix}&schema={schema}")
    try:
        await queue.push(a_job("in a schema"))
        assert [r.job.payload for r in await queue.reserve("default")] == ["in a schema"]
        async with await psycopg.AsyncConnection.connect(PG_URL) as conn:
            row = await (
                await conn.execute(
                    "SELECT count(*) FROM pg_tables WHERE schemaname = %s", (schema,)
                )
            ).fetchone()
        assert row is not None
        assert row[0] == 7  # jobs, failed, schema version, paused, records, batches, batch_jobs
    finally:
        await queue.aclose()
        async with await psycopg.AsyncConnection.connect(PG_URL, autocommit=True) as conn:
            await conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


async def test_a_bulk_push_is_claimed_several_rows_at_a_time_in_order(
    opened: Callable[..., PostgresQueue],
) -> None:
    queue = opened()
    await queue.push_many([a_job(n) for n in range(2000)])

    first = await queue.reserve("default", limit=100)
    second = await queue.reserve("default", limit=100)

    assert [r.job.payload for r in first] == list(range(100))
    assert [r.job.payload for r in second] == list(range(100, 200))
    assert await queue.size("default") == 1800


async def test_a_bulk_push_far_larger_than_one_copy_buffer_lands_whole_and_in_order(
    opened: Callable[..., PostgresQueue],
) -> None:
    queue = opened()
    ids = await queue.push_many([a_job({"n": n, "pad": "x" * 100}) for n in range(20_000)])

    assert await queue.size("default") == 20_000
    got = await queue.reserve("default", limit=20_000)
    assert [r.job.id for r in got] == ids
    assert [r.job.payload["n"] for r in got] == list(range(20_000))


async def test_a_bulk_push_keeps_every_field_of_the_envelope(
    opened: Callable[..., PostgresQueue],
) -> None:
    queue = opened()
    made = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
    special = a_job({"emoji": "🦀", "quote": '\\\t"', "none": None}).with_changes(
        max_attempts=7,
        attempts=2,
        created_at=made,
        unique_key="unique:pg-test:7",
        headers={"traceparent": "00-abc-def-01", "ünï": "çødé"},
    )
    plain = [a_job(n) for n in range(COPY_FROM)]
    await queue.push_many([special, *plain])

    got = await queue.reserve("default", limit=COPY_FROM + 1)
    job = got[0].job
    assert job.id == special.id
    assert job.payload == special.payload
    assert (job.attempts, job.max_attempts) == (3, 7), "this delivery is counted on top"
    assert job.created_at == made
    assert job.available_at == special.available_at
    assert job.unique_key == "unique:pg-test:7"
    assert dict(job.headers) == {"traceparent": "00-abc-def-01", "ünï": "çødé"}
    assert [r.job.payload for r in got[1:]] == list(range(COPY_FROM))


async def test_delayed_jobs_in_a_bulk_push_wait_and_the_rest_are_due_at_once(
    opened: Callable[..., PostgresQueue],
) -> None:
    queue = opened()
    later = datetime.now(UTC) + timedelta(hours=1)
    jobs = [
        a_job(n).with_changes(available_at=later) if n % 2 else a_job(n)
        for n in range(2 * COPY_FROM)
    ]
    await queue.push_many(jobs)

    got = await queue.reserve("default", limit=4 * COPY_FROM)
    assert [r.job.payload for r in got] == list(range(0, 2 * COPY_FROM, 2))
    assert await queue.size("default") == COPY_FROM, "the delayed half waits"


@pytest.mark.parametrize("batch", [2, COPY_FROM], ids=["one-insert", "copy"])
async def test_a_bulk_push_with_a_payload_that_is_not_json_writes_none_of_its_jobs(
    opened: Callable[..., PostgresQueue], batch: int
) -> None:
    queue = opened()
    jobs = [a_job(n) for n in range(batch)]
    jobs[-1] = a_job({"when": datetime.now(UTC)})  # not JSON: fails as its row is encoded

    with pytest.raises(PayloadError):
        await queue.push_many(jobs)

    assert await queue.size("default") == 0
    await queue.push_many([a_job("after")] * 1)
    assert [r.job.payload for r in await queue.reserve("default")] == ["after"]


@pytest.mark.parametrize("batch", [2, COPY_FROM], ids=["one-insert", "copy"])
async def test_a_bulk_push_the_server_refuses_writes_none_of_its_jobs(
    opened: Callable[..., PostgresQueue], batch: int
) -> None:
    queue = opened()
    jobs = [a_job(n) for n in range(batch)]
    jobs[-1] = jobs[0]  # the same id twice: the unique index refuses the statement

    with pytest.raises(BrokerRejected):
        await queue.push_many(jobs)

    assert await queue.size("default") == 0


async def test_a_bulk_push_whose_notification_fails_still_succeeds(
    opened: Callable[..., PostgresQueue], monkeypatch: pytest.MonkeyPatch
) -> None:
    queue = opened()
    monkeypatch.setattr(queue._push, "notify", "SELECT no_such_function(%s, %s)")

    ids = await queue.push_many([a_job(n) for n in range(COPY_FROM)])

    got = await queue.reserve("default", limit=COPY_FROM)
    assert [r.job.id for r in got] == ids, "committed before the notification was tried"


class Greet(Job):
    name = "greet"
    who: str

    def handle(self, ctx: JobContext) -> None:
        return None


async def test_a_job_object_is_pushed_in_the_transaction_with_its_payload_checked(
    opened: Callable[..., PostgresQueue],
) -> None:
    queue = opened()
    async with await psycopg.AsyncConnection.connect(PG_URL) as conn, conn.transaction():
        job_id = await queue.push_in(conn, Greet(who="ada"))

    got = await queue.reserve("default")
    assert [(r.job.id, r.job.name, r.job.payload) for r in got] == [
        (job_id, "greet", {"who": "ada"})
    ]


async def test_doctor_hears_when_the_server_may_lose_accepted_jobs(
    opened: Callable[..., PostgresQueue], prefix: str
) -> None:
    queue = opened()
    assert isinstance(queue, Diagnosable)
    warnings = await queue.health_warnings()
    assert not [w for w in warnings if "synchronous_commit" in w or "fsync" in w], (
        "the test server commits synchronously"
    )

    # libpq's own `options` pass through the URL: this one session commits lazily.
    risky = open_queue(f"{PG_URL}?prefix={prefix}&options=-c%20synchronous_commit%3Doff")
    assert isinstance(risky, PostgresQueue)
    try:
        warnings = await risky.health_warnings()
    finally:
        await risky.aclose()
    assert any("synchronous_commit is off" in w for w in warnings)


async def test_doctor_reads_whether_the_server_vacuums_the_jobs_table(
    opened: Callable[..., PostgresQueue],
) -> None:
    queue = opened()
    await queue.migrate()
    async with await psycopg.AsyncConnection.connect(PG_URL, autocommit=True) as conn:
        row = await (await conn.execute("SHOW autovacuum")).fetchone()
    assert row is not None

    warnings = await queue.health_warnings()

    server_off = any(w.startswith("autovacuum is off") for w in warnings)
    assert server_off == (row[0] == "off"), "the warning follows the server's own setting"
    assert not any("turned off for" in w for w in warnings)


async def test_doctor_hears_when_the_jobs_table_alone_opts_out_of_autovacuum(
    opened: Callable[..., PostgresQueue], prefix: str
) -> None:
    queue = opened()
    await queue.migrate()
    async with await psycopg.AsyncConnection.connect(PG_URL, autocommit=True) as conn:
        await conn.execute(f"ALTER TABLE {prefix}jobs SET (autovacuum_enabled = off)")

    warnings = await queue.health_warnings()

    assert any(
        f"autovacuum is turned off for {prefix}jobs itself" in w
        and f"ALTER TABLE {prefix}jobs RESET (autovacuum_enabled)" in w
        for w in warnings
    ), warnings
