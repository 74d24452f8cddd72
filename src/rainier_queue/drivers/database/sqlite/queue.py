# SPDX-License-Identifier: MIT
"""`SQLiteQueue`: the database queue in one local file, and the embedded default.

## Read this before choosing it

A fresh checkout dispatches and works jobs with no server to install: the
tables are created on first use, jobs survive a restart, and several worker
processes on one machine share the file safely. What it costs:

- **One writer at a time.** Every reserve and settle takes the file's write
  lock (`BEGIN IMMEDIATE`), which is what makes double reservation
  impossible across processes, and also what caps throughput: thousands
  (not tens of thousands) of settles a second on a local disk, shared by
  every worker on the file.
- **A power cut can repeat the last jobs, never lose one.** A push commits
  with `synchronous=FULL`: once it returns, the job is on disk. The
  workers' claims, settles and renewals commit with `synchronous=NORMAL`,
  which does not wait for the disk (two workers drained 20,000 no-op jobs
  15% faster: 5,685 against 6,556 jobs/s, medians of 4 interleaved
  rounds); a killed process undoes none of them, and a
  power cut may undo the last few, so those jobs run again. The workers
  share the machine's fate, so no worker goes on holding a claim the file
  forgot.
- **One machine.** SQLite's locking is not safe on a network filesystem, so
  workers on other machines cannot share the file. Use PostgreSQL then.
- **Wake-ups on one machine, and a poll behind them.** A push wakes idle
  workers in this process at once, and those of other processes through a
  datagram each (`nearby.py`: a UNIX socket per waiting process in a
  private temp folder named for the file). That is a hint: every idle
  worker also looks every `poll_interval` (100 ms), which is what finds a
  push when the datagrams cannot be sent (Windows, workers of another
  user, a temp dir that cannot be used), at the cost of latency only.
  Each push lists that folder and sends one datagram per waiting process,
  and every idle process woken runs one indexed read.
- **Transactional enqueue on the application's own connection.** The queue
  has its own connection, so `push` commits on its own; `push_in(conn, job)`
  writes the job with the application's `sqlite3` connection to the same
  file instead, inside whatever transaction that connection has open, so
  the job exists exactly when the application's rows do. Workers hear of it
  at their next poll (`poll_interval`), since a wake-up sent before the
  commit would find nothing.

Each queue owns one connection on one thread of its own; `busy_timeout`
says how long a claim waits for another process's write lock before the
queue reports `BrokerUnavailable`, which the worker rides out.
"""

from __future__ import annotations

import os
import sqlite3
import weakref
from collections.abc import Coroutine, Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any, ClassVar, Self, TypeVar, cast

from typing_extensions import override

from ...._wakeup import Wakeup
from ....envelope import QueuedJob
from ....envelope.packing import envelope_of
from ....job import Job
from ....queue import DEFAULT_LEASE, Capabilities, QueueCounts
from .. import POLL_INTERVAL, DatabaseQueue, row_for
from ..dialect import Dialect, Row, Session, Work
from ..nearby import Rendezvous, shared_rendezvous
from ..schema import DEFAULT_PREFIX, check_prefix
from .connection import SQLiteThread, check_same_file, resolve_file, translated
from .settings import SQLiteSettings
from .untyped import UntypedTimes, warn_repaired

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ... import DriverContext

T = TypeVar("T")

QUEUE_OPTIONS = frozenset({"lease", "migrate", "poll_interval", "local_wakeup"})
"""The options the queue takes beyond its file's (`SQLiteSettings.OPTIONS`)."""

DEFAULT_BUSY_TIMEOUT = timedelta(seconds=5)
"""How long a transaction waits for another process's write lock.

Claims and settles are short, so a wait this long means something holds
the file far longer than this library does (a backup, a stuck process),
and the worker should back off and say so rather than queue up behind it.
"""

_WAKEUPS: weakref.WeakValueDictionary[str, Wakeup] = weakref.WeakValueDictionary()
"""One wake-up signal per file, so a push through one queue object wakes
workers waiting on another object over the same file in this process."""


def _identity(path: str) -> str:
    """The file as every process names it: links resolved, so two spellings meet."""
    return f"sqlite:{os.path.realpath(path)}"


def _wakeup_for(identity: str) -> Wakeup:
    wakeup = _WAKEUPS.get(identity)
    if wakeup is None:
        wakeup = Wakeup()
        _WAKEUPS[identity] = wakeup
    return wakeup


