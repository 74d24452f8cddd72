# SPDX-License-Identifier: MIT
"""`MySQLQueue`: the database queue on MySQL 8 or MariaDB 10.6 and newer.

## Read this before choosing it

Many applications already run MySQL or MariaDB, back it up and watch it;
a queue in it adds no service to operate, a pushed job is as durable as
any committed row, and workers on any number of machines share it. Claims
take several due rows at once with `SELECT ... FOR UPDATE SKIP LOCKED`, so
workers never queue up behind each other's claims. What it costs:

- **A recent server.** SKIP LOCKED came with MariaDB 10.6 and MySQL 8.0.1;
  the queue checks `VERSION()` on first use and refuses an older server,
  naming the version it needs.
- **Round trips.** MySQL has no `UPDATE ... RETURNING`, so a claim is a
  locking SELECT (which also reads the server's clock), one UPDATE for the
  whole batch and a COMMIT; acknowledging a batch is one DELETE and a
  COMMIT (`acks.py`; a locking SELECT first only when a row was lost).
  aiomysql is pure Python, so each trip also costs client CPU. Throughput
  is thousands of jobs a second on a small machine, not a broker's
  hundreds of thousands.
- **Polling across machines.** There is no LISTEN/NOTIFY. A push wakes
  idle workers in the pushing process at once, and those of other
  processes on the same machine through a datagram each (`nearby.py`: a
  UNIX socket per waiting process in a private temp folder named for the
  server's host, port and database as the URL spells them). Workers on
  other machines see it at their next poll, every `poll_interval` (100 ms,
  so 50 ms late on average; each look is one indexed read per idle
  worker), or when a delayed job or a lease comes due. Each push lists the
  folder and sends one datagram per waiting process on its machine.
- **Migrations are not transactional.** DDL commits on its own in MySQL, so
  the migration steps run under a named lock (`GET_LOCK`) instead of inside
  one transaction, and each step tolerates finding its table or index made
  already: a migration cut short is finished by the next one.
- **Transactional enqueue on the application's own connection.** The queue
  has its own pool, so `push` commits on its own; `push_in(conn, job)`
  writes the job with the application's aiomysql connection instead, in the
  transaction it has open, so the job exists exactly when the application's
  rows do. Workers find it at their next poll (`poll_interval`): a wake-up
  sent before the commit would find nothing.
- **Statement-based binlogs** warn that SKIP LOCKED is unsafe to replicate;
  run the server with `binlog_format=ROW` (the default on MySQL 8).

Time comes from the server (`UTC_TIMESTAMP(6)`, in microseconds), so
workers on machines whose clocks disagree still agree on when a lease ends.
Every text column is utf8mb4; ids and queue names use the binary collation,
so `Emails` and `emails` are two queues and an emoji is stored as itself.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Self, TypeVar

import pymysql  # type: ignore[import-untyped]
from typing_extensions import override

from ...._clock import from_micros
from ....envelope import QueuedJob
from ....envelope.packing import envelope_of
from ....envelope.reading import Malformed, read_columns
from ....errors import BrokerUnavailable, ConfigurationError
from ....job import Job
from ....queue import DEFAULT_LEASE, Capabilities, Reservation, new_token
from .. import POLL_INTERVAL, DatabaseQueue, Quarantined, _lost
from ..dialect import Dialect, Work
from ..dialect import Session as SessionProtocol
from ..nearby import shared_rendezvous
from ..schema import DEFAULT_PREFIX, check_prefix
from ..statements import ENVELOPE, HELD, UNLEASED, in_order
from .acks import NotAllOurs, delete_by_seq, seqs_of
from .address import ClientTLS, ServerAddress
from .connection import NOW_US, MySQLPool, PlainCursors, Session, translate, wakeup_for
from .push import insert_jobs
from .settings import DEFAULT_CONNECT_TIMEOUT, DEFAULT_POOL_MAX, MySQLSettings

if TYPE_CHECKING:
    from ... import DriverContext

T = TypeVar("T")

QUEUE_OPTIONS = frozenset({"lease", "migrate", "poll_interval", "local_wakeup"})
"""The options the queue takes beyond its server's (`MySQLSettings.OPTIONS`)."""

_MIGRATION_LOCK_WAIT = 60
"""Seconds a migration waits for another process's migration to finish."""


