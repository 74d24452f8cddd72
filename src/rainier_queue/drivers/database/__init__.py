# SPDX-License-Identifier: MIT
"""`DatabaseQueue`: the `Queue` port over tables in a SQL database.

A job queue in the database the application already runs needs no new
infrastructure to operate, back up or secure, and a job row is as durable
as any other row. What it costs: every reserve and settle is a write
transaction, so throughput is the database's write rate, not a broker's;
and idle workers poll (each dialect may add a faster wake-up: PostgreSQL's
`LISTEN`, or datagrams between the processes of one machine, `nearby.py`).

The semantics are `MemoryQueue`'s, in SQL:

- a reservation is a random `reservation_token` written into the row with
  the lease's end (`lease_until`, a column no index holds, so a claim writes
  no index entry); every settle matches on id *and* token, and matching no
  row is `LeaseLost`;
- a row whose lease ended is due again, so the next `reserve` reclaims it
  (counting another attempt, as every delivery does) and no reaper runs;
- `fail` copies the row into the failed table and then deletes it, in one
  transaction, and `retry_failed` restores it with its attempts at zero and
  its own `max_attempts` (upstream gave a retried job a single attempt);
- `renew` moves the lease's end (upstream could not).

The SQL lives in `statements` and `schema`; what differs between databases
lives in a `Dialect`, and each database has a folder of its own
(`sqlite/`, `postgres/`, `mysql/`) with a public `connection` module and a
`settings` object that its cache and lock store share.

SQLite and MySQL run on this seam as it is (MySQL replaces only the claim
and the batched acknowledgement). PostgreSQL keeps the seam's schema,
migrations, failed store, counting and its handling of rows that are not
jobs, but overrides the hot path — push, reserve, acknowledge, release,
renew, fail and the idle wait — because there each is one statement (a CTE
that claims and returns, a DELETE ... RETURNING, COPY for bulk pushes,
LISTEN/NOTIFY for wake-ups), where the seam's units of work take a round
trip per statement inside an explicit transaction. The seam's versions are
the portable ones; a new SQL database starts from them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from datetime import timedelta
from typing import ClassVar, SupportsInt, cast

from typing_extensions import override

from ..._clock import from_micros, to_micros
from ...batchstate import BatchProgress, Callback, Member, Outcome
from ...durations import format_duration
from ...envelope import QueuedJob, encode_headers, encode_payload
from ...envelope.reading import Malformed, read_columns
from ...errors import ConfigurationError, LeaseLost
from ...job import ORDERING_KEY
from ...jobstate import Found
from ...queue import (
    DEFAULT_LEASE,
    Capabilities,
    FailedJob,
    Finding,
    Queue,
    QueueCounts,
    Reservation,
    Rewrite,
    Rewritten,
    new_token,
)
from ..malformed import Pass, top_up
from ..options import check_lease, check_positive
from .batching import BatchTables
from .dialect import Dialect, Row, Session, T, Work
from .failed import FailedTable, Quarantined
from .pausing import PausedTable
from .records import DatabaseRecords
from .rewriting import rewrite_table
from .schema import (
    DEFAULT_PREFIX,
    EXPECTED_VERSION,
    MIGRATIONS,
    Tables,
    applied_versions,
    apply_pending,
    missing,
)
from .statements import Statements

log = logging.getLogger("rainier_queue.database")

_MICROSECOND = timedelta(microseconds=1)

POLL_INTERVAL = timedelta(milliseconds=100)
"""How often an idle worker looks for work pushed by another process (SQLite, MySQL): the
fallback behind the wake-ups of `nearby.py`, and all a worker on another machine has."""


def _micros(value: object) -> int | None:
    """A time column read back: None when there is none, or when it is not a number.

    Only SQLite lets a row hold text there (written by another program); such a
    time is unknown, not a reason for a wait or a count to fail. The SQLite
    queue repairs those rows before it waits (`sqlite/untyped.py`).
    """
    if value is None or isinstance(value, str | bytes):
        return None
    return int(cast(SupportsInt, value))  # an int, or a Decimal from MySQL's arithmetic


class DatabaseQueue(Queue):
    """Jobs as rows, claimed under the dialect's lock and settled by reservation token."""

    name: ClassVar[str] = "database"
    idle_wait: ClassVar[str] = (
        "a look for due work every `poll_interval`, cut short by a push from a process on "
        "this machine"
    )
    capabilities: ClassVar[Capabilities] = Capabilities(
        survives_restart=True,
        shared_between_processes=True,
        pausable=True,
        job_lookup=True,
        records=True,
        cancellable=True,
        batches=True,
        ordering_keys=True,
    )

    def __init__(
        self,
        dialect: Dialect,
        *,
        lease: timedelta = DEFAULT_LEASE,
        prefix: str = DEFAULT_PREFIX,
        migrate: bool = True,
        schema: str | None = None,
        poll_interval: timedelta = POLL_INTERVAL,
    ) -> None:
        self._poll_interval = check_positive(poll_interval, setting="poll_interval")
        self._dialect = dialect
        self._tables = Tables.for_prefix(prefix, schema)
        self._sql = Statements.build(self._tables, dialect)
        self._records = DatabaseRecords(dialect, self._tables, self._run)
        """Finding a job by id, and the records table (`records.py`)."""
        self._lease = check_lease(lease)
        self._lease_us = lease // _MICROSECOND
        self._auto_migrate = migrate
        self._schema_ready = False
        self._pauses = PausedTable(self._tables, dialect, self._run)
        self._batches = BatchTables(self._tables, dialect, self._run, self._push_in_session)
        self._failed = FailedTable(dialect, self._sql, self._run)
        """The failed table: rows that are not jobs moved in; listed, retried, forgotten."""
        """Batches (`BatchStore`): counters and markers beside the jobs (`batching.py`)."""

    @property
    @override
    def lease(self) -> timedelta:
        return self._lease

    @property
    def prefix(self) -> str:
        """The prefix of this queue's table names."""
        return self._tables.prefix

    @override
    def describe(self) -> str:
        lease = format_duration(self._lease)
        return f"{self._dialect.describe()} (tables {self.prefix}*, lease {lease})"

    # -- schema ----------------------------------------------------------------

    async def migrate(self) -> list[str]:
        """Create or upgrade the tables; the names of the migrations applied (none if current)."""
        applied = await self._dialect.run(
            lambda s: apply_pending(s, self._dialect, self._tables), write=True
        )
        self._schema_ready = True
        return applied

    async def schema_status(self) -> tuple[int, int]:
        """(the version the database has, the version this code expects).

        The database's version is the highest it has below the first migration it
        lacks: one that has 7 but not 6 is at 5, and 6 is what it needs.
        """
        applied = await self._dialect.run(
            lambda s: applied_versions(s, self._dialect, self._tables), write=False
        )
        gaps = missing(applied)
        if not gaps:
            return max(applied, default=0), EXPECTED_VERSION
        below = [v for v in applied if v < gaps[0].version]
        return max(below, default=0), EXPECTED_VERSION

    async def provision(self, queues: Sequence[str] = ()) -> list[str]:
        """`Provisionable`: apply pending migrations. A queue is a column value, so the
        tables every queue of the connection shares are all there is to make."""
        return [f"applied migration {name}" for name in await self.migrate()]

    async def check_provisioned(self, queues: Sequence[str] = ()) -> list[Finding]:
        """`Provisionable`: the tables missing, or their schema behind this code's."""
        applied, expected = await self.schema_status()
        if applied >= expected:
            return []  # a database newer than this code is fine: migrations only add
        pending = ", ".join(m.name for m in MIGRATIONS if m.version > applied)
        state = "do not exist" if applied == 0 else f"are at schema version {applied}"
        return [
            Finding(
                subject=f"the tables `{self.prefix}*`",
                problem=f"{state}, and this code needs version {expected} ({pending} to apply)",
                fixed_on_first_use=self._auto_migrate,
                fix=(
                    "otherwise the first command on the connection applies it (`migrate = true`)"
                    if self._auto_migrate
                    else "until then every command on the connection is refused (`migrate = false`)"
                ),
            )
        ]

    @property
    def migrates_on_first_use(self) -> bool:
        """`migrate = true` (the default): a missing or older schema is migrated on first use."""
        return self._auto_migrate

    async def _ensure_schema(self) -> None:
        if self._schema_ready:
            return
        applied, expected = await self.schema_status()
        if applied < expected:
            if not self._auto_migrate:
                # No wait fixes this, so it is a setting to change, not an outage.
                raise ConfigurationError(
                    f"the {self.name} queue at {self._dialect.describe()} has schema version "
                    f"{applied} and this code needs {expected} (tables {self.prefix}*): run "
                    "`rainier-queue provision`, or open the queue with migrate = true"
                )
            await self.migrate()
        # A database newer than this code is fine: migrations only add.
        self._schema_ready = True

    async def _run(self, work: Work[T], *, write: bool = True, durable: bool = True) -> T:
        await self._ensure_schema()
        return await self._dialect.run(work, write=write, durable=durable)

    # -- pushing ---------------------------------------------------------------

    @override
    async def push(self, job: QueuedJob) -> str:
        await self.push_many([job])
        return job.id

    @override
    async def push_many(self, jobs: Sequence[QueuedJob]) -> list[str]:
        if not jobs:
            return []
        rows = [row_for(job) for job in jobs]
        queues = {job.queue for job in jobs}

        async def work(s: Session) -> None:
            await s.executemany(self._sql.push, rows)
            await self._dialect.announce(s, queues)

        await self._run(work)
        self._dialect.pushed()
        return [job.id for job in jobs]

    async def _push_in_session(self, s: Session, jobs: Sequence[QueuedJob]) -> None:
        """Insert `jobs` in `s`'s transaction, announced at its commit (a batch's callbacks)."""
        await s.executemany(self._sql.push, [row_for(job) for job in jobs])
        await self._dialect.announce(s, {job.queue for job in jobs})

    # -- reserving -------------------------------------------------------------

    @override
    async def reserve(self, queue: str, *, limit: int = 1) -> list[Reservation]:
        if limit < 1:
            return []
        return await self._run(self._reserve_work(queue, limit), durable=False)

    def _reserve_work(self, queue: str, limit: int) -> Work[list[Reservation]]:
        """The unit of work that claims up to `limit` due jobs of `queue`.

        A claim that met rows that are not jobs (moved to the failed table)
        claims again for the places they took: an empty answer must mean an
        empty queue, or a `--stop-when-empty` worker would stop behind them.
        """

        async def work(s: Session) -> list[Reservation]:
            first = await self._claim_pass(queue, limit)(s)
            return await top_up(first, limit, lambda places: self._claim_pass(queue, places)(s))

        return work

    def _claim_pass(self, queue: str, limit: int) -> Work[Pass]:
        """One claim of up to `limit` rows: the jobs, and how many rows were not jobs."""

        async def work(s: Session) -> Pass:
            now = await self._dialect.now(s)
            rows = await s.fetchall(self._sql.select_due, (queue, now, now, now, limit))
            until = now + self._lease_us
            lease_until = from_micros(until)
            claims: list[tuple[object, ...]] = []
            out: list[Reservation] = []
            bad: list[Quarantined] = []
            for row in rows:
                job = read_columns(row[1:], delivered=1)  # the claim below counts it
                if isinstance(job, Malformed):
                    bad.append((row[0], None, job))
                    continue
                token = new_token()
                claims.append((token, now, until, row[0]))
                out.append(
                    Reservation(
                        job=job,
                        token=token,
                        lease_until=lease_until,
                        lease=self._lease,
                        handle=row[0],
                    )
                )
            if claims:
                await s.executemany(self._sql.claim, claims)
            if bad:
                await self._failed.quarantine(s, queue, bad)
            return out, len(bad)

        return work

    @override
    async def wait_for_work(self, queues: Sequence[str], timeout: timedelta) -> None:
        """Look for due work every `poll_interval` until `timeout`; return once some is due.

        A push from this process, or (where the dialect has a rendezvous)
        from another process on this machine, cuts the wait between looks
        short. Anything else (a push from another machine, a wake-up that
        was lost) is found by looking, so an idle worker looks often: one
        indexed read of the soonest due time, a few times a second.
        PostgreSQL overrides this with LISTEN/NOTIFY.
        """
        if not queues:
            await self._dialect.wait(queues, timeout)
            return
        sql = self._sql.soonest_due_for(self._dialect, len(queues))

        async def soonest(s: Session) -> tuple[int, int | None]:
            now = await self._dialect.now(s)
            rows = await s.fetchall(sql, self._sql.soonest_due_params(queues, now))
            return now, _micros(rows[0][0]) if rows else None

        loop = asyncio.get_running_loop()
        ends = loop.time() + timeout.total_seconds()
        while True:
            # Taken before looking: a push heard between the look and the wait ends the wait.
            mark = self._dialect.wake_mark()
            now, due = await self._run(soonest, write=False)
            if due is not None and due <= now:
                return
            left = ends - loop.time()
            if left <= 0:
                return
            wait = min(left, self._poll_interval.total_seconds())
            if due is not None:
                # Wake when the next delayed job comes due or the next lease ends.
                wait = min(wait, (due - now) / 1_000_000)
            await self._dialect.wait_after(mark, queues, timedelta(seconds=wait))

    # -- settling --------------------------------------------------------------

    async def _settle(self, sql: str, params: Sequence[object], reservation: Reservation) -> None:
        async def work(s: Session) -> None:
            if await s.execute(sql, params) == 0:
                raise _lost(reservation)

        await self._run(work, durable=False)

    @override
    async def acknowledge(self, reservation: Reservation) -> None:
        job = reservation.job
        await self._settle(self._sql.acknowledge, (job.id, reservation.token), reservation)

    @override
    async def acknowledge_many(self, reservations: Sequence[Reservation]) -> list[Exception | None]:
        if not reservations:
            return []
        return await self._run(self._acknowledge_work(reservations), durable=False)

    def _acknowledge_work(
        self, reservations: Sequence[Reservation]
    ) -> Work[list[Exception | None]]:
        """The unit of work that deletes the jobs `reservations` still hold."""

        async def work(s: Session) -> list[Exception | None]:
            results: list[Exception | None] = []
            for r in reservations:
                changed = await s.execute(self._sql.acknowledge, (r.job.id, r.token))
                results.append(None if changed else _lost(r))
            return results

        return work

    @property
    @override
    def combines_acknowledge_and_reserve(self) -> bool:
        return True

    @override
    async def acknowledge_and_reserve(
        self, reservations: Sequence[Reservation], queue: str, *, limit: int
    ) -> tuple[list[Exception | None], list[Reservation]]:
        """Both in one transaction: one commit (one disk flush) per batch instead of two."""
        if not reservations or limit < 1:
            return await super().acknowledge_and_reserve(reservations, queue, limit=limit)
        acknowledge = self._acknowledge_work(reservations)
        claim = self._reserve_work(queue, limit)

        async def work(s: Session) -> tuple[list[Exception | None], list[Reservation]]:
            return await acknowledge(s), await claim(s)

        return await self._run(work, durable=False)

    @override
    async def release(
        self,
        reservation: Reservation,
        *,
        delay: timedelta = timedelta(0),
        count_attempt: bool = True,
    ) -> None:
        give_back = 0 if count_attempt else 1
        delay_us = max(timedelta(0), delay) // _MICROSECOND
        job, dialect = reservation.job, self._dialect

        async def work(s: Session) -> None:
            due = await dialect.now(s) + delay_us
            params = (due, due, give_back, give_back, job.id, reservation.token)
            if await s.execute(self._sql.release, params) == 0:
                raise _lost(reservation)

        await self._run(work, durable=False)
        dialect.pushed()

    @override
    async def renew(self, reservation: Reservation) -> None:
        job = reservation.job

        async def work(s: Session) -> None:
            until = await self._dialect.now(s) + self._lease_us
            if await s.execute(self._sql.renew, (until, job.id, reservation.token)) == 0:
                raise _lost(reservation)

        await self._run(work, durable=False)

    @override
    async def fail(self, reservation: Reservation, error: str) -> None:
        job = reservation.job

        async def work(s: Session) -> None:
            # Recorded first, deleted second, in one transaction: a crash in
            # between rolls both back, and the job is still reserved (and is
            # reclaimed when its lease ends), never nowhere.
            now = await self._dialect.now(s)
            params = (error, now, job.id, reservation.token)
            if await s.execute(self._sql.record_failure, params) == 0:
                raise _lost(reservation)
            if await s.execute(self._sql.acknowledge, (job.id, reservation.token)) == 0:
                raise _lost(reservation)  # rolls the record back with it

        await self._run(work, durable=False)

    # -- counting --------------------------------------------------------------

    @override
    async def size(self, queue: str) -> int:
        rows = await self._run(lambda s: s.fetchall(self._sql.size, (queue,)), write=False)
        return int(rows[0][0])

    async def counts(self, queue: str) -> QueueCounts:
        """`Countable`: one read of the queue's rows by state, on the database's clock."""

        async def work(s: Session) -> Row:
            now = await self._dialect.now(s)
            rows = await s.fetchall(self._sql.counts, (now, now, now, queue))
            return rows[0]

        waiting, delayed, reserved, soonest = await self._run(work, write=False)
        return QueueCounts(
            waiting=int(waiting),
            delayed=int(delayed),
            reserved=int(reserved),
            next_due=None if (micros := _micros(soonest)) is None else from_micros(micros),
        )

    async def oldest_wait(self, queue: str) -> timedelta | None:
        """`OldestWaiting`: since when the earliest due free row has been due, on the
        database's clock (the same rows `counts` calls waiting)."""

        async def work(s: Session) -> tuple[object, int]:
            now = await self._dialect.now(s)
            rows = await s.fetchall(self._sql.oldest_due, (queue, now))
            return rows[0][0], now

        oldest, now = await self._run(work, write=False)
        if (micros := _micros(oldest)) is None:
            return None
        return timedelta(microseconds=max(0, now - micros))

    @override
    async def clear(self, queue: str) -> int:
        return await self._run(lambda s: s.execute(self._sql.clear, (queue,)))

    @override
    async def aclose(self) -> None:
        await self._dialect.aclose()

    # -- Pausable: a row per paused queue (pausing.py) -----------------------------

    async def pause(self, queue: str) -> bool:
        return await self._pauses.pause(queue)

    async def resume(self, queue: str) -> bool:
        return await self._pauses.resume(queue)

    async def paused(self, queues: Sequence[str]) -> frozenset[str]:
        return await self._pauses.paused(queues)

    # -- JobLookup and RecordStore (records.py) ---------------------------------

    async def find_job(self, job_id: str) -> Found | None:
        """The job's row, or its newest failed record; None if neither."""
        return await self._records.find_job(job_id)

    async def ahead_of(self, job_id: str) -> str | None:
        """`OrderingLookup`: the job that holds `job_id` back on its ordering key, if any."""
        return await self._records.ahead_of(job_id)

    async def remove_job(self, job_id: str) -> QueuedJob | None:
        """`JobRemover`: delete the job's row unless a worker holds it."""
        return await self._records.remove_job(job_id)

    async def put_record(self, key: str, value: bytes, ttl: timedelta) -> None:
        await self._records.put_record(key, value, ttl)

    async def get_record(self, key: str) -> bytes | None:
        return await self._records.get_record(key)

    async def forget_record(self, key: str) -> bool:
        return await self._records.forget_record(key)

    async def records(self, prefix: str) -> list[bytes]:
        return await self._records.records(prefix)

    # -- BatchStore (batching.py) -----------------------------------------------

    async def open_batch(self, batch_id: str, total: int, callbacks: Sequence[Callback]) -> None:
        await self._batches.open_batch(batch_id, total, callbacks)

    async def record_in_batch(
        self, batch: Member, job_id: str, outcome: Outcome
    ) -> BatchProgress | None:
        progress = await self._batches.record_in_batch(batch, job_id, outcome)
        if progress is not None and progress.finished:
            self._dialect.pushed()  # its callbacks may have just been queued
        return progress

    async def batch_progress(self, batch_id: str) -> BatchProgress | None:
        return await self._batches.batch_progress(batch_id)

    # -- FailedJobStore (failed.py) ---------------------------------------------

    async def failed_jobs(self, *, queue: str | None = None, limit: int = 100) -> list[FailedJob]:
        return await self._failed.failed_jobs(queue=queue, limit=limit)

    async def retry_failed(self, job_id: str) -> bool:
        return await self._failed.retry_failed(job_id)

    async def forget_failed(self, job_id: str) -> bool:
        return await self._failed.forget_failed(job_id)

    async def flush_failed(self, *, queue: str | None = None) -> int:
        return await self._failed.flush_failed(queue=queue)

    # -- RewritesStoredJobs ----------------------------------------------------

    async def rewrite_payloads(self, rewrite: Rewrite) -> Rewritten:
        """Every row of both tables offered to `rewrite`, changed ones written back (see
        `rewriting`); how many were."""
        sql = self._dialect.sql
        jobs = await rewrite_table(self._run, sql, self._tables.jobs, rewrite)
        failed = await rewrite_table(self._run, sql, self._tables.failed, rewrite)
        return Rewritten(jobs + failed)


def row_for(job: QueuedJob) -> tuple[object, ...]:
    """`job` as the values of the seam's push statement, in order."""
    available = to_micros(job.available_at)
    return (
        job.id,
        job.queue,
        job.name,
        encode_payload(job.payload),
        encode_headers(job.headers),
        job.attempts,
        job.max_attempts,
        available,
        to_micros(job.created_at),
        job.unique_key,
        job.headers.get(ORDERING_KEY),
        available,
    )


def _lost(reservation: Reservation) -> LeaseLost:
    return LeaseLost(
        f"job {reservation.job.id} is no longer reserved by this worker "
        "(its lease lapsed and another worker took it, or it was settled already)"
    )


__all__ = ["DatabaseQueue", "Dialect", "Quarantined", "row_for"]
