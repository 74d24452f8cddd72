# SPDX-License-Identifier: MIT
"""`PostgresQueue`: the database queue on PostgreSQL, and the production default.

## Read this before choosing it

Most applications that need a job queue already run PostgreSQL, and a
queue in it needs nothing new to operate, back up or secure. A job row is
as durable as any other row, workers on any number of machines share it,
and (what no broker offers) a job can be pushed inside the application's
own transaction, so it exists exactly when the order, the user or the
payment it is about does (`push_in`, `push_in_sync`). What it costs:

- **Throughput is the database's write rate.** Every claim and every settle
  is a write transaction on the jobs table, and each commit waits for the
  WAL flush: thousands of jobs a second per server, not a broker's
  hundreds of thousands. Claims take several rows at a time and settles
  are batched, which is what keeps that number up.
- **Table churn.** Rows are inserted and deleted all day, so autovacuum has
  to keep up; on a busy queue, tune it for the jobs table (or the dead rows
  slow the claim's index scan).
- **One connection per idle worker process, held.** An idle worker hears
  about a push through `LISTEN` on a connection of its own, so it wakes
  within milliseconds, not at its next poll. `LISTEN` does not work through
  PgBouncer in transaction mode; there, workers fall back to polling at
  their `--sleep`, and server-side prepared statements must be turned off.
- **Clock: the server's.** Leases and due times are read from the database's
  clock (`clock_timestamp()`), so workers whose clocks disagree still agree
  on when a lease ends.

Claims are one statement: an `UPDATE` over the rows picked by `SELECT ...
FOR UPDATE SKIP LOCKED LIMIT n`, `RETURNING` the claimed envelopes, so two
workers never wait on each other's rows and never take the same one.
Migrations run under an advisory lock, so workers starting together apply
each step once. Table names take a prefix (and optionally a schema), both
checked as identifiers before any SQL is built from them.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any, ClassVar, Self, TypeVar

import psycopg
from psycopg import sql
from typing_extensions import override

from ..._clock import from_micros, to_micros, utcnow
from ...dispatch import DispatchOptions, build_envelope
from ...durations import parse_duration
from ...envelope import QueuedJob, encode_payload
from ...errors import ConfigurationError, UnknownOption
from ...job import Job
from ...queue import DEFAULT_LEASE, Capabilities, Reservation
from . import DatabaseQueue, _lost, job_from_row
from ._postgres import (
    DEFAULT_POOL_TIMEOUT,
    NOW_US,
    Pool,
    PoolSettings,
    connect_kwargs,
    describe_dsn,
    split_url,
    translated,
)
from .dialect import Dialect, Row, Session, Work
from .schema import DEFAULT_PREFIX, Tables
from .sqlite import _flag
from .statements import ENVELOPE

if TYPE_CHECKING:
    from .. import DriverContext

T = TypeVar("T")

log = logging.getLogger(__name__)

_MICROSECOND = timedelta(microseconds=1)
_PAYLOAD_LIMIT = 1000
"""A queue name longer than this (in bytes) is announced with an empty payload,
which wakes every waiter: NOTIFY payloads must stay under 8000 bytes."""

AnyConnection = psycopg.AsyncConnection[Any] | psycopg.AsyncCursor[Any]
SyncConnection = psycopg.Connection[Any] | psycopg.Cursor[Any]


class _Session:
    """The `Session` over one psycopg cursor inside a transaction."""

    def __init__(self, cursor: psycopg.AsyncCursor[Any]) -> None:
        self._cur = cursor

    async def execute(self, sql: str, params: Sequence[object] = ()) -> int:
        await self._cur.execute(sql, params)
        return self._cur.rowcount

    async def executemany(self, sql: str, rows: Sequence[Sequence[object]]) -> None:
        await self._cur.executemany(sql, rows)

    async def fetchall(self, sql: str, params: Sequence[object] = ()) -> list[Row]:
        await self._cur.execute(sql, params)
        return await self._cur.fetchall()


# -- hearing about pushes --------------------------------------------------------


@dataclass(eq=False, slots=True)
class _Waiter:
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[None]
    queues: frozenset[str]

    def wake(self) -> None:
        with contextlib.suppress(RuntimeError):  # its loop closed already
            self.loop.call_soon_threadsafe(_resolve, self.future)

    async def wait(self, timeout: timedelta) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(self.future), max(0.0, timeout.total_seconds()))


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


class _Listener:
    """One `LISTEN` connection per queue object, opened when a worker first waits.

    Notifications carry the queue's name; an empty one wakes everybody.
    Whenever the connection is (re)established, every waiter is woken, so a
    push made while nobody was listening is found by their next reserve:
    notifications can be lost, jobs cannot.
    """

    def __init__(self, dsn: str, channel: str, where: str) -> None:
        self._dsn = dsn
        self._channel = channel
        self._where = where
        self._waiters: set[_Waiter] = set()
        self._task: asyncio.Task[None] | None = None
        self.listening = False
        """Whether the `LISTEN` connection is up now."""

    def register(self, queues: Collection[str]) -> _Waiter:
        loop = asyncio.get_running_loop()
        waiter = _Waiter(loop, loop.create_future(), frozenset(queues))
        self._waiters.add(waiter)
        if self._task is None or self._task.done():
            self._task = loop.create_task(self._listen(), name=f"rainier-listen {self._channel}")
        return waiter

    def unregister(self, waiter: _Waiter) -> None:
        self._waiters.discard(waiter)

    def wake(self, queue: str | None) -> None:
        for waiter in list(self._waiters):
            if not queue or queue in waiter.queues:
                waiter.wake()

    async def _listen(self) -> None:
        backoff = 0.1
        while True:
            try:
                conn = await psycopg.AsyncConnection.connect(
                    self._dsn, **connect_kwargs(self._dsn, "rainier-queue listener")
                )
                async with conn:
                    await conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self._channel)))
                    backoff = 0.1
                    self.listening = True
                    self.wake(None)  # anything pushed while we were deaf is found now
                    async for note in conn.notifies():
                        self.wake(note.payload)
            except asyncio.CancelledError:
                self.listening = False
                raise
            except Exception as exc:  # the connection dropped: poll meanwhile, reconnect
                log.debug("LISTEN on %s lost (%s); reconnecting", self._where, exc)
            self.listening = False
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 5.0)

    async def aclose(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self.wake(None)


def channel_for(tables: Tables) -> str:
    """The `NOTIFY` channel of one set of tables: readable when short, hashed when long."""
    name = f"{tables.schema}.{tables.prefix}jobs" if tables.schema else f"{tables.prefix}jobs"
    if len(name) <= 60:
        return name
    return "rainier_" + hashlib.sha1(name.encode()).hexdigest()[:24]


# -- the dialect -------------------------------------------------------------------


class PostgresDialect(Dialect):
    """PostgreSQL through a psycopg 3 async pool; claims with `SKIP LOCKED`."""

    name: ClassVar[str] = "postgres"
    types: ClassVar[Mapping[str, str]] = {
        "seq_pk": "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY",
        "key": "TEXT",
        "text": "TEXT",
        "bigint": "BIGINT",
        "int": "INTEGER",
    }
    paramstyle: ClassVar[Any] = "format"
    claim_suffix: ClassVar[str] = "FOR UPDATE SKIP LOCKED"
    # to_regclass reads a qualified name too, and is NULL (not an error) when absent.
    table_exists_sql: ClassVar[str] = "SELECT 1 WHERE to_regclass(?) IS NOT NULL"

    def __init__(self, dsn: str, tables: Tables, pool: PoolSettings) -> None:
        super().__init__()
        self.dsn = dsn
        self.tables = tables
        self.channel = channel_for(tables)
        self.where = describe_dsn(dsn)
        self.pool = Pool(dsn, pool, name="rainier-queue")
        self.listener = _Listener(dsn, self.channel, self.where)
        self._lock_key = f"rainier_queue migrate {tables.schema or ''}.{tables.prefix}"

    @override
    async def run(self, work: Work[T], *, write: bool = True) -> T:
        async with self.pool.connection() as conn, conn.transaction():
            return await work(_Session(conn.cursor()))

    async def one(
        self, statement: str, params: Sequence[object], *, binary: bool = False
    ) -> tuple[int, list[Row]]:
        """Run one statement on its own, outside an explicit transaction.

        A single statement is atomic by itself, so this saves the `BEGIN` and
        `COMMIT` round trips a unit of work costs: one trip instead of three.
        Returns (rows changed, rows returned). `binary` sends the parameters
        in binary, which spares big arrays their text quoting.
        """
        async with self.pool.connection() as conn:
            cur = await conn.execute(statement, params, binary=binary)
            rows = await cur.fetchall() if cur.description is not None else []
            return cur.rowcount, rows

    @override
    async def now(self, session: Session) -> int:
        rows = await session.fetchall(f"SELECT {NOW_US}")
        return int(rows[0][0])

    @override
    async def lock_for_migration(self, session: Session) -> None:
        await session.execute(
            self.sql("SELECT pg_advisory_xact_lock(hashtext(?))"), (self._lock_key,)
        )
        if self.tables.schema:
            await session.execute(f"CREATE SCHEMA IF NOT EXISTS {self.tables.schema}")

    @override
    async def announce(self, session: Session, queues: Collection[str]) -> None:
        for queue in queues:
            await session.execute(
                self.sql("SELECT pg_notify(?, ?)"), (self.channel, notify_payload(queue))
            )

    @override
    def pushed(self) -> None:
        self.listener.wake(None)

    @override
    async def wait(self, queues: Sequence[str], timeout: timedelta) -> None:
        waiter = self.listener.register(queues)
        try:
            await waiter.wait(timeout)
        finally:
            self.listener.unregister(waiter)

    @override
    async def aclose(self) -> None:
        await self.listener.aclose()
        await self.pool.aclose()

    @override
    def describe(self) -> str:
        return self.where


def notify_payload(queue: str) -> str:
    """What a push announces: the queue's name, or nothing (wake all) if it is too long."""
    return queue if len(queue.encode()) <= _PAYLOAD_LIMIT else ""


