# SPDX-License-Identifier: MIT
"""`Outbox`: where `dispatch` writes when the target cannot join the application's transaction.

Why: an application that commits an order and then pushes its job to
Redis, Kafka or a broker has two writes and no transaction around them. A
crash between them loses the job; pushed first, the job runs for an order
that rolled back. The outbox makes the push one more row in the
application's own transaction (PostgreSQL, MySQL/MariaDB or SQLite): it
exists exactly when the order does, and a relay (`relay.py`) moves it to
the target afterwards.

The outbox is a SQL database queue of its own (tables `rq_outbox_*` by
default, made by `rainier-queue provision`) used through the port and its
`TransactionalEnqueue` ability, so this module knows no database: the
store's driver writes the row in the application's connection, as its
`push_in` does for a job.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..envelope import QueuedJob
from ..envelope.packing import envelope_of
from ..envelope.sealing import KeyRing
from ..errors import ConfigurationError
from ..job import Job
from ..queue import Queue, TransactionalEnqueue
from .frameworks import client_connection, client_connection_sync
from .rows import outbox_row

DEFAULT_PREFIX = "rq_outbox_"
"""The outbox's tables, beside (never among) the application's job tables."""


class Outbox:
    """The outbox of one target connection, in a SQL store the application writes to.

    `store` is a database queue on the application's database (PostgreSQL,
    MySQL/MariaDB, SQLite) with its own table prefix; `target` is the name
    of the connection its rows are bound for; `keys`, the target's key ring
    when it encrypts payloads (docs/encryption.md): a job is sealed under it
    before its row is written, so no payload waits in the outbox in the clear.
    """

    def __init__(self, store: Queue, *, target: str, keys: KeyRing | None = None) -> None:
        if not isinstance(store, TransactionalEnqueue):
            raise ConfigurationError(
                f"the outbox of connection `{target}` is on {store.describe()}, which cannot "
                "write inside the application's transaction; give it a PostgreSQL, MySQL/MariaDB "
                "or SQLite URL (the application's own database)"
            )
        self.store = store
        self.target = target
        self.keys = keys

    async def dispatch_in(self, connection: Any, job: Job | QueuedJob) -> str:
        """Write `job` to the outbox in `connection`'s open transaction; the job's id.

        `connection` is the application's own, of the store's client (a
        psycopg connection or cursor, an aiomysql connection, a sqlite3
        connection), or a SQLAlchemy session or connection over one. The
        job reaches the target once that transaction commits and a relay
        runs; a rollback takes it back with everything else. A `Job` is
        packed now, with its own options (a bad payload fails here), and
        takes no uniqueness lock: that lives outside the transaction.
        """
        return (await self.dispatch_many_in(connection, [job]))[0]

    async def dispatch_many_in(self, connection: Any, jobs: Sequence[Job | QueuedJob]) -> list[str]:
        """`dispatch_in` for several jobs, in order, in one write."""
        rows = [outbox_row(self._sealed(job), self.target) for job in jobs]
        if not rows:
            return []
        connection = await client_connection(connection)
        many = getattr(self.store, "push_many_in", None)
        if many is not None:
            await many(connection, rows)
        else:
            for row in rows:
                await self.store.push_in(connection, row)
        return [row.id for row in rows]

    def dispatch_in_sync(self, connection: Any, job: Job | QueuedJob) -> str:
        """`dispatch_in` on a blocking connection (Django, Flask, scripts), where the store's
        driver has a blocking form (PostgreSQL's psycopg, SQLite's sqlite3)."""
        push = getattr(self.store, "push_many_in_sync", None)
        if push is None:
            raise ConfigurationError(
                f"the outbox of connection `{self.target}` is on {self.store.name}, whose "
                "client has no blocking form; use `await dispatch_in(...)` on its async connection"
            )
        row = outbox_row(self._sealed(job), self.target)
        push(client_connection_sync(connection), [row])
        return row.id

    def _sealed(self, job: Job | QueuedJob) -> QueuedJob:
        envelope = envelope_of(job)
        return envelope if self.keys is None else self.keys.seal(envelope)

    async def provision(self) -> list[str]:
        """Make the outbox's tables, or bring them up to date; one line per change."""
        provision = getattr(self.store, "provision", None)
        return [] if provision is None else list(await provision([self.target]))

    async def pending(self) -> int:
        """Committed rows waiting for a relay (not those a relay holds right now)."""
        return await self.store.size(self.target)

    async def aclose(self) -> None:
        await self.store.aclose()

    def describe(self) -> str:
        return f"outbox of `{self.target}` on {self.store.describe()}"


__all__ = ["DEFAULT_PREFIX", "Outbox"]
