# SPDX-License-Identifier: MIT
"""A connection kept out of redis-py's pool between uses, for the two exchanges that wait on it.

Why: a lone job's time to start holds two exchanges that each take a
connection of their own, the push (held for its answer, `replication.py`)
and an idle worker's wait (`waiting.py`). Taking one from redis-py's pool
and handing it back costs the pool's lock and bookkeeping each way, tens of
microseconds on a process that was asleep, and for the wait the handing
back came between the job's reply and its start. So each keeps one
connection from one exchange to the next; the pool lends another to a
second exchange that runs at the same time, and takes it back after.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from redis.asyncio.connection import AbstractConnection, ConnectionPool


class KeptConnection:
    """One pool connection, kept from one use to the next instead of handed back.

    Only a connection whose exchange was read to its end is kept; one cut
    short is dropped (its replies may still be on their way). A kept
    connection the server closed meanwhile is checked for, and reopened, as
    the pool does before it lends one out (`ensure_connection`), so a stale
    one is never a failed push or wait.
    """

    def __init__(self) -> None:
        self._conn: AbstractConnection | None = None

    async def take(self, pool: ConnectionPool) -> AbstractConnection:
        """The kept connection, ready to send on, else one from `pool`."""
        conn, self._conn = self._conn, None
        # The pool's own check, where this redis-py has it; else the pool lends a fresh one.
        ensure: Callable[[AbstractConnection], Awaitable[None]] | None = getattr(
            pool, "ensure_connection", None
        )
        if conn is not None:
            if ensure is None:
                await pool.release(conn)
            else:
                try:
                    await ensure(conn)
                except BaseException:
                    await pool.release(conn)
                    raise
                return conn
        taken: AbstractConnection = await pool.get_connection()  # type: ignore[no-untyped-call]
        return taken

    async def put_back(
        self, pool: ConnectionPool, conn: AbstractConnection, *, clean: bool
    ) -> None:
        """After a use: keep `conn` for the next if its exchange was read to its end
        (`clean`) and none is kept already (two uses at once); else hand it to `pool`."""
        if clean and self._conn is None:
            self._conn = conn
        else:
            await pool.release(conn)

    async def give_back(self, pool: ConnectionPool) -> None:
        """Hand the kept connection back to `pool` (the queue is closing)."""
        conn, self._conn = self._conn, None
        if conn is not None:
            await pool.release(conn)


__all__ = ["KeptConnection"]