class MySQLDialect(Dialect):
    """MySQL / MariaDB through an aiomysql pool; claims with `FOR UPDATE SKIP LOCKED`."""

    name: ClassVar[str] = "mysql"
    types: ClassVar[Mapping[str, str]] = {
        "seq_pk": "BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY",
        # 191 characters of 4 bytes fit any InnoDB index; binary collation so
        # ids and queue names compare exactly (case and accents included).
        "key": "VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin",
        "text": "LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin",
        "bigint": "BIGINT",
        "int": "INT",
    }
    paramstyle: ClassVar[Literal["qmark", "format"]] = "format"
    claim_suffix: ClassVar[str] = "FOR UPDATE SKIP LOCKED"
    partial_indexes: ClassVar[bool] = False
    table_exists_sql: ClassVar[str] = (
        "SELECT 1 FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = ?"
    )

    def __init__(self, pool: MySQLPool, *, local_wakeup: bool = True) -> None:
        address = pool.address
        wakeup = wakeup_for(address)
        # Spelt as `wakeup_for` keys it, so one rendezvous serves one `Wakeup`.
        identity = f"mysql:{address.host}:{address.port}/{address.database}"
        nearby = shared_rendezvous(identity, wakeup.notify) if local_wakeup else None
        super().__init__(wakeup=wakeup, nearby=nearby)
        self.pool = pool

    @override
    async def run(self, work: Work[T], *, write: bool = True, durable: bool = True) -> T:
        return await self.pool.run(work)

    @override
    async def now(self, session: SessionProtocol) -> int:
        rows = await session.fetchall(f"SELECT {NOW_US}")
        return int(rows[0][0])

    @override
    async def lock_for_migration(self, session: SessionProtocol) -> None:
        if not isinstance(session, Session):  # pragma: no cover - always ours
            raise TypeError("the mysql dialect runs only its own sessions")
        name = f"rainier_queue_migrate_{self.pool.address.database}"[:64]
        rows = await session.fetchall(
            self.sql("SELECT GET_LOCK(?, ?)"), (name, _MIGRATION_LOCK_WAIT)
        )
        if not rows or rows[0][0] != 1:
            raise BrokerUnavailable(
                f"another process has been migrating {self.describe()} for more than "
                f"{_MIGRATION_LOCK_WAIT}s; try again when it is done"
            )
        session.release_locks.append(name)
        session.migrating = True

    @override
    async def aclose(self) -> None:
        self.stop_listening()
        await self.pool.aclose()

    @override
    def describe(self) -> str:
        return f"mysql {self.pool.address.describe()}"


