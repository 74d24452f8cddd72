# SPDX-License-Identifier: MIT
"""Paused queues as rows of `{prefix}paused_queues`, for every SQL database.

A row per paused queue, written by `rainier-queue pause` and deleted by
`resume`. Workers read the table on a cadence (`WorkerOptions.pause_check`),
never inside a claim: the claim's statement is the same whether anything is
paused or not, so a connection that never pauses pays nothing per job, and
one that does pays one small read per worker per check. The table comes
with migration 4, so it is made where the other tables are.

Pausing a queue already paused changes nothing (and says so): each
database's own spelling of "insert unless the key is there" is used, so two
people pausing one queue at once both succeed.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from .dialect import Dialect, Session
from .schema import Tables

Run = Callable[..., Coroutine[Any, Any, Any]]
"""The queue's `_run`: a unit of work in one transaction, the schema made first."""

_INSERT_UNLESS_THERE = {
    "sqlite": "INSERT OR IGNORE INTO {paused} (queue, paused_at) VALUES (?, ?)",
    "postgres": "INSERT INTO {paused} (queue, paused_at) VALUES (?, ?) ON CONFLICT DO NOTHING",
    "mysql": "INSERT IGNORE INTO {paused} (queue, paused_at) VALUES (?, ?)",
}


class PausedTable:
    """The `Pausable` calls of a `DatabaseQueue`, over its paused-queues table."""

    def __init__(self, tables: Tables, dialect: Dialect, run: Run) -> None:
        self._dialect = dialect
        self._run = run
        template = _INSERT_UNLESS_THERE.get(dialect.name, _INSERT_UNLESS_THERE["postgres"])
        self._insert = dialect.sql(template.format(paused=tables.paused))
        self._delete = dialect.sql(f"DELETE FROM {tables.paused} WHERE queue = ?")
        self._select = f"SELECT queue FROM {tables.paused}"

    async def pause(self, queue: str) -> bool:
        async def work(s: Session) -> int:
            return await s.execute(self._insert, (queue, await self._dialect.now(s)))

        return bool(await self._run(work))

    async def resume(self, queue: str) -> bool:
        async def work(s: Session) -> int:
            return await s.execute(self._delete, (queue,))

        return bool(await self._run(work))

    async def paused(self, queues: Sequence[str]) -> frozenset[str]:
        async def work(s: Session) -> list[Any]:
            return await s.fetchall(self._select)

        rows = await self._run(work, write=False)
        marked = {str(row[0]) for row in rows}
        return frozenset(q for q in queues if q in marked)


__all__ = ["PausedTable"]