# -- the queue -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _PgStatements:
    """The statements PostgreSQL runs in one round trip where portable SQL takes several."""

    push: str
    claim: str
    acknowledge_many: str
    release: str
    renew: str
    fail: str
    soonest: str
    """Template with `{marks}` for the queue names."""

    @classmethod
    def build(cls, tables: Tables) -> Self:
        jobs = tables.jobs
        columns = (
            "id text, queue text, name text, payload text, headers text, attempts int, "
            "max_attempts int, available_at bigint, created_at bigint, unique_key text, "
            "delay bigint"
        )
        arrays = ", ".join(
            f"%s::{t}[]"
            for t in ("text",) * 5 + ("int",) * 2 + ("bigint",) * 2 + ("text", "bigint")
        )
        names = ", ".join(c.split()[0] for c in columns.split(", "))
        return cls(
            # One statement: the rows, their due times on the server's clock,
            # and one NOTIFY per queue (delivered only when the transaction commits).
            push=f"WITH clock AS (SELECT {NOW_US} AS now), "
            f"ins AS (INSERT INTO {jobs} ({ENVELOPE}, due_at) "
            f"SELECT {ENVELOPE}, clock.now + GREATEST(u.delay, 0) "
            f"FROM unnest({arrays}) AS u({names}), clock RETURNING queue) "
            "SELECT pg_notify(%s, CASE WHEN octet_length(q) <= "
            f"{_PAYLOAD_LIMIT} THEN q ELSE '' END) FROM (SELECT DISTINCT queue AS q FROM ins) AS d",
            claim=f"WITH clock AS (SELECT {NOW_US} AS now), "
            f"picked AS (SELECT seq, due_at AS was_due FROM {jobs} "
            "WHERE queue = %s AND due_at <= (SELECT now FROM clock) "
            "ORDER BY due_at, seq LIMIT %s FOR UPDATE SKIP LOCKED) "
            f"UPDATE {jobs} AS j SET attempts = j.attempts + 1, "
            "reservation_token = replace(gen_random_uuid()::text, '-', ''), "
            "reserved_at = clock.now, due_at = clock.now + %s "
            "FROM picked, clock WHERE j.seq = picked.seq "
            f"RETURNING j.seq, picked.was_due, j.due_at, j.reservation_token, "
            + ", ".join(f"j.{c}" for c in ENVELOPE.split(", ")),
            acknowledge_many=f"DELETE FROM {jobs} AS j USING unnest(%s::text[], %s::text[]) "
            "AS s(id, token) WHERE j.id = s.id AND j.reservation_token = s.token "
            "RETURNING j.id, j.reservation_token",
            release=f"WITH clock AS (SELECT {NOW_US} AS now) UPDATE {jobs} SET "
            "reservation_token = NULL, reserved_at = NULL, "
            "available_at = clock.now + %s, due_at = clock.now + %s, "
            "attempts = CASE WHEN attempts >= %s THEN attempts - %s ELSE 0 END "
            "FROM clock WHERE id = %s AND reservation_token = %s",
            renew=f"UPDATE {jobs} SET due_at = {NOW_US} + %s "
            "WHERE id = %s AND reservation_token = %s",
            # Removed and recorded in one statement, so atomically: the job is
            # in exactly one of the two tables, whatever happens.
            fail=f"WITH gone AS (DELETE FROM {jobs} WHERE id = %s AND reservation_token = %s "
            f"RETURNING {ENVELOPE}) INSERT INTO {tables.failed} ({ENVELOPE}, error, failed_at) "
            f"SELECT {ENVELOPE}, %s, {NOW_US} FROM gone",
            soonest=f"SELECT (SELECT MIN(due_at) FROM {jobs} WHERE queue IN ({{marks}})), {NOW_US}",
        )


