# SPDX-License-Identifier: MIT
"""What only the MySQL/MariaDB queue promises: utf8mb4, exact names, its schema, its server.

The generic behaviour (leases, fencing, the failed store) is the contract
suite's; these tests cover what follows from MySQL itself: 4-byte
characters, collations that would otherwise fold case, migrations that are
not transactional, a strict SQL mode, the server version and the
translation of pymysql's errors.
"""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pymysql  # type: ignore[import-untyped]
import pytest

from rainier_queue.dispatch import MAX_QUEUE_NAME, check_queue_name
from rainier_queue.drivers import open_queue
from rainier_queue.drivers.database.mysql import MySQLQueue
from rainier_queue.drivers.database.mysql import push as push_module
from rainier_queue.drivers.database.mysql.address import (
    ServerAddress,
    check_version,
    parse_version,
)
from rainier_queue.drivers.database.mysql.connection import translate
from rainier_queue.envelope import QueuedJob
from rainier_queue.errors import (
    BrokerRejected,
    BrokerUnavailable,
    ConfigurationError,
    LeaseLost,
    OutcomeUnknown,
    PayloadError,
)
from rainier_queue.queue import Diagnosable, Queue

from ..mysql_service import SERVER, ThrowawayServer, check, drop_tables


def a_job(payload: object = None, *, queue: str = "default", name: str = "mysql-test") -> QueuedJob:
    return QueuedJob.create(name, payload, queue=queue, max_attempts=3)


@pytest.fixture
async def prefix() -> AsyncIterator[str]:
    """A table prefix no other test uses, dropped afterwards."""
    check()
    chosen = f"rq{uuid.uuid4().hex[:10]}_"
    yield chosen
    await drop_tables(chosen)


@pytest.fixture
async def queue(prefix: str) -> AsyncIterator[Queue]:
    opened = open_queue(f"{SERVER}?prefix={prefix}")
    yield opened
    await opened.aclose()


# -- utf8mb4 and exact names ----------------------------------------------------

FOUR_BYTES = "emoji 🎉🚀, math \U0001d518\U0001d52b\U0001d526, CJK 𠜎𠜱, flags 🇳🇿, joiners 👩‍👩‍👧"


async def test_four_byte_characters_round_trip_in_payloads_names_queues_and_headers(
    queue: Queue,
) -> None:
    job = QueuedJob.create(
        "send 📨", {"text": FOUR_BYTES, "nested": ["ünïcödé", "😀"]}, queue="inbox 📬"
    ).with_changes(headers={"trace": "🧵 thread"})
    await queue.push(job)

    [reservation] = await queue.reserve("inbox 📬")

    assert reservation.job.payload == {"text": FOUR_BYTES, "nested": ["ünïcödé", "😀"]}
    assert reservation.job.name == "send 📨"
    assert reservation.job.queue == "inbox 📬"
    assert dict(reservation.job.headers) == {"trace": "🧵 thread"}


async def test_a_queue_name_as_long_as_dispatch_allows_fits_the_queue_column(
    queue: Queue,
) -> None:
    # The column is VARCHAR(191); dispatch once let names of 192 to 200 through.
    name = "q" * (MAX_QUEUE_NAME - 1) + "🎉"
    await queue.push(QueuedJob.create("long", None, queue=name))

    [reservation] = await queue.reserve(name)

    assert reservation.job.queue == name
    with pytest.raises(ValueError, match=f"at most {MAX_QUEUE_NAME} characters"):
        check_queue_name(name + "q")


async def test_a_failed_job_keeps_its_four_byte_payload_and_error(prefix: str) -> None:
    queue = MySQLQueue(SERVER, prefix=prefix)
    await queue.push(a_job({"text": FOUR_BYTES}))
    [reservation] = await queue.reserve("default")

    await queue.fail(reservation, "failed with 💥 in it")

    [failed] = await queue.failed_jobs()
    assert failed.job.payload == {"text": FOUR_BYTES}
    assert failed.error == "failed with 💥 in it"
    await queue.aclose()


async def test_queue_names_that_differ_only_by_case_or_accent_are_different_queues(
    queue: Queue,
) -> None:
    for name in ("Emails", "emails", "EMAILS", "émails"):
        await queue.push(a_job(name, queue=name))

    sizes = {name: await queue.size(name) for name in ("Emails", "emails", "EMAILS", "émails")}
    [reserved] = await queue.reserve("emails", limit=10)

    assert sizes == {"Emails": 1, "emails": 1, "EMAILS": 1, "émails": 1}
    assert reserved.job.payload == "emails"
    assert await queue.clear("Emails") == 1
    assert await queue.size("EMAILS") == 1


