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
  their `--sleep`, and server-side prepared statements must be turned off
  (`prepared_statements = false`).
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
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any, ClassVar, Self

import psycopg
from typing_extensions import override

from ...._clock import from_micros
from ....envelope import QueuedJob
from ....envelope.packing import envelope_of
from ....envelope.reading import Malformed, read_columns
from ....job import Job
from ....queue import DEFAULT_LEASE, Capabilities, Reservation
from ...malformed import Pass, top_up
from .. import DatabaseQueue, Quarantined, _lost
from ..dialect import Row
from ..schema import DEFAULT_PREFIX, Tables
from .acks import acknowledged, as_arrays, seqs_of
from .connection import DEFAULT_POOL_TIMEOUT, PoolSettings, split_url, translated, unverified
from .dialect import PostgresDialect
from .floor import HEAD, REFRESH, Floors
from .health import SETTINGS_SQL, ServerSettings, warnings_for
from .listen import channel_for
from .push import COPY_FROM, PushStatements, copy_in, copy_in_sync
from .settings import PostgresSettings
from .statements import PgStatements
from .statistics import Statistics

if TYPE_CHECKING:
    from ... import DriverContext

Rows = list[Row]


_MICROSECOND = timedelta(microseconds=1)

AnyConnection = psycopg.AsyncConnection[Any] | psycopg.AsyncCursor[Any]
SyncConnection = psycopg.Connection[Any] | psycopg.Cursor[Any]


QUEUE_OPTIONS = frozenset({"lease", "migrate"})
"""The options the queue takes beyond its connection's (`PostgresSettings.OPTIONS`)."""