class PostgresQueue(DatabaseQueue):
    """The database queue on PostgreSQL. See the module docs for what it costs."""

    name: ClassVar[str] = "postgres"
    capabilities: ClassVar[Capabilities] = Capabilities(
        survives_restart=True,
        shared_between_processes=True,
        transactional_enqueue=True,
    )

    OPTIONS: ClassVar[frozenset[str]] = frozenset(
        {"lease", "prefix", "schema", "migrate", "pool_min", "pool_max", "pool_timeout"}
    )

    @classmethod
    def from_config(cls, url: str, options: Mapping[str, Any], context: DriverContext) -> Self:
        """`postgresql://user@host:5432/db`, with this driver's options in the URL's query
        or in `options` (which win); libpq's own query options pass through to it."""
        dsn, query = split_url(url, cls.OPTIONS)
        merged: dict[str, Any] = {**query, **options}
        for key in merged:
            if key not in cls.OPTIONS:
                raise UnknownOption("the `postgres` driver", key, cls.OPTIONS)
        lease = merged.get("lease")
        timeout = merged.get("pool_timeout")
        return cls(
            dsn,
            lease=DEFAULT_LEASE if lease is None else parse_duration(lease, setting="lease"),
            prefix=merged.get("prefix", DEFAULT_PREFIX),
            schema=merged.get("schema") or None,
            migrate=_flag(merged.get("migrate", True), setting="migrate"),
            pool_min=_count(merged.get("pool_min", 1), setting="pool_min"),
            pool_max=_count(merged.get("pool_max", 10), setting="pool_max"),
            pool_timeout=(
                DEFAULT_POOL_TIMEOUT
                if timeout is None
                else parse_duration(timeout, setting="pool_timeout")
            ),
        )

    def __init__(
        self,
        dsn: str,
        *,
        lease: timedelta = DEFAULT_LEASE,
        prefix: str = DEFAULT_PREFIX,
        schema: str | None = None,
        migrate: bool = True,
        pool_min: int = 1,
        pool_max: int = 10,
        pool_timeout: timedelta = DEFAULT_POOL_TIMEOUT,
    ) -> None:
        tables = Tables.for_prefix(prefix, schema)
        clean, _ = split_url(dsn, frozenset())
        self._pg_dialect = PostgresDialect(
            clean, tables, PoolSettings(min_size=pool_min, max_size=pool_max, timeout=pool_timeout)
        )
        super().__init__(
            self._pg_dialect, lease=lease, prefix=prefix, migrate=migrate, schema=schema
        )
        self._pg = _PgStatements.build(tables)

    @property
    def listening(self) -> bool:
        """Whether this queue's `LISTEN` connection is up (it opens when a worker first waits)."""
        return self._pg_dialect.listener.listening

    @property
    def schema(self) -> str | None:
        """The schema the tables live in, or None for the connection's search path."""
        return self._tables.schema

    @override
    def describe(self) -> str:
        where = f"{self.schema}.{self.prefix}" if self.schema else self.prefix
        return super().describe().replace(f"tables {self.prefix}*", f"tables {where}*")

    async def health_warnings(self) -> list[str]:
        """Server settings that put accepted jobs at risk (`rainier-queue doctor`)."""
        _, rows = await self._pg_dialect.one(
            "SELECT current_setting('synchronous_commit'), current_setting('fsync')", ()
        )
        synchronous_commit, fsync = (str(v) for v in rows[0])
        warnings: list[str] = []
        if synchronous_commit == "off":
            warnings.append(
                "synchronous_commit is off: a push can return before its job is on disk, so a "
                "server crash can lose jobs that were accepted; set it to on for this database"
            )
        if fsync == "off":
            warnings.append(
                "fsync is off: a server crash can lose or corrupt the jobs table; turn it on"
            )
        return warnings

    # -- pushing ---------------------------------------------------------------

    def _push_params(self, jobs: Sequence[QueuedJob | Job]) -> tuple[object, ...]:
        envelopes = [_envelope(job) for job in jobs]
        now = to_micros(utcnow())
        columns: list[list[object]] = [[] for _ in range(11)]
        for job in envelopes:
            available = to_micros(job.available_at)
            values = (
                job.id,
                job.queue,
                job.name,
                encode_payload(job.payload),
                _headers(job),
                job.attempts,
                job.max_attempts,
                available,
                to_micros(job.created_at),
                job.unique_key,
                # A delay is kept as a delay, measured from the server's clock:
                # a web server whose clock runs ahead must not hold jobs back.
                available - now,
            )
            for column, value in zip(columns, values, strict=True):
                column.append(value)
        return (*columns, self._pg_dialect.channel)

    @override
    async def push_many(self, jobs: Sequence[QueuedJob]) -> list[str]:
        if not jobs:
            return []
        await self._one(self._pg.push, self._push_params(jobs), binary=True)
        self._dialect.pushed()
        return [job.id for job in jobs]

    async def push_in(self, connection: AnyConnection, job: QueuedJob | Job) -> str:
        """Push `job` inside the caller's own transaction on `connection`.

        The job exists exactly when that transaction commits; a rollback
        takes it back with everything else. Workers hear of it at commit
        (`NOTIFY` is transactional too). `job` is an envelope or a `Job`
        (whose payload is checked now); returns the job's id.
        """
        return (await self.push_many_in(connection, [job]))[0]

    async def push_many_in(
        self, connection: AnyConnection, jobs: Sequence[QueuedJob | Job]
    ) -> list[str]:
        """`push_in` for several jobs, in one statement."""
        if not jobs:
            return []
        await self._ensure_schema()  # on the queue's own pool, outside the caller's transaction
        envelopes = [_envelope(job) for job in jobs]
        params = self._push_params(envelopes)
        with translated(self._pg_dialect.where):
            if isinstance(connection, psycopg.AsyncConnection):
                async with connection.cursor() as cur:
                    await cur.execute(self._pg.push, params)
            else:
                await connection.execute(self._pg.push, params)
        return [job.id for job in envelopes]

    def push_in_sync(self, connection: SyncConnection, job: QueuedJob | Job) -> str:
        """`push_in` on a blocking psycopg connection or cursor (Django, Flask, scripts).

        Needs the tables to exist already (`rainier-queue migrate`); it never
        creates them, since that would need this queue's async pool.
        """
        return self.push_many_in_sync(connection, [job])[0]

    def push_many_in_sync(
        self, connection: SyncConnection, jobs: Sequence[QueuedJob | Job]
    ) -> list[str]:
        """`push_in_sync` for several jobs, in one statement."""
        if not jobs:
            return []
        envelopes = [_envelope(job) for job in jobs]
        params = self._push_params(envelopes)
        with translated(self._pg_dialect.where):
            if isinstance(connection, psycopg.Connection):
                with connection.cursor() as cur:
                    cur.execute(self._pg.push, params)
            else:
                connection.execute(self._pg.push, params)
        return [job.id for job in envelopes]

    # -- reserving -------------------------------------------------------------

    @override
    async def reserve(self, queue: str, *, limit: int = 1) -> list[Reservation]:
        if limit < 1:
            return []
        _, rows = await self._one(self._pg.claim, (queue, limit, self._lease_us))
        # RETURNING has no order of its own: put them back in claim order.
        rows.sort(key=lambda row: (row[1], row[0]))
        return [
            Reservation(
                job=job_from_row(row[4:]),  # attempts already count this delivery
                token=str(row[3]),
                lease_until=from_micros(int(row[2])),
                lease=self._lease,
                handle=row[0],
            )
            for row in rows
        ]

    @override
    async def wait_for_work(self, queues: Sequence[str], timeout: timedelta) -> None:
        if not queues:
            await asyncio.sleep(timeout.total_seconds())
            return
        # Listen first, look second: a push landing between the two still wakes us.
        listener = self._pg_dialect.listener
        waiter = listener.register(queues)
        try:
            marks = ", ".join(["%s"] * len(queues))
            _, rows = await self._one(self._pg.soonest.format(marks=marks), queues)
            due, now = rows[0]
            if due is not None:
                if due <= now:
                    return
                timeout = min(timeout, (int(due) - int(now)) * _MICROSECOND)
            await waiter.wait(timeout)
        finally:
            listener.unregister(waiter)

    # -- settling --------------------------------------------------------------

    @override
    async def acknowledge_many(self, reservations: Sequence[Reservation]) -> list[Exception | None]:
        if not reservations:
            return []
        ids = [r.job.id for r in reservations]
        tokens = [r.token for r in reservations]
        _, rows = await self._one(self._pg.acknowledge_many, (ids, tokens))
        done = {(str(job_id), str(token)) for job_id, token in rows}
        return [None if (r.job.id, r.token) in done else _lost(r) for r in reservations]

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
        params = (delay_us, delay_us, give_back, give_back, reservation.job.id, reservation.token)
        if (await self._one(self._pg.release, params))[0] == 0:
            raise _lost(reservation)
        self._dialect.pushed()

    @override
    async def renew(self, reservation: Reservation) -> None:
        params = (self._lease_us, reservation.job.id, reservation.token)
        if (await self._one(self._pg.renew, params))[0] == 0:
            raise _lost(reservation)

    @override
    async def fail(self, reservation: Reservation, error: str) -> None:
        params = (reservation.job.id, reservation.token, error)
        if (await self._one(self._pg.fail, params))[0] == 0:
            raise _lost(reservation)

    @override
    async def acknowledge(self, reservation: Reservation) -> None:
        params = (reservation.job.id, reservation.token)
        if (await self._one(self._sql.acknowledge, params))[0] == 0:
            raise _lost(reservation)

    async def _one(
        self, statement: str, params: Sequence[object], *, binary: bool = False
    ) -> tuple[int, list[Row]]:
        await self._ensure_schema()
        return await self._pg_dialect.one(statement, params, binary=binary)


def _envelope(job: QueuedJob | Job) -> QueuedJob:
    """The envelope to push: as given, or built from a `Job` with its own options.

    A `Job` pushed this way takes no uniqueness lock (that lives in the
    cache, outside the transaction); dispatch unique jobs through the manager.
    """
    return job if isinstance(job, QueuedJob) else build_envelope(job, DispatchOptions())


def _headers(job: QueuedJob) -> str:
    return json.dumps(dict(job.headers), separators=(",", ":"), ensure_ascii=False)


def _count(value: object, *, setting: str) -> int:
    try:
        if isinstance(value, bool):
            raise ValueError
        return int(str(value))
    except ValueError:
        raise ConfigurationError(f"`{setting}` must be a whole number, not {value!r}") from None


__all__ = ["PostgresDialect", "PostgresQueue", "channel_for"]