class _Session:
    """The `Session` over a sqlite3 connection: plain calls dressed as coroutines."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    async def execute(self, sql: str, params: Sequence[object] = ()) -> int:
        return self._conn.execute(sql, params).rowcount

    async def executemany(self, sql: str, rows: Sequence[Sequence[object]]) -> None:
        self._conn.executemany(sql, rows)

    async def fetchall(self, sql: str, params: Sequence[object] = ()) -> list[Row]:
        try:
            return self._conn.execute(sql, params).fetchall()
        except sqlite3.OperationalError as exc:
            # SQLite stores whatever bytes it is given as TEXT, and sqlite3 refuses to
            # hand over a whole result for one value that is not UTF-8. A read is
            # asked again with such text kept as it is (surrogate escapes), for the
            # reading code to refuse with the column named; a write is never repeated.
            if not str(exc).startswith("Could not decode to UTF-8") or not _is_read(sql):
                raise
            self._conn.text_factory = _keep_undecodable
            try:
                return self._conn.execute(sql, params).fetchall()
            finally:
                self._conn.text_factory = str


def _keep_undecodable(data: bytes) -> str:
    return data.decode("utf-8", "surrogateescape")


def _is_read(sql: str) -> bool:
    return sql.lstrip()[:6].upper() == "SELECT"


def _drive(coro: Coroutine[Any, Any, T]) -> T:
    """Run a unit of work that never really suspends, to its end, right here.

    Every await in a unit of work is on the session, whose methods here do
    their work and return without suspending, so one `send` finishes the
    coroutine. That keeps the whole transaction on the connection's thread
    in one go: nothing else can interleave with it, and the file's write
    lock is held for as short a time as the SQL takes.
    """
    try:
        coro.send(None)
    except StopIteration as done:
        return cast(T, done.value)
    coro.close()
    raise RuntimeError("a SQLite unit of work awaited something other than its session")


class SQLiteDialect(Dialect):
    """SQLite through stdlib `sqlite3`, on a dedicated thread, claims under `BEGIN IMMEDIATE`."""

    name: ClassVar[str] = "sqlite"
    types: ClassVar[Mapping[str, str]] = {
        "seq_pk": "INTEGER PRIMARY KEY",
        "key": "TEXT",
        "text": "TEXT",
        "bigint": "INTEGER",
        "int": "INTEGER",
    }
    table_exists_sql: ClassVar[str] = (
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?"
    )

    def __init__(
        self,
        path: str,
        *,
        busy_timeout: timedelta = DEFAULT_BUSY_TIMEOUT,
        local_wakeup: bool = True,
    ) -> None:
        identity = _identity(path)
        wakeup = _wakeup_for(identity)
        nearby: Rendezvous | None = None
        if local_wakeup:
            nearby = shared_rendezvous(identity, wakeup.notify)
        super().__init__(wakeup=wakeup, nearby=nearby)
        self.path = path
        # synchronous=FULL: a push that returned is on disk, even across a
        # power cut (NORMAL, WAL's usual partner, can lose the last commits);
        # the workers' own commits ask for NORMAL (`durable=False`).
        self._thread = SQLiteThread(
            path, busy_timeout=busy_timeout, pragmas={"synchronous": "FULL"}
        )

    @override
    async def run(self, work: Work[T], *, write: bool = True, durable: bool = True) -> T:
        def on_thread(conn: sqlite3.Connection) -> T:
            return _drive(work(_Session(conn)))

        if write:
            return await self._thread.transaction(on_thread, durable=durable)
        return await self._thread.call(on_thread)

    @override
    async def aclose(self) -> None:
        self.stop_listening()
        await self._thread.aclose()

    @override
    def describe(self) -> str:
        return f"sqlite {self.path}"


class SQLiteQueue(DatabaseQueue):
    """The database queue on a local SQLite file. See the module docs for what it costs."""

    name: ClassVar[str] = "sqlite"
    capabilities: ClassVar[Capabilities] = Capabilities(
        survives_restart=True,
        shared_between_processes=True,
        transactional_enqueue=True,
        pausable=True,
        limits=True,
        job_lookup=True,
        records=True,
        cancellable=True,
        batches=True,
        ordering_keys=True,
    )

    OPTIONS: ClassVar[frozenset[str]] = SQLiteSettings.OPTIONS | QUEUE_OPTIONS

    @classmethod
    def from_config(cls, url: str, options: Mapping[str, Any], context: DriverContext) -> Self:
        """`sqlite:///relative.db` or `sqlite:////absolute/path.db`, options in the URL's
        query or in `options` (which win): `lease`, `prefix`, `busy_timeout`, `migrate`,
        `poll_interval` (how often an idle worker looks for work, 100ms) and
        `local_wakeup` (wake idle workers of other processes on this machine, true)."""
        settings, own = SQLiteSettings.read(
            url, options, who="the `sqlite` driver", extra=QUEUE_OPTIONS
        )
        return cls(
            settings.path,
            lease=own.lease(DEFAULT_LEASE),
            prefix=settings.prefix,
            busy_timeout=settings.busy_timeout or DEFAULT_BUSY_TIMEOUT,
            migrate=own.flag("migrate", True),
            poll_interval=own.duration("poll_interval", POLL_INTERVAL),
            local_wakeup=own.flag("local_wakeup", True),
        )

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        lease: timedelta = DEFAULT_LEASE,
        prefix: str = DEFAULT_PREFIX,
        busy_timeout: timedelta = DEFAULT_BUSY_TIMEOUT,
        migrate: bool = True,
        poll_interval: timedelta = POLL_INTERVAL,
        local_wakeup: bool = True,
    ) -> None:
        check_prefix(prefix)
        self.path = resolve_file(path)
        super().__init__(
            SQLiteDialect(self.path, busy_timeout=busy_timeout, local_wakeup=local_wakeup),
            lease=lease,
            prefix=prefix,
            migrate=migrate,
            poll_interval=poll_interval,
        )
        self._untyped = UntypedTimes(self._tables.jobs)

    # -- inside the application's transaction --------------------------------------

    async def push_in(self, connection: sqlite3.Connection, job: QueuedJob | Job) -> str:
        """Push `job` with the application's own `sqlite3` connection to this queue's file.

        The row is written in the transaction `connection` has open (Python's
        `sqlite3` opens one before the first write unless told otherwise), so
        it exists exactly when that transaction commits, and a rollback takes
        it back. `job` is an envelope or a `Job` (packed now with its own
        options); returns its id. A `Job` takes no uniqueness lock this way.
        """
        return (await self.push_many_in(connection, [job]))[0]

    async def push_many_in(
        self, connection: sqlite3.Connection, jobs: Sequence[QueuedJob | Job]
    ) -> list[str]:
        """`push_in` for several jobs, in order, in one statement batch."""
        if not jobs:
            return []
        await self._ensure_schema()  # on the queue's own connection, outside the caller's
        return self.push_many_in_sync(connection, jobs)

    def push_in_sync(self, connection: sqlite3.Connection, job: QueuedJob | Job) -> str:
        """`push_in` for code without an event loop; the tables must exist already."""
        return self.push_many_in_sync(connection, [job])[0]

    def push_many_in_sync(
        self, connection: sqlite3.Connection, jobs: Sequence[QueuedJob | Job]
    ) -> list[str]:
        """`push_many_in` for code without an event loop; the tables must exist already."""
        envelopes = list(self.sealed([envelope_of(job) for job in jobs]))
        if not envelopes:
            return []
        rows = [row_for(job) for job in envelopes]
        with translated(self.path):
            check_same_file(connection, self.path)
            connection.executemany(self._sql.push, rows)
        return [job.id for job in envelopes]

    @override
    async def wait_for_work(self, queues: Sequence[str], timeout: timedelta) -> None:
        """Make rows whose times are not numbers claimable (`untyped.py`), then wait as usual."""
        if queues:
            await self._repair_untyped(queues)
        await super().wait_for_work(queues, timeout)

    @override
    async def counts(self, queue: str) -> QueueCounts:
        """The same repair first: a draining worker asks this to decide whether to stop."""
        await self._repair_untyped([queue])
        return await super().counts(queue)

    async def _repair_untyped(self, queues: Sequence[str]) -> None:
        async def look(s: Session) -> bool:
            return await self._untyped.found(s, queues, await self._dialect.now(s))

        if not await self._run(look, write=False):
            return

        async def repair(s: Session) -> list[str]:
            return await self._untyped.repair(s, queues, await self._dialect.now(s))

        ids = await self._run(repair)
        if ids:
            warn_repaired(self.path, ids)


__all__ = ["DEFAULT_BUSY_TIMEOUT", "SQLiteDialect", "SQLiteQueue"]
