# SPDX-License-Identifier: MIT
"""The failed table: what goes into it besides a failed job, and what comes out of it.

Why apart: the queue's hot path (push, claim, settle) is in `DatabaseQueue`;
the failed table is read and written on the cold path, by operators and by
the claim when it meets a row that is not a job; `DatabaseQueue` holds one and
hands it its unit of work. Both ways in are moves
(a copy, then a delete, in one transaction), so a crash between the two
writes leaves the row where it was, never nowhere:

- a row that is not a job is moved as it is stored, with the field that is
  wrong, inside the claim's own transaction where there is one;
- `failed_jobs`, `retry_failed`, `forget_failed` and `flush_failed` are the
  port's `FailedJobStore`: a retried job is restored with its attempts at
  zero and its own `max_attempts`.

`fail` itself stays with the settles in `DatabaseQueue`: it is a settle,
matched on the reservation's token.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from ..._clock import from_micros
from ...envelope.fields import micros_field
from ...envelope.reading import Malformed, read_columns
from ...errors import BrokerError, MalformedEntry
from ...queue import FailedJob
from ..malformed import quarantine
from .dialect import Dialect, Row, Session
from .statements import Statements

log = logging.getLogger("rainier_queue.database")

Quarantined = tuple[object, str | None, Malformed]
"""A row that is not a job: (its seq, the token its claim wrote or None for a row this
transaction holds locked unclaimed, what is wrong with it)."""


class FailedTable:
    """The failed table's side of a `DatabaseQueue`, which holds one: moves in, reads, retries."""

    def __init__(
        self,
        dialect: Dialect,
        sql: Statements,
        run: Callable[..., Awaitable[Any]],
    ) -> None:
        self._dialect = dialect
        self._sql = sql
        self._run = run
        """The queue's unit of work in a transaction (`DatabaseQueue._run`), schema ensured."""

    async def quarantine(self, s: Session, queue: str, bad: Sequence[Quarantined]) -> None:
        """Move rows that are not jobs into the failed table, as they are stored.

        Inside the claim's own transaction where there is one (the rows are
        locked and left unclaimed, so they are copied exactly as written), so
        nothing is rolled back because of them: the worker never sees these
        rows, and `rainier-queue failed` lists each with the field that is wrong.
        """
        now = await self._dialect.now(s)
        for seq, token, malformed in bad:
            entry = f"queue {queue!r}: the row with id {malformed.id!r}"
            move = self._move_row(s, now, seq, token, malformed.error)
            await quarantine(log, entry, malformed, "the failed table", move)

    async def _move_row(
        self, s: Session, now: int, seq: object, token: str | None, error: str
    ) -> None:
        """Copy one row into the failed table with `error`, then delete it."""
        if token is None:
            await s.execute(self._sql.quarantine_locked, (error, now, seq))
            await s.execute(self._sql.quarantine_locked_delete, (seq,))
        else:
            await s.execute(self._sql.quarantine, (error, now, seq, token))
            await s.execute(self._sql.quarantine_delete, (seq, token))

    async def quarantine_apart(self, queue: str, bad: Sequence[Quarantined]) -> None:
        """`quarantine` in a transaction of its own, for a claim already committed.

        If the database fails now, the rows stay claimed and come back when
        their lease ends, to be moved then; the jobs claimed with them still run.
        """
        try:
            await self._run(lambda s: self.quarantine(s, queue, bad))
        except BrokerError as exc:
            log.warning(
                "queue %r: could not move %d malformed row(s) to the failed table yet (%s); "
                "they are tried again when their lease ends",
                queue,
                len(bad),
                exc,
            )

    # -- FailedJobStore --------------------------------------------------------

    async def failed_jobs(self, *, queue: str | None = None, limit: int = 100) -> list[FailedJob]:
        """Failed jobs, newest first, each with its full envelope and error."""
        sql, params = (
            (self._sql.failed_all, (limit,))
            if queue is None
            else (self._sql.failed_on_queue, (queue, limit))
        )
        rows: list[Row] = await self._run(lambda s: s.fetchall(sql, params), write=False)
        return [_failed_from_row(row) for row in rows]

    async def retry_failed(self, job_id: str) -> bool:
        """Queue a failed job again, due now, with attempts at zero; False if no such job."""

        async def work(s: Session) -> bool:
            found = await s.fetchall(self._sql.newest_failed, (job_id,))
            if not found:
                return False
            now = await self._dialect.now(s)
            await s.execute(self._sql.restore_failed, (now, now, found[0][0], job_id))
            await s.execute(self._sql.forget_failed, (job_id,))
            await self._dialect.announce(s, (str(found[0][1]),))
            return True

        restored: bool = await self._run(work)
        if restored:
            self._dialect.pushed()
        return restored

    async def forget_failed(self, job_id: str) -> bool:
        """Delete a failed job for good; False if no such job."""
        deleted: int = await self._run(lambda s: s.execute(self._sql.forget_failed, (job_id,)))
        return deleted > 0

    async def flush_failed(self, *, queue: str | None = None) -> int:
        """Delete every failed job (of `queue`, or all); how many."""
        if queue is None:
            flushed: int = await self._run(lambda s: s.execute(self._sql.flush_all))
        else:
            flushed = await self._run(lambda s: s.execute(self._sql.flush_queue, (queue,)))
        return flushed


def _failed_from_row(row: Row) -> FailedJob:
    """A failed-table row (`ENVELOPE`, error, failed_at), whatever it holds."""
    job = read_columns(row[:10])
    if isinstance(job, Malformed):
        job = job.as_job(queue="?", job_id="?")
    try:
        failed_at = micros_field(row[11], "failed_at")
    except MalformedEntry:
        failed_at = from_micros(0)
    error = row[10]
    return FailedJob(
        job=job, error=error if isinstance(error, str) else repr(error), failed_at=failed_at
    )


__all__ = ["FailedTable", "Quarantined"]
