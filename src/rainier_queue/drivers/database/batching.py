# SPDX-License-Identifier: MIT
"""Batches as a row of counters and a table of finished job ids, for every SQL database.

Why in the queue's own database: the write that records a batch's last job
and the insert of its callbacks' rows are then one transaction, so they are
queued exactly once or not at all (`batchstate.py`). Migration 6 makes two
tables beside the jobs:

- `{prefix}batches`: a row per batch, its total and its three counts, the
  callbacks' envelope text, and when it was made and finished;
- `{prefix}batch_jobs`: (batch, job) for each job whose end is recorded,
  the primary key making a second record of one job a no-op.

Recording a job's end takes the batch's row lock first (`SELECT ... FOR
UPDATE` on PostgreSQL and MySQL; SQLite's `BEGIN IMMEDIATE` already holds the
only write lock), so when the last two jobs finish at once on two machines
one transaction waits for the other and sees its count: exactly one of
them finds the batch finished and inserts the callbacks. Then it inserts
the job's marker (unless it is there), moves one count, and, when the
counts reach the total, inserts the callbacks, deletes the batch's markers
and stamps `finished_at`. A record for a finished batch changes nothing.
One indexed row read and two small writes per job, whatever the batch's
size; finished batches are deleted a week after they finished, by the
opening of a later batch.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from datetime import timedelta
from typing import Any

from ..._clock import from_micros, utcnow
from ...batchstate import (
    BatchProgress,
    Callback,
    Member,
    Outcome,
    callbacks_from_json,
    callbacks_to_json,
    finished_counts,
)
from ...envelope import QueuedJob
from .dialect import Dialect, Row, Session
from .schema import Tables

KEPT = timedelta(days=7)
"""How long a finished batch's row stays readable by id."""

_INSERT_UNLESS_THERE = {
    "sqlite": "INSERT OR IGNORE INTO {done} (batch_id, job_id) VALUES (?, ?)",
    "postgres": "INSERT INTO {done} (batch_id, job_id) VALUES (?, ?) ON CONFLICT DO NOTHING",
    "mysql": "INSERT IGNORE INTO {done} (batch_id, job_id) VALUES (?, ?)",
}

_COUNT_COLUMN = {o: o.value for o in Outcome}
"""The batches table's column for each outcome (the names are the outcomes' own)."""

Push = Callable[[Session, Sequence[QueuedJob]], Awaitable[None]]
"""Insert jobs inside the session's transaction (and announce them at commit)."""


class BatchTables:
    """`BatchStore` for a `DatabaseQueue`, over its batches tables, run in its transactions."""

    def __init__(
        self,
        tables: Tables,
        dialect: Dialect,
        run: Callable[..., Awaitable[Any]],
        push: Push,
    ) -> None:
        self._dialect = dialect
        self._run = run
        self._push = push
        sql = dialect.sql
        batches, done = tables.batches, tables.batch_jobs
        lock = "" if dialect.name == "sqlite" else " FOR UPDATE"
        self._open = sql(
            f"INSERT INTO {batches} (id, total, succeeded, failed, cancelled, callbacks, "
            "created_at) VALUES (?, ?, 0, 0, 0, ?, ?)"
        )
        self._purge = sql(
            f"DELETE FROM {batches} WHERE finished_at IS NOT NULL AND finished_at < ?"
        )
        columns = "total, succeeded, failed, cancelled, created_at, finished_at"
        self._locked = sql(f"SELECT {columns} FROM {batches} WHERE id = ?{lock}")
        self._read = sql(f"SELECT {columns}, callbacks FROM {batches} WHERE id = ?")
        self._callbacks = sql(f"SELECT callbacks FROM {batches} WHERE id = ?")
        template = _INSERT_UNLESS_THERE.get(dialect.name, _INSERT_UNLESS_THERE["postgres"])
        self._mark = sql(template.format(done=done))
        self._count = {
            outcome: sql(f"UPDATE {batches} SET {column} = ? WHERE id = ?")
            for outcome, column in _COUNT_COLUMN.items()
        }
        self._finish = sql(f"UPDATE {batches} SET finished_at = ? WHERE id = ?")
        self._forget_marks = sql(f"DELETE FROM {done} WHERE batch_id = ?")

    async def open_batch(self, batch_id: str, total: int, callbacks: Sequence[Callback]) -> None:
        text = callbacks_to_json(callbacks)

        async def work(s: Session) -> None:
            now = await self._dialect.now(s)
            await s.execute(self._purge, (now - to_micros_delta(KEPT),))
            await s.execute(self._open, (batch_id, total, text, now))

        await self._run(work)

    async def record_in_batch(
        self, batch: Member, job_id: str, outcome: Outcome
    ) -> BatchProgress | None:
        batch_id = batch.batch_id

        async def work(s: Session) -> BatchProgress | None:
            rows = await s.fetchall(self._locked, (batch_id,))
            if not rows:
                return None
            total, succeeded, failed, cancelled, created, finished = (_int(v) for v in rows[0])
            counted = {"succeeded": succeeded, "failed": failed, "cancelled": cancelled}
            if finished or not await s.execute(self._mark, (batch_id, job_id)):
                return None  # already counted: read again below, outside this lock
            counted[outcome.value] += 1
            await s.execute(self._count[outcome], (counted[outcome.value], batch_id))
            counts = finished_counts(batch_id, total, counted)
            if counts is not None:
                now = await self._dialect.now(s)
                [(text,)] = await s.fetchall(self._callbacks, (batch_id,))
                due = utcnow()
                jobs = [
                    c.job(counts).with_changes(available_at=due)
                    for c in callbacks_from_json(str(text))
                    if c.applies(counts)
                ]
                if jobs:
                    await self._push(s, jobs)
                await s.execute(self._forget_marks, (batch_id,))
                await s.execute(self._finish, (now, batch_id))
                finished = now
            return _progress(batch_id, total, counted, created, finished, ())

        recorded: BatchProgress | None = await self._run(work)
        return recorded if recorded is not None else await self.batch_progress(batch_id)

    async def batch_progress(self, batch_id: str) -> BatchProgress | None:
        async def work(s: Session) -> list[Row]:
            return await s.fetchall(self._read, (batch_id,))

        rows = await self._run(work, write=False)
        if not rows:
            return None
        total, succeeded, failed, cancelled, created, finished = (_int(v) for v in rows[0][:6])
        callbacks = callbacks_from_json(str(rows[0][6]))
        counted = {"succeeded": succeeded, "failed": failed, "cancelled": cancelled}
        return _progress(
            batch_id,
            total,
            counted,
            created,
            finished,
            tuple((c.kind, c.name()) for c in callbacks),
        )


def to_micros_delta(span: timedelta) -> int:
    return span // timedelta(microseconds=1)


def _int(value: object) -> int:
    return 0 if value is None else int(value)  # type: ignore[call-overload]


def _progress(
    batch_id: str,
    total: int,
    counted: dict[str, int],
    created: int,
    finished: int,
    callbacks: tuple[tuple[str, str], ...],
) -> BatchProgress:
    return BatchProgress(
        id=batch_id,
        total=total,
        succeeded=counted["succeeded"],
        failed=counted["failed"],
        cancelled=counted["cancelled"],
        created_at=from_micros(created),
        finished_at=from_micros(finished) if finished else None,
        callbacks=callbacks,
    )


__all__ = ["KEPT", "BatchTables"]