async def test_a_value_too_long_for_its_column_is_refused_not_cut_short(queue: Queue) -> None:
    with pytest.raises(BrokerRejected, match="too long"):
        await queue.push(a_job(name="x" * 300))

    assert await queue.size("default") == 0


# -- bulk pushes ------------------------------------------------------------------

AWKWARD = ["it's", 'say "hi"', "back\\slash", "nul\x00byte", "new\nline\r\x1a", "100% %s %(x)s"]


async def test_awkward_text_round_trips_through_a_bulk_push_exactly(queue: Queue) -> None:
    jobs = [
        QueuedJob.create(f"name {text}", {"text": text}, queue=f"q {text}").with_changes(
            headers={"h": text}, unique_key=f"unique:{text}"
        )
        for text in AWKWARD
    ]
    await queue.push_many(jobs)

    for text in AWKWARD:
        [reservation] = await queue.reserve(f"q {text}")
        job = reservation.job
        assert (job.name, job.payload, dict(job.headers), job.unique_key) == (
            f"name {text}",
            {"text": text},
            {"h": text},
            f"unique:{text}",
        )


async def test_a_batch_bigger_than_one_statement_lands_whole_and_in_order(
    queue: Queue, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(push_module, "STATEMENT_LIMIT", 4096)  # a few dozen rows a statement
    ids = await queue.push_many([a_job({"n": n, "text": FOUR_BYTES}) for n in range(500)])

    got = await queue.reserve("default", limit=500)
    assert [r.job.id for r in got] == ids
    assert [r.job.payload["n"] for r in got] == list(range(500))


async def test_a_batch_split_into_statements_is_still_all_or_nothing(
    queue: Queue, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(push_module, "STATEMENT_LIMIT", 4096)
    jobs = [a_job(n) for n in range(500)]
    jobs[-1] = jobs[0]  # the same id twice: the last statement is refused

    with pytest.raises(BrokerRejected, match="Duplicate"):
        await queue.push_many(jobs)

    assert await queue.size("default") == 0


async def test_a_bulk_push_with_a_payload_that_is_not_json_writes_nothing(queue: Queue) -> None:
    jobs = [a_job(n) for n in range(50)]
    jobs[-1] = a_job({"not json": {1, 2}})

    with pytest.raises(PayloadError):
        await queue.push_many(jobs)

    assert await queue.size("default") == 0


def test_statements_split_at_the_limit_counting_bytes_not_characters() -> None:
    jobs = [a_job("🦀" * 100) for _ in range(10)]
    one = next(push_module.statements("t", jobs[:1], 0, 1 << 20))
    row_bytes = len(one.encode()) - len(one.split(" VALUES ", 1)[0]) - len(" VALUES ")

    split = list(push_module.statements("t", jobs, 0, 3 * row_bytes + 200))

    assert [s.count("'mysql-test'") for s in split] == [3, 3, 3, 1]
    assert all(len(s.encode()) <= 3 * row_bytes + 200 for s in split)


async def test_delayed_jobs_in_a_bulk_push_wait_and_the_rest_are_due_at_once(
    queue: Queue,
) -> None:
    later = QueuedJob.create("mysql-test", "later", delay=timedelta(hours=1))
    await queue.push_many([a_job("now"), later, a_job("also now")])

    got = await queue.reserve("default", limit=10)
    assert [r.job.payload for r in got] == ["now", "also now"]
    assert await queue.size("default") == 1


# -- claims ---------------------------------------------------------------------


async def test_concurrent_reserves_on_one_pool_never_hand_out_a_job_twice(prefix: str) -> None:
    queue = MySQLQueue(SERVER, prefix=prefix, pool_max=8)
    pushed = await queue.push_many([a_job(n) for n in range(300)])

    async def drain() -> list[str]:
        taken: list[str] = []
        while batch := await queue.reserve("default", limit=7):
            taken.extend(r.job.id for r in batch)
            assert await queue.acknowledge_many(batch) == [None] * len(batch)
        return taken

    per_task = await asyncio.gather(*(drain() for _ in range(8)))

    taken = [job_id for ids in per_task for job_id in ids]
    assert sorted(taken) == sorted(pushed), "every job taken exactly once"
    await queue.aclose()


async def test_a_batch_with_a_stale_token_acknowledges_the_rest_and_leaves_the_holders_row(
    queue: Queue,
) -> None:
    # A batch is deleted by seq in one statement, each row fenced by its own token;
    # a row held under another token must stay, and the batch must say which was lost.
    await queue.push_many([a_job(n) for n in range(3)])
    first, held, third = await queue.reserve("default", limit=3)
    stale = dataclasses.replace(held, token="another-delivery")

    results = await queue.acknowledge_many([first, stale, third])

    assert results[0] is None
    assert results[2] is None
    assert isinstance(results[1], LeaseLost)
    assert isinstance(queue, MySQLQueue)
    assert (await queue.counts("default")).reserved == 1  # the holder's row
    assert await queue.acknowledge_many([held]) == [None]
    assert (await queue.counts("default")).reserved == 0


async def test_a_combined_call_with_a_stale_token_still_reserves_and_acknowledges_the_rest(
    queue: Queue,
) -> None:
    await queue.push_many([a_job(n) for n in range(4)])
    first, held = await queue.reserve("default", limit=2)
    stale = dataclasses.replace(held, token="another-delivery")

    results, claimed = await queue.acknowledge_and_reserve([first, stale], "default", limit=5)

    assert results[0] is None
    assert isinstance(results[1], LeaseLost)
    assert [r.job.payload for r in claimed] == [2, 3]
    assert await queue.acknowledge_many([held, *claimed]) == [None] * 3
    assert isinstance(queue, MySQLQueue)
    assert (await queue.counts("default")).reserved == 0


async def test_the_same_reservation_twice_in_a_batch_is_acknowledged_once(queue: Queue) -> None:
    await queue.push(a_job())
    [reservation] = await queue.reserve("default")

    results = await queue.acknowledge_many([reservation, reservation])

    assert results[0] is None
    assert isinstance(results[1], LeaseLost)
    assert isinstance(queue, MySQLQueue)
    assert (await queue.counts("default")).reserved == 0


# -- schema ---------------------------------------------------------------------


async def test_migrations_apply_once_even_when_two_queues_migrate_at_once(prefix: str) -> None:
    first, second = MySQLQueue(SERVER, prefix=prefix), MySQLQueue(SERVER, prefix=prefix)

    applied = await asyncio.gather(first.migrate(), second.migrate())

    every = [
        "0001_jobs",
        "0002_failed_jobs",
        "0003_lease_until",
        "0004_paused_queues",
        "0005_records",
        "0006_batches",
        "0007_ordering_keys",
        "0008_held_keys",
    ]
    assert sorted(applied, key=len) == [[], every]
    assert await first.schema_status() == (8, 8)
    await first.aclose()
    await second.aclose()


async def test_a_migration_cut_short_after_its_ddl_is_finished_by_the_next_one(
    prefix: str,
) -> None:
    queue = MySQLQueue(SERVER, prefix=prefix)
    await queue.migrate()
    # As if the process died after CREATE TABLE (which commits by itself in
    # MySQL) but before the version was recorded.
    conn = await pymysql_connection()
    try:
        with conn.cursor() as cur:
            cur.execute(f"DELETE FROM `{prefix}schema_version`")
    finally:
        conn.close()

    assert await queue.migrate() == [
        "0001_jobs",
        "0002_failed_jobs",
        "0003_lease_until",
        "0004_paused_queues",
        "0005_records",
        "0006_batches",
        "0007_ordering_keys",
        "0008_held_keys",
    ]
    await queue.push(a_job())
    assert await queue.size("default") == 1
    await queue.aclose()


async def pymysql_connection() -> pymysql.Connection:
    return await asyncio.to_thread(
        pymysql.connect, host="127.0.0.1", port=3306, user="root", database="test", autocommit=True
    )


async def test_a_missing_schema_with_migrate_off_says_to_run_migrate(prefix: str) -> None:
    queue = open_queue(f"{SERVER}?prefix={prefix}&migrate=false")

    with pytest.raises(ConfigurationError, match="rainier-queue provision"):
        await queue.push(a_job())
    await queue.aclose()


@pytest.mark.parametrize("prefix", ["jobs;drop", "1abc", "a-b", "", "x" * 41])
def test_a_prefix_that_is_not_an_identifier_is_refused(prefix: str) -> None:
    with pytest.raises(ConfigurationError, match="not an identifier"):
        MySQLQueue(SERVER, prefix=prefix)
    with pytest.raises(ConfigurationError, match="not an identifier"):
        open_queue(SERVER, {"prefix": prefix})


# -- URL and options ------------------------------------------------------------


@pytest.mark.parametrize(
    "url", ["mysql://root@127.0.0.1:3306", "mysql://root@127.0.0.1:3306/", "mysql://h/a/b"]
)
def test_a_url_without_a_database_is_refused(url: str) -> None:
    with pytest.raises(ConfigurationError, match="needs a database"):
        open_queue(url)


def test_an_impossible_pool_size_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="pool_min <= pool_max"):
        open_queue(SERVER, {"pool_min": "5", "pool_max": "2"})


async def test_a_database_that_does_not_exist_is_a_setting_to_fix_not_an_outage() -> None:
    check()
    queue = open_queue("mysql://root@127.0.0.1:3306/no_such_database_here")

    with pytest.raises(ConfigurationError, match="no_such_database_here"):
        await queue.size("default")
    await queue.aclose()


# -- a connection lost during COMMIT ------------------------------------------------


def test_an_unknown_outcome_is_still_an_outage_the_worker_rides_out() -> None:
    assert issubclass(OutcomeUnknown, BrokerUnavailable)


# -- the server version and error translation -------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("10.11.19-MariaDB-0+deb12u1", ("mariadb", (10, 11, 19))),
        ("5.5.5-10.6.4-MariaDB-log", ("mariadb", (10, 6, 4))),
        ("8.0.36", ("mysql", (8, 0, 36))),
        ("8.4.0-commercial", ("mysql", (8, 4, 0))),
    ],
)
def test_the_server_version_is_read_from_what_version_returns(
    text: str, expected: tuple[str, tuple[int, ...]]
) -> None:
    assert parse_version(text) == expected


