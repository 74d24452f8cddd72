# SPDX-License-Identifier: MIT
"""What only the SQLite queue promises: processes sharing one file, its schema, its URL.

The generic behaviour (leases, fencing, the failed store) is the contract
suite's; these tests cover what follows from SQLite itself: several worker
processes on one file, the transaction around `fail`, migrations and the
table prefix, and translating sqlite3's errors.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import sqlite3
from datetime import timedelta
from multiprocessing.synchronize import Event
from pathlib import Path

import pytest

from rainier_queue.drivers import DriverContext, open_queue
from rainier_queue.drivers.database.sqlite import SQLiteQueue
from rainier_queue.envelope import QueuedJob
from rainier_queue.errors import (
    BrokerRejected,
    BrokerUnavailable,
    ConfigurationError,
    LeaseLost,
    UnknownOption,
)

SHORT_LEASE = timedelta(milliseconds=200)
LAPSE = SHORT_LEASE.total_seconds() * 1.5


def a_job(payload: object = None, *, queue: str = "default", max_attempts: int = 3) -> QueuedJob:
    return QueuedJob.create("sqlite-test", payload, queue=queue, max_attempts=max_attempts)


def tables(path: Path) -> set[str]:
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
    return {name for (name,) in rows}


# -- several processes on one file ----------------------------------------------


def _drain(path: str, out: str, ready: Event, go: Event) -> None:
    """A worker process: reserve and acknowledge until the queue stays empty."""

    async def main() -> list[str]:
        queue = SQLiteQueue(path, busy_timeout=timedelta(seconds=30))
        await queue.size("default")
        ready.set()
        go.wait()
        acked: list[str] = []
        idle = 0
        while idle < 3:
            batch = await queue.reserve("default", limit=5)
            if not batch:
                idle += 1
                await asyncio.sleep(0.02)
                continue
            idle = 0
            await asyncio.sleep(0.001)  # "run" the jobs, holding no lock meanwhile
            results = await queue.acknowledge_many(batch)
            assert results == [None] * len(batch), f"a reservation was not ours: {results}"
            acked.extend(r.job.id for r in batch)
        await queue.aclose()
        return acked

    Path(out).write_text("\n".join(asyncio.run(main())))


def _run_workers(path: Path, count: int) -> list[list[str]]:
    ctx = multiprocessing.get_context("spawn")
    go = ctx.Event()
    readies = [ctx.Event() for _ in range(count)]
    outs = [path.with_name(f"acked-{n}.txt") for n in range(count)]
    procs = [
        ctx.Process(target=_drain, args=(str(path), str(out), ready, go))
        for out, ready in zip(outs, readies, strict=True)
    ]
    for proc in procs:
        proc.start()
    for ready in readies:
        assert ready.wait(60), "a worker process never started"
    go.set()
    for proc in procs:
        proc.join(120)
        assert proc.exitcode == 0, f"a worker process failed (exit code {proc.exitcode})"
    return [out.read_text().split() for out in outs]


async def test_several_processes_on_one_file_never_hold_the_same_job_at_once(
    tmp_path: Path,
) -> None:
    path = tmp_path / "jobs.db"
    queue = SQLiteQueue(path)
    pushed = await queue.push_many([a_job(i) for i in range(3000)])

    per_process = await asyncio.to_thread(_run_workers, path, 3)

    # A job claimed twice would show up twice here (or fail an acknowledge
    # in its worker); a job lost would be missing.
    acked = [job_id for ids in per_process for job_id in ids]
    assert sorted(acked) == sorted(pushed), "every job is acknowledged exactly once"
    assert await queue.size("default") == 0
    await queue.aclose()


# -- what waits for the disk ----------------------------------------------------


async def test_pushes_wait_for_the_disk_and_the_workers_books_do_not(tmp_path: Path) -> None:
    # A push that returned must survive a power cut (synchronous=FULL). A
    # claim or a settle that a power cut undoes only runs its jobs again,
    # and the workers die with the file's machine, so those commit with
    # synchronous=NORMAL (still safe against a killed process in WAL mode).
    queue = SQLiteQueue(tmp_path / "jobs.db")
    thread = queue._dialect._thread  # type: ignore[attr-defined]

    async def setting() -> int:
        return int(await thread.call(lambda conn: conn.execute("PRAGMA synchronous").fetchone()[0]))

    full, normal = 2, 1
    await queue.push_many([a_job(n) for n in range(4)])
    assert await setting() == full
    held = await queue.reserve("default", limit=3)
    assert await setting() == normal
    await queue.push(a_job())
    assert await setting() == full
    await queue.renew(held[0])
    await queue.acknowledge_many(held[:1])
    assert await setting() == normal
    await queue.release(held[1], delay=timedelta(0))
    await queue.fail(held[2], "boom")
    assert await setting() == normal
    await queue.push(a_job())
    assert await setting() == full, "a push after the worker's commits waits for the disk again"
    assert await queue.size("default") == 4
    await queue.aclose()


# -- fail: recorded, then deleted, in one transaction ---------------------------


async def test_the_failure_is_recorded_while_the_job_row_still_exists(tmp_path: Path) -> None:
    path = tmp_path / "jobs.db"
    queue = SQLiteQueue(path)
    await queue.migrate()
    with sqlite3.connect(path) as conn:  # note, at the failed insert, whether the job is there
        conn.executescript("""
            CREATE TABLE probe (job_id TEXT, job_rows INTEGER);
            CREATE TRIGGER probe_failure AFTER INSERT ON rainier_failed_jobs BEGIN
                INSERT INTO probe SELECT NEW.id, COUNT(*) FROM rainier_jobs WHERE id = NEW.id;
            END;
        """)
    await queue.push(a_job())
    [reservation] = await queue.reserve("default")

    await queue.fail(reservation, "boom")

    with sqlite3.connect(path) as conn:
        probe = conn.execute("SELECT job_id, job_rows FROM probe").fetchall()
    assert probe == [(reservation.job.id, 1)], "recorded first, while the job row existed"
    assert await queue.size("default") == 0
    assert [f.job.id for f in await queue.failed_jobs()] == [reservation.job.id]
    await queue.aclose()


async def test_a_crash_between_recording_the_failure_and_deleting_the_job_loses_nothing(
    tmp_path: Path,
) -> None:
    path = tmp_path / "jobs.db"
    queue = SQLiteQueue(path, lease=SHORT_LEASE)
    await queue.migrate()
    with sqlite3.connect(path) as conn:  # the delete that follows the insert fails
        conn.execute(
            "CREATE TRIGGER crash BEFORE DELETE ON rainier_jobs "
            "BEGIN SELECT RAISE(ABORT, 'simulated crash'); END"
        )
    await queue.push(a_job("precious"))
    [reservation] = await queue.reserve("default")

    with pytest.raises(BrokerRejected, match="simulated crash"):
        await queue.fail(reservation, "boom")

    assert await queue.failed_jobs() == [], "the record was rolled back with the delete"
    with sqlite3.connect(path) as conn:
        conn.execute("DROP TRIGGER crash")
    await asyncio.sleep(LAPSE)
    [again] = await queue.reserve("default")
    assert again.job.id == reservation.job.id, "the job is still there, and comes back"
    assert again.job.payload == "precious"
    assert again.job.attempts == 2
    await queue.aclose()


# -- schema and prefix -----------------------------------------------------------


async def test_migrations_apply_once_and_the_version_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "jobs.db"
    queue = SQLiteQueue(path, migrate=False)
    assert await queue.schema_status() == (0, 8)

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
    assert await queue.migrate() == []
    other = SQLiteQueue(path)
    assert await other.migrate() == []
    assert await other.schema_status() == (8, 8)
    assert {"rainier_jobs", "rainier_failed_jobs", "rainier_schema_version"} <= tables(path)
    await queue.aclose()
    await other.aclose()


async def test_a_missing_schema_with_migrate_off_says_to_run_migrate(tmp_path: Path) -> None:
    path = tmp_path / "jobs.db"
    queue = open_queue(f"sqlite:///{path}", {"migrate": False}, DriverContext())

    with pytest.raises(ConfigurationError, match="rainier-queue provision"):
        await queue.push(a_job())
    with pytest.raises(ConfigurationError, match="rainier-queue provision"):
        await queue.reserve("default")
    assert tables(path) == set(), "nothing was created behind the operator's back"
    await queue.aclose()


async def test_a_fresh_file_gets_its_tables_on_first_use(tmp_path: Path) -> None:
    path = tmp_path / "fresh.db"
    queue = open_queue(f"sqlite:///{path}")

    await queue.push(a_job())

    assert await queue.size("default") == 1
    await queue.aclose()


@pytest.mark.parametrize(
    "prefix", ["jobs; DROP TABLE users; --", "1st_", "my-app_", "", "a b", 'q"', "x" * 41]
)
def test_a_prefix_that_is_not_an_identifier_is_refused(tmp_path: Path, prefix: str) -> None:
    with pytest.raises(ConfigurationError, match="not an identifier"):
        open_queue(f"sqlite:///{tmp_path}/jobs.db", {"prefix": prefix})
    with pytest.raises(ConfigurationError, match="not an identifier"):
        SQLiteQueue(tmp_path / "jobs.db", prefix=prefix)
    assert not (tmp_path / "jobs.db").exists()


async def test_two_prefixes_on_one_file_are_two_separate_queues(tmp_path: Path) -> None:
    path = tmp_path / "jobs.db"
    first = SQLiteQueue(path, prefix="app_one_")
    second = SQLiteQueue(path, prefix="AppTwo_")
    await first.push(a_job("one"))

    assert await second.reserve("default") == []
    assert [r.job.payload for r in await first.reserve("default")] == ["one"]
    assert {"app_one_jobs", "AppTwo_jobs"} <= tables(path)
    await first.aclose()
    await second.aclose()


# -- leases across connections ----------------------------------------------------


async def test_a_lapsed_lease_is_reclaimed_and_the_stale_token_cannot_acknowledge(
    tmp_path: Path,
) -> None:
    path = tmp_path / "jobs.db"
    gone_quiet = SQLiteQueue(path, lease=SHORT_LEASE)
    other_worker = SQLiteQueue(path, lease=SHORT_LEASE)
    await gone_quiet.push(a_job())
    [stale] = await gone_quiet.reserve("default")
    assert await other_worker.reserve("default") == [], "held while the lease runs"
    await asyncio.sleep(LAPSE)

    [current] = await other_worker.reserve("default")

    assert current.job.id == stale.job.id
    assert current.job.attempts == 2, "the lapsed delivery counted"
    assert current.token != stale.token
    with pytest.raises(LeaseLost):
        await gone_quiet.acknowledge(stale)
    with pytest.raises(LeaseLost):
        await gone_quiet.fail(stale, "late")
    assert await gone_quiet.failed_jobs() == [], "a stale fail records nothing"
    await other_worker.acknowledge(current)
    await gone_quiet.aclose()
    await other_worker.aclose()


async def test_reserve_claims_up_to_the_limit_in_push_order_and_skips_delayed_jobs(
    tmp_path: Path,
) -> None:
    queue = SQLiteQueue(tmp_path / "jobs.db")
    later = a_job("later").with_changes(available_at=a_job().available_at + timedelta(hours=1))
    await queue.push_many([later, *(a_job(i) for i in range(5))])

    first = await queue.reserve("default", limit=3)
    rest = await queue.reserve("default", limit=10)

    assert [r.job.payload for r in first] == [0, 1, 2]
    assert [r.job.payload for r in rest] == [3, 4]
    assert await queue.size("default") == 1, "the delayed job still waits"
    await queue.aclose()


# -- URLs, options and errors -------------------------------------------------------


@pytest.mark.parametrize("url", ["sqlite://:memory:", "sqlite:///:memory:"])
def test_an_in_memory_database_is_refused_with_a_pointer_to_the_memory_driver(url: str) -> None:
    with pytest.raises(ConfigurationError, match="memory://"):
        open_queue(url)


async def test_relative_and_absolute_urls_name_the_files_they_say(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    relative = open_queue("sqlite:///relative.db")
    absolute = open_queue(f"sqlite:///{tmp_path / 'absolute.db'}")  # sqlite:////tmp/...

    await relative.size("default")
    await absolute.size("default")

    assert (tmp_path / "relative.db").exists()
    assert (tmp_path / "absolute.db").exists()
    assert str(tmp_path / "relative.db") in relative.describe()
    await relative.aclose()
    await absolute.aclose()


def test_options_in_the_url_query_are_checked_like_any_other(tmp_path: Path) -> None:
    queue = open_queue(f"sqlite:///{tmp_path}/jobs.db?lease=30s&prefix=app_")
    assert queue.lease == timedelta(seconds=30)
    assert "app_*" in queue.describe()

    with pytest.raises(UnknownOption, match="Did you mean `lease`"):
        open_queue(f"sqlite:///{tmp_path}/jobs.db?leese=30s")
    with pytest.raises(ConfigurationError, match="does not exist"):
        open_queue(f"sqlite:///{tmp_path}/no/such/dir/jobs.db")


async def test_a_file_locked_by_someone_else_is_reported_as_unavailable(tmp_path: Path) -> None:
    path = tmp_path / "jobs.db"
    queue = SQLiteQueue(path, busy_timeout=timedelta(milliseconds=100))
    await queue.migrate()
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(BrokerUnavailable, match="locked"):
            await queue.push(a_job())
    finally:
        holder.execute("ROLLBACK")
        holder.close()

    await queue.push(a_job())  # and once the lock is gone, it works again
    assert await queue.size("default") == 1
    await queue.aclose()


async def test_a_closed_queue_says_so(tmp_path: Path) -> None:
    queue = SQLiteQueue(tmp_path / "jobs.db")
    await queue.aclose()

    with pytest.raises(BrokerUnavailable, match="closed"):
        await queue.size("default")


def _push_from_a_forked_child(queue: SQLiteQueue) -> None:
    asyncio.run(queue.push(a_job("from the child")))


@pytest.mark.skipif(
    "fork" not in multiprocessing.get_all_start_methods(), reason="no fork on this platform"
)
async def test_a_queue_opened_before_a_fork_works_in_the_child(tmp_path: Path) -> None:
    queue = SQLiteQueue(tmp_path / "jobs.db")
    await queue.size("default")  # the parent's connection and thread exist now

    child = multiprocessing.get_context("fork").Process(
        target=_push_from_a_forked_child, args=(queue,)
    )
    child.start()  # forked from the loop's thread, as a pre-forking server would
    try:
        await asyncio.to_thread(child.join, 60)
    finally:
        if child.is_alive():  # hung: the inherited executor never ran the push
            child.kill()

    assert child.exitcode == 0
    assert [r.job.payload for r in await queue.reserve("default")] == ["from the child"]
    await queue.aclose()


async def test_a_fresh_file_locked_by_another_connection_is_opened_once_the_lock_is_gone(
    tmp_path: Path,
) -> None:
    # Switching to WAL does not wait for a busy file as a write does: a worker
    # opening a fresh file while another process held it failed at once with
    # "database is locked" (seen when several stores opened one file together).
    path = tmp_path / "jobs.db"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("CREATE TABLE other (x INTEGER)")
    holder.execute("BEGIN IMMEDIATE")
    holder.execute("INSERT INTO other VALUES (1)")
    queue = SQLiteQueue(path, busy_timeout=timedelta(seconds=30))
    try:
        loop = asyncio.get_running_loop()
        loop.call_later(0.3, holder.execute, "COMMIT")

        assert await queue.size("default") == 0
    finally:
        holder.close()
        await queue.aclose()
    with sqlite3.connect(path) as check:
        assert check.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