class PostgresQueue(DatabaseQueue):
    """The database queue on PostgreSQL. See the module docs for what it costs."""

    name: ClassVar[str] = "postgres"
    idle_wait: ClassVar[str] = "LISTEN on a channel that each push NOTIFYs"
    capabilities: ClassVar[Capabilities] = Capabilities(
        survives_restart=True,
        shared_between_processes=True,
        transactional_enqueue=True,
        due_on_server_clock=True,
        pausable=True,
        limits=True,
        job_lookup=True,
        records=True,
        cancellable=True,
        batches=True,
        ordering_keys=True,
    )

    OPTIONS: ClassVar[frozenset[str]] = PostgresSettings.OPTIONS | QUEUE_OPTIONS

    @classmethod
    def from_config(cls, url: str, options: Mapping[str, Any], context: DriverContext) -> Self:
        """`postgresql://user@host:5432/db`, with this driver's options in the URL's query
        or in `options` (which win); libpq's own query options pass through to it."""
        settings, own = PostgresSettings.read(
            url, options, who="the `postgres` driver", extra=QUEUE_OPTIONS
        )
        return cls(
            settings.dsn,
            lease=own.lease(DEFAULT_LEASE),
            migrate=own.flag("migrate", True),
            **settings.keywords(),
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
        prepared_statements: bool = True,
        insecure_skip_verify: bool = False,
    ) -> None:
        tables = Tables.for_prefix(prefix, schema)
        clean, _ = split_url(dsn, frozenset(), insecure=insecure_skip_verify)
        settings = PoolSettings(
            min_size=pool_min,
            max_size=pool_max,
            timeout=pool_timeout,
            prepared_statements=prepared_statements,
        )
        self._pg_dialect = PostgresDialect(clean, tables, settings)
        super().__init__(
            self._pg_dialect, lease=lease, prefix=prefix, migrate=migrate, schema=schema
        )
        self._pg = PgStatements.build(tables)
        self._push = PushStatements(tables)
        self._floors = Floors(refresh=min(REFRESH, lease.total_seconds() / 10))
        self._statistics = Statistics(tables.jobs)

    @override
    async def aclose(self) -> None:
        await self._statistics.aclose()
        await super().aclose()

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
        """Server settings that put accepted jobs, or the claim's speed, at risk (`doctor`)."""
        _, rows = await self._pg_dialect.one(SETTINGS_SQL, (self._tables.jobs,))
        unchecked = unverified(self._pg_dialect.dsn)
        return warnings_for(
            ServerSettings.from_row(self._tables.jobs, rows[0], unverified=unchecked)
        )

    # -- pushing ---------------------------------------------------------------

    def _push_params(self, jobs: Sequence[QueuedJob]) -> tuple[object, ...]:
        return self._push.insert_params(jobs, self._pg_dialect.channel)

    @override
    async def push_many(self, jobs: Sequence[QueuedJob]) -> list[str]:
        if not jobs:
            return []
        await self._ensure_schema()
        if len(jobs) < COPY_FROM:
            await self._pg_dialect.insert(self._push, self._push_params(jobs))
        else:
            await self._pg_dialect.copy(self._push, jobs)
        self._dialect.pushed()
        return [job.id for job in jobs]

    async def push_in(self, connection: AnyConnection, job: QueuedJob | Job) -> str:
        """Push `job` inside the caller's own transaction on `connection`.

        The job exists exactly when that transaction commits; a rollback
        takes it back with everything else. Workers hear of it at commit
        (`NOTIFY` is transactional too). `job` is an envelope or a `Job`
        (packed now, with its own options, by `packing.envelope_of`, so a bad
        payload fails here); returns the job's id. A `Job` pushed this way
        takes no uniqueness lock: that lives in the lock store, outside the
        transaction, so dispatch unique jobs through the manager.
        """
        return (await self.push_many_in(connection, [job]))[0]

    async def push_many_in(
        self, connection: AnyConnection, jobs: Sequence[QueuedJob | Job]
    ) -> list[str]:
        """`push_in` for several jobs: one statement, or a `COPY` for a big batch."""
        if not jobs:
            return []
        await self._ensure_schema()  # on the queue's own pool, outside the caller's transaction
        envelopes = self.sealed([envelope_of(job) for job in jobs])
        with translated(self._pg_dialect.where):
            if isinstance(connection, psycopg.AsyncConnection):
                async with connection.cursor() as cur:
                    await self._push_in(cur, envelopes)
            else:
                await self._push_in(connection, envelopes)
        return [job.id for job in envelopes]

    async def _push_in(self, cur: psycopg.AsyncCursor[Any], jobs: Sequence[QueuedJob]) -> None:
        if len(jobs) < COPY_FROM:
            await cur.execute(self._push.insert, self._push_params(jobs))
        else:
            await copy_in(cur, self._push, jobs, self._pg_dialect.channel)

    def push_in_sync(self, connection: SyncConnection, job: QueuedJob | Job) -> str:
        """`push_in` on a blocking psycopg connection or cursor (Django, Flask, scripts).

        Needs the tables to exist already (`rainier-queue provision`); it never
        creates them, since that would need this queue's async pool.
        """
        return self.push_many_in_sync(connection, [job])[0]

    def push_many_in_sync(
        self, connection: SyncConnection, jobs: Sequence[QueuedJob | Job]
    ) -> list[str]:
        """`push_in_sync` for several jobs: one statement, or a `COPY` for a big batch."""
        if not jobs:
            return []
        envelopes = self.sealed([envelope_of(job) for job in jobs])
        with translated(self._pg_dialect.where):
            if isinstance(connection, psycopg.Connection):
                with connection.cursor() as cur:
                    self._push_in_sync(cur, envelopes)
            else:
                self._push_in_sync(connection, envelopes)
        return [job.id for job in envelopes]

    def _push_in_sync(self, cur: psycopg.Cursor[Any], jobs: Sequence[QueuedJob]) -> None:
        if len(jobs) < COPY_FROM:
            cur.execute(self._push.insert, self._push_params(jobs))
        else:
            copy_in_sync(cur, self._push, jobs, self._pg_dialect.channel)

    # -- reserving -------------------------------------------------------------

    @override
    async def reserve(self, queue: str, *, limit: int = 1) -> list[Reservation]:
        if limit < 1:
            return []
        rows = await self._claim(queue, limit, self._claim_from(queue, limit))
        return await self._reservations(queue, rows, limit)

    def _claim_from(self, queue: str, limit: int) -> Callable[[tuple[int, int]], Awaitable[Rows]]:
        """The plain claim of up to `limit` rows of `queue`, from a given floor."""

        async def claim(floor: tuple[int, int]) -> Rows:
            params = (queue, *floor, limit, self._lease_us)
            _, rows = await self._one(self._pg.claim, params, prepare=True)
            return rows

        return claim

    async def _claim(
        self, queue: str, limit: int, first: Callable[[tuple[int, int]], Awaitable[Rows]]
    ) -> Rows:
        """Claim by `first` from this process's floor for `queue` (see `floor`); if that
        finds nothing, claim again from the head, so nothing claimable is left behind."""
        await self._statistics.before_claim(self._one)
        floor = self._floors.start(queue)
        rows = await first(floor or HEAD)
        from_head = floor is None
        if not rows and not from_head:
            rows = await self._claim_from(queue, limit)(HEAD)
            from_head = True
        keys = [(int(row[1]), int(row[0])) for row in rows]
        self._floors.claimed(queue, keys, from_head=from_head)
        self._statistics.claimed(self._one, full=len(rows) >= limit)
        return rows

    async def _reservations(self, queue: str, rows: list[Row], limit: int) -> list[Reservation]:
        """The claimed rows as reservations; rows that are not jobs are failed, and claimed for.

        An empty answer must mean an empty queue (`malformed.top_up`), so the
        places such rows took are claimed again, a bounded number of times.
        """
        first = await self._read_claimed(queue, rows)
        return await top_up(first, limit, lambda places: self._claim_again(queue, places))

    async def _claim_again(self, queue: str, limit: int) -> Pass:
        rows = await self._claim(queue, limit, self._claim_from(queue, limit))
        return await self._read_claimed(queue, rows)

    async def _read_claimed(self, queue: str, rows: list[Row]) -> Pass:
        # RETURNING has no order of its own: put them back in claim order.
        rows.sort(key=lambda row: (row[1], row[0]))
        out: list[Reservation] = []
        bad: list[Quarantined] = []
        # One claim gives every row the same lease end (its clock is read once).
        micros, lease_until = None, None
        for row in rows:
            job = read_columns(row[4:])  # attempts already count this delivery
            if isinstance(job, Malformed):
                bad.append((row[0], str(row[3]), job))
                continue
            if row[2] != micros:
                micros = row[2]
                lease_until = from_micros(int(micros))
            assert lease_until is not None
            out.append(
                Reservation(
                    job=job,
                    token=str(row[3]),
                    lease_until=lease_until,
                    lease=self._lease,
                    handle=row[0],
                )
            )
        if bad:
            await self._failed.quarantine_apart(queue, bad)
        return out, len(bad)

    @override
    async def wait_for_work(self, queues: Sequence[str], timeout: timedelta) -> None:
        if not queues:
            await asyncio.sleep(timeout.total_seconds())
            return
        marks = ", ".join(["%s"] * len(queues))

        async def look() -> timedelta | None:
            """None when work is due now, else how long until some comes due (if known)."""
            _, rows = await self._one(self._pg.soonest.format(marks=marks), [*queues] * 3)
            due, now = rows[0]
            if due is None:
                return timeout
            return None if due <= now else (int(due) - int(now)) * _MICROSECOND

        await self._pg_dialect.listener.wait(queues, timeout, look)

    # -- settling --------------------------------------------------------------

    @override
    async def acknowledge_many(self, reservations: Sequence[Reservation]) -> list[Exception | None]:
        if not reservations:
            return []
        tokens = [r.token for r in reservations]
        seqs = seqs_of(reservations)
        if seqs is None:
            ids = [r.job.id for r in reservations]
            _, rows = await self._one(self._pg.acknowledge_many_by_id, (ids, tokens))
        else:
            _, rows = await self._one(self._pg.acknowledge_many, as_arrays(seqs, tokens))
        return acknowledged(reservations, rows)

    @property
    @override
    def combines_acknowledge_and_reserve(self) -> bool:
        return True

    @override
    async def acknowledge_and_reserve(
        self, reservations: Sequence[Reservation], queue: str, *, limit: int
    ) -> tuple[list[Exception | None], list[Reservation]]:
        seqs = seqs_of(reservations)
        if not reservations or limit < 1 or seqs is None:
            return await super().acknowledge_and_reserve(reservations, queue, limit=limit)
        arrays = as_arrays(seqs, [r.token for r in reservations])
        acked: list[Sequence[object]] = []

        async def both(floor: tuple[int, int]) -> Rows:
            params = (*arrays, queue, *floor, limit, self._lease_us)
            _, rows = await self._one(self._pg.acknowledge_and_claim, params, prepare=True)
            acked.extend(row[-2:] for row in rows if row[0] is None)
            return [row[:-2] for row in rows if row[0] is not None]

        claimed = await self._claim(queue, limit, both)
        return acknowledged(reservations, acked), await self._reservations(queue, claimed, limit)

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
        self,
        statement: str,
        params: Sequence[object],
        *,
        binary: bool = False,
        prepare: bool | None = None,
    ) -> tuple[int, list[Row]]:
        await self._ensure_schema()
        return await self._pg_dialect.one(statement, params, binary=binary, prepare=prepare)


__all__ = ["PostgresQueue", "channel_for"]