@pytest.mark.parametrize(
    ("text", "needed"),
    [
        ("10.5.23-MariaDB", "MariaDB 10.6 or newer"),
        ("5.5.5-10.3.39-MariaDB", "MariaDB 10.6 or newer"),
        ("5.7.44-log", "MySQL 8.0.1 or newer"),
        ("8.0.0-dmr", "MySQL 8.0.1 or newer"),
    ],
)
def test_a_server_without_skip_locked_is_refused_naming_the_version_needed(
    text: str, needed: str
) -> None:
    with pytest.raises(BrokerRejected, match=needed):
        check_version(text)


@pytest.mark.parametrize("text", ["10.6.0-MariaDB", "11.4.2-MariaDB", "8.0.1", "9.1.0"])
def test_a_server_with_skip_locked_is_accepted(text: str) -> None:
    check_version(text)


@pytest.mark.parametrize(
    ("error", "kind", "says"),
    [
        (pymysql.err.OperationalError(1213, "Deadlock found"), BrokerUnavailable, "Deadlock"),
        (pymysql.err.OperationalError(1205, "Lock wait timeout"), BrokerUnavailable, "Lock"),
        (pymysql.err.OperationalError(2003, "Can't connect"), BrokerUnavailable, "connect"),
        (pymysql.err.OperationalError(2013, "Lost connection"), BrokerUnavailable, "Lost"),
        (pymysql.err.InterfaceError(0, ""), BrokerUnavailable, "gone"),
        (ConnectionResetError("reset"), BrokerUnavailable, "reset"),
        (pymysql.err.ProgrammingError(1146, "Table doesn't exist"), BrokerRejected, "provision"),
        (pymysql.err.OperationalError(1045, "Access denied"), ConfigurationError, "fix the user"),
        (pymysql.err.OperationalError(1049, "Unknown database"), ConfigurationError, "create"),
        (pymysql.err.DataError(1406, "Data too long"), BrokerRejected, "too long"),
    ],
)
def test_client_errors_are_translated_into_an_outage_a_refusal_or_a_setting_to_fix(
    error: Exception, kind: type[Exception], says: str
) -> None:
    translated = translate(error, ServerAddress.from_url("mysql://u:pw@db/app", what="test")[0])

    assert isinstance(translated, kind)
    assert says in str(translated)


def test_an_error_that_is_not_the_clients_passes_through_untouched() -> None:
    error = ValueError("a bug in a unit of work")

    assert translate(error, ServerAddress.from_url("mysql://db/app", what="test")[0]) is error


# -- doctor ---------------------------------------------------------------------


async def test_a_server_that_commits_to_disk_raises_no_health_warning(queue: Queue) -> None:
    assert isinstance(queue, Diagnosable)
    assert await queue.health_warnings() == [], "the test server flushes on every commit"


async def test_a_server_that_may_lose_commits_in_a_crash_is_reported(tmp_path: Path) -> None:
    server = ThrowawayServer(tmp_path)
    await asyncio.to_thread(server.start)
    try:
        conn = await asyncio.to_thread(
            pymysql.connect, host="127.0.0.1", port=server.port, user="root", autocommit=True
        )
        with conn.cursor() as cur:
            cur.execute("SET GLOBAL innodb_flush_log_at_trx_commit = 2")
        conn.close()
        queue = MySQLQueue(server.url)

        [warning] = await queue.health_warnings()

        assert "innodb_flush_log_at_trx_commit is 2" in warning
        await queue.aclose()
    finally:
        server.stop()
