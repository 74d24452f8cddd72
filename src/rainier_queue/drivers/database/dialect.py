# SPDX-License-Identifier: MIT
"""`Dialect`: the few things that differ between SQLite, PostgreSQL and MySQL.

`DatabaseQueue` says everything a job queue needs in portable SQL, once.
What is left differs by database, and it is short:

| Difference             | SQLite                | PostgreSQL           | MySQL / MariaDB      |
|------------------------|-----------------------|----------------------|----------------------|
| claiming rows safely   | `BEGIN IMMEDIATE`     | `SKIP LOCKED`        | `SKIP LOCKED`        |
| placeholders           | `?`                   | `%s`                 | `%s`                 |
| column types           | `INTEGER`, `TEXT`     | `BIGINT`, identity   | `VARCHAR(191)`, ...  |
| "is there a table"     | `sqlite_master`       | `information_schema` | `information_schema` |
| running a transaction  | one connection thread | a psycopg pool       | an aiomysql pool     |
| hearing about new work | a signal + datagrams  | `LISTEN` / `NOTIFY`  | a signal + datagrams |
| migrating concurrently | the write lock        | an advisory lock     | `GET_LOCK`           |

A dialect supplies those and nothing else. The queue's operations are
written as *units of work*: `async` functions of a `Session` that run inside
one transaction. A dialect with an async client awaits them; the SQLite
dialect, whose client is blocking, runs each one whole on its connection's
thread, so a transaction never spans two trips through the event loop.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Collection, Coroutine, Mapping, Sequence
from datetime import timedelta
from typing import Any, ClassVar, Literal, Protocol, TypeAlias, TypeVar

from ..._clock import to_micros, utcnow
from ..._wakeup import Wakeup
from .nearby import Rendezvous

T = TypeVar("T")

Row: TypeAlias = tuple[Any, ...]
"""One result row, as the DB-API hands it over (its column types are the database's)."""


class Session(Protocol):
    """The connection inside one transaction, as a unit of work sees it.

    SQL is written with `?` placeholders; pass it through `Dialect.sql` first.
    """

    async def execute(self, sql: str, params: Sequence[object] = ()) -> int:
        """Run one statement; the number of rows it changed."""
        ...

    async def executemany(self, sql: str, rows: Sequence[Sequence[object]]) -> None:
        """Run one statement for each parameter row."""
        ...

    async def fetchall(self, sql: str, params: Sequence[object] = ()) -> list[Row]:
        """Run a query; every row."""
        ...


Work: TypeAlias = Callable[[Session], Coroutine[Any, Any, T]]
"""A unit of work: everything it does commits together, or not at all."""


class Dialect(abc.ABC):
    """One database's answers to the questions portable SQL leaves open."""

    name: ClassVar[str]
    """`sqlite`, `postgres`, `mysql`."""

    types: ClassVar[Mapping[str, str]]
    """Column types the migrations name: `seq_pk` (an auto-numbered primary key),
    `key` (indexable text), `text` (long text), `bigint`, `int`."""

    paramstyle: ClassVar[Literal["qmark", "format"]] = "qmark"
    """`qmark` takes `?` as written; `format` (psycopg, aiomysql) wants `%s`."""

    claim_suffix: ClassVar[str] = ""
    """Appended to the SELECT that picks rows to claim. `FOR UPDATE SKIP LOCKED`
    where rows are locked one by one; empty where the transaction already
    holds the only write lock (SQLite's `BEGIN IMMEDIATE`)."""

    table_exists_sql: ClassVar[str]
    """A query with one `?` (the table name) that returns a row iff the table exists."""

    partial_indexes: ClassVar[bool] = True
    """Whether the database has partial indexes, and so the schema's `jobs_held` (the
    ordering keys' reserved rows, migration 8): MySQL has neither, and the claim's key
    test probes the key's rows instead (`statements.in_order`)."""

    def __init__(self, *, wakeup: Wakeup | None = None, nearby: Rendezvous | None = None) -> None:
        self._wakeup = wakeup or Wakeup()
        self._nearby = nearby
        """The wake-up channel to other processes on this machine (`nearby.py`), if any."""
        self._listening = False
        self._converted: dict[str, str] = {}

    def sql(self, text: str) -> str:
        """`text` with its `?` placeholders in this dialect's style.

        The queue's SQL has no `?` or `%` inside literals, so a plain
        replacement is exact.
        """
        if self.paramstyle == "qmark":
            return text
        converted = self._converted.get(text)
        if converted is None:
            converted = self._converted[text] = text.replace("?", "%s")
        return converted

    @abc.abstractmethod
    async def run(self, work: Work[T], *, write: bool = True, durable: bool = True) -> T:
        """Run `work` in one transaction: committed if it returns, rolled back if it raises.

        `write=False` promises the work only reads, so the dialect may skip
        taking a write lock. `durable=False` says the work only keeps the
        worker's books on jobs it holds (claims, settles, renewals), which a
        power cut may undo at the cost of running those jobs again, never of
        losing one; an embedded database, which goes down only together with
        its workers, may then commit without waiting for the disk. A server
        must not: it can crash alone while its workers go on, and an undone
        claim would let a second worker run a job the first finished.

        Client exceptions come out translated into `rainier_queue.errors`;
        the work's own exceptions come out as raised.
        """

    async def now(self, session: Session) -> int:
        """The current time in microseconds since the epoch.

        From this process's clock by default, which is the database's own
        for an embedded one; a server dialect asks its server, so workers on
        machines whose clocks disagree still agree on when a lease ends.
        """
        return to_micros(utcnow())

    async def lock_for_migration(self, session: Session) -> None:  # noqa: B027 - optional hook
        """Keep two processes from migrating at once (an advisory lock, say).

        Nothing by default: enough where the transaction already holds the
        database's only write lock.
        """

    async def announce(self, session: Session, queues: Collection[str]) -> None:  # noqa: B027
        """Tell other processes, inside the push's transaction, that `queues` have work.

        Nothing by default; PostgreSQL sends a `NOTIFY`, which is delivered
        only if the transaction commits.
        """

    def pushed(self) -> None:
        """A push committed: wake this process's idle workers now, and those of other
        processes on this machine where the dialect has a `Rendezvous`."""
        self._wakeup.notify()
        if self._nearby is not None:
            self._nearby.signal()

    def wake_mark(self) -> int:
        """Call before looking for work: a mark for `wait_after`.

        The first call also starts hearing pushes from other processes on
        this machine, where the dialect can (`nearby.py`).
        """
        if self._nearby is not None:
            if not self._listening:
                self._listening = True
                self._nearby.join()
            self._nearby.listen()
        return self._wakeup.heard

    async def wait_after(self, mark: int, queues: Sequence[str], timeout: timedelta) -> None:
        """`wait`, but at once if a push was heard since `wake_mark` gave `mark`, so a push
        that lands between looking and waiting is not slept through."""
        await self._wakeup.wait(timeout, since=mark)

    def stop_listening(self) -> None:
        """Leave the rendezvous, if `wake_mark` joined it (for `aclose`)."""
        if self._nearby is not None and self._listening:
            self._listening = False
            self._nearby.release()

    async def wait(self, queues: Sequence[str], timeout: timedelta) -> None:
        """Return when work may have arrived on `queues`, or after `timeout`.

        By default only pushes from this process are heard; others are
        found by the worker's next poll, at most `timeout` later.
        """
        await self._wakeup.wait(timeout)

    @abc.abstractmethod
    async def aclose(self) -> None:
        """Close connections and threads."""

    @abc.abstractmethod
    def describe(self) -> str:
        """Where the data lives, without credentials."""


__all__ = ["Dialect", "Row", "Session", "Work"]