class MySQLQueue(DatabaseQueue):
    """The database queue on MySQL or MariaDB. See the module docs for what it costs."""

    name: ClassVar[str] = "mysql"
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

    OPTIONS: ClassVar[frozenset[str]] = MySQLSettings.OPTIONS | QUEUE_OPTIONS

    @classmethod
    def from_config(cls, url: str, options: Mapping[str, Any], context: DriverContext) -> Self:
        """`mysql://user:password@host:3306/database` (or `mariadb://`), options in the
        URL's query or in `options` (which win): `lease`, `prefix`, `migrate`,
        `pool_min`, `pool_max`, `connect_timeout`, `poll_interval` (how often an
        idle worker looks for work, 100ms), `local_wakeup` (wake idle workers of
        other processes on this machine, true), and TLS: `ssl`, `ssl_ca`,
        `ssl_cert`, `ssl_key`, `insecure_skip_verify`."""
        settings, own = MySQLSettings.read(
            url, options, who="the `mysql` driver", extra=QUEUE_OPTIONS
        )
        return cls(
            settings.url,
            lease=own.lease(DEFAULT_LEASE),
            migrate=own.flag("migrate", True),
            poll_interval=own.duration("poll_interval", POLL_INTERVAL),
            local_wakeup=own.flag("local_wakeup", True),
            **settings.keywords(),
        )

    def __init__(
        self,
        url: str,
        *,
        lease: timedelta = DEFAULT_LEASE,
        prefix: str = DEFAULT_PREFIX,
        migrate: bool = True,
        pool_min: int = 1,
        pool_max: int = DEFAULT_POOL_MAX,
        connect_timeout: timedelta = DEFAULT_CONNECT_TIMEOUT,
        tls: ClientTLS | None = None,
        poll_interval: timedelta = POLL_INTERVAL,
        local_wakeup: bool = True,
    ) -> None:
        check_prefix(prefix)
        address, query = ServerAddress.from_url(url, what="the mysql driver")
        if query:
            raise ConfigurationError(
                "MySQLQueue takes its options as arguments; a URL with a query "
                "(`?prefix=...`) goes through `open_queue`"
            )
        pool = self._pool = MySQLPool(
            address,
            pool_min=pool_min,
            pool_max=pool_max,
            connect_timeout=connect_timeout,
            client_tls=tls,
        )
        super().__init__(
            MySQLDialect(pool, local_wakeup=local_wakeup),
            lease=lease,
            prefix=prefix,
            migrate=migrate,
            poll_interval=poll_interval,
        )
        jobs = self._tables.jobs
        # The server's clock is read inside the claim itself (it is fixed for
        # the length of one statement), which saves a round trip per reserve.
        self._claimable = (
            f"SELECT seq, {ENVELOPE}, {NOW_US} FROM {jobs} AS j "
            f"WHERE queue = %s AND due_at <= {NOW_US} AND {UNLEASED.replace('?', NOW_US)} "
            f"AND {in_order(jobs, 'j', NOW_US, held_index=MySQLDialect.partial_indexes)} "
            "ORDER BY due_at, seq LIMIT %s FOR UPDATE SKIP LOCKED"
        )
        self._claim_rows = (
            f"UPDATE {jobs} SET attempts = attempts + 1, reservation_token = CASE seq {{cases}} "
            f"END, reserved_at = %s, lease_until = %s, {HELD} WHERE seq IN ({{marks}})"
        )
        self._lock_held = (
            f"SELECT id, reservation_token FROM {jobs} WHERE id IN ({{marks}}) FOR UPDATE"
        )
        self._delete_ids = f"DELETE FROM {jobs} WHERE id IN ({{marks}})"

    async def health_warnings(self) -> list[str]:
        """Server settings that put accepted jobs at risk (`rainier-queue doctor`)."""

        async def settings(s: SessionProtocol) -> list[tuple[Any, ...]]:
            return await s.fetchall(
                "SELECT @@innodb_flush_log_at_trx_commit, @@log_bin, @@binlog_format"
            )

        flush, log_bin, binlog_format = (await self._dialect.run(settings))[0]
        warnings: list[str] = []
        if int(flush) != 1:
            warnings.append(
                f"innodb_flush_log_at_trx_commit is {flush}: a push can return before its job "
                "is on disk, so a server crash can lose about a second of accepted jobs; set it "
                "to 1"
            )
        if int(log_bin) and str(binlog_format).upper() == "STATEMENT":
            warnings.append(
                "binlog_format is STATEMENT: replicas may apply the queue's SKIP LOCKED claims "
                "differently from the primary; set binlog_format to ROW (or MIXED)"
            )
        return warnings + self._pool.transport_warnings()

    # Round trips are what a MySQL queue spends its time on (aiomysql parses
    # little; the wire and the server's turn-around dominate), so the two
    # per-job statements of the portable queue, a claim UPDATE and an
    # acknowledging DELETE per row, become one statement per batch here.

    @override
    async def push_many(self, jobs: Sequence[QueuedJob]) -> list[str]:
        if not jobs:
            return []
        table = self._tables.jobs

        async def work(s: SessionProtocol) -> None:
            await insert_jobs(s, table, jobs)

        await self._run(work)
        self._dialect.pushed()
        return [job.id for job in jobs]

    async def push_in(self, connection: Any, job: QueuedJob | Job) -> str:
        """Push `job` in the transaction the application's aiomysql `connection` has open.

        The job exists exactly when that transaction commits; a rollback takes
        it back. The connection must reach this queue's database (the tables
        are named as the queue names them). `job` is an envelope or a `Job`
        (packed now with its own options); returns its id. A `Job` takes no
        uniqueness lock this way.
        """
        return (await self.push_many_in(connection, [job]))[0]

    async def push_many_in(self, connection: Any, jobs: Sequence[QueuedJob | Job]) -> list[str]:
        """`push_in` for several jobs, in order, in as few statements as the server allows."""
        envelopes = list(self.sealed([envelope_of(job) for job in jobs]))
        if not envelopes:
            return []
        await self._ensure_schema()  # on the queue's own pool, outside the caller's transaction
        try:
            await insert_jobs(Session(PlainCursors(connection)), self._tables.jobs, envelopes)
        except pymysql.err.Error as exc:
            raise translate(exc, self._pool.address) from exc
        return [job.id for job in envelopes]

    @override
    def _claim_pass(self, queue: str, limit: int) -> Work[tuple[list[Reservation], int]]:
        async def work(s: SessionProtocol) -> tuple[list[Reservation], int]:
            rows = await s.fetchall(self._claimable, (queue, limit))
            if not rows:
                return [], 0
            now = int(rows[0][-1])
            until = now + self._lease_us
            read = [(row, read_columns(row[1:-1], delivered=1)) for row in rows]  # claimed below
            # Rows that are not jobs stay unclaimed (locked by this transaction) and are
            # moved to the failed table exactly as they were written.
            bad: list[Quarantined] = [
                (row[0], None, job) for row, job in read if isinstance(job, Malformed)
            ]
            good = [(row, job) for row, job in read if not isinstance(job, Malformed)]
            tokens = [new_token() for _ in good]
            seqs = [row[0] for row, _ in good]
            if good:
                # The seqs are whole numbers the rows hold: written into the text, they
                # spare the client an escape each (the tokens stay parameters).
                sql = self._claim_rows.format(
                    cases=" ".join([f"WHEN {int(seq):d} THEN %s" for seq in seqs]),
                    marks=", ".join([f"{int(seq):d}" for seq in seqs]),
                )
                await s.execute(sql, [*tokens, now, until])
            out: list[Reservation] = []
            lease_until = from_micros(until)
            for (row, job), token in zip(good, tokens, strict=True):
                out.append(
                    Reservation(
                        job=job,
                        token=token,
                        lease_until=lease_until,
                        lease=self._lease,
                        handle=row[0],
                    )
                )
            if bad:
                await self._failed.quarantine(s, queue, bad)
            return out, len(bad)

        return work

    @override
    async def acknowledge_many(self, reservations: Sequence[Reservation]) -> list[Exception | None]:
        try:
            return await super().acknowledge_many(reservations)
        except NotAllOurs:  # rolled back: now row by row (acks.py)
            return await self._run(self._checked_work(reservations), durable=False)

    @override
    async def acknowledge_and_reserve(
        self, reservations: Sequence[Reservation], queue: str, *, limit: int
    ) -> tuple[list[Exception | None], list[Reservation]]:
        try:
            return await super().acknowledge_and_reserve(reservations, queue, limit=limit)
        except NotAllOurs:  # rolled back, the claim with it: each on its own now
            acknowledged = await self._run(self._checked_work(reservations), durable=False)
            return acknowledged, await self.reserve(queue, limit=limit)

    @override
    def _acknowledge_work(
        self, reservations: Sequence[Reservation]
    ) -> Work[list[Exception | None]]:
        """One DELETE by seq whose count says all were ours, or `NotAllOurs` (acks.py)."""
        seqs = seqs_of(reservations)
        if seqs is None:
            return self._checked_work(reservations)
        sql = delete_by_seq(self._tables.jobs, seqs)
        tokens = [r.token for r in reservations]

        async def work(s: SessionProtocol) -> list[Exception | None]:
            if await s.execute(sql, tokens) != len(tokens):
                raise NotAllOurs
            return [None] * len(tokens)

        return work

    def _checked_work(self, reservations: Sequence[Reservation]) -> Work[list[Exception | None]]:
        """Lock the rows, keep those still holding their reservation's token, delete those."""
        ids = [r.job.id for r in reservations]
        marks = ", ".join(["%s"] * len(ids))

        async def work(s: SessionProtocol) -> list[Exception | None]:
            # Lock the rows first and keep those still holding our token, so
            # each reservation gets its own answer, not just a total.
            rows = await s.fetchall(self._lock_held.format(marks=marks), ids)
            current = {(str(job_id), str(token)) for job_id, token in rows if token is not None}
            ours = {(r.job.id, r.token) for r in reservations} & current
            if ours:
                done = [job_id for job_id, _ in ours]
                await s.execute(self._delete_ids.format(marks=", ".join(["%s"] * len(done))), done)
            results: list[Exception | None] = []
            for r in reservations:  # the same reservation twice is settled once
                key = (r.job.id, r.token)
                results.append(None if key in ours else _lost(r))
                ours.discard(key)
            return results

        return work


__all__ = ["MySQLDialect", "MySQLQueue"]
