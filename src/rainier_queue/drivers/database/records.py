# SPDX-License-Identifier: MIT
"""Finding a job by id, and the records table: job state for every SQL database, once.

Why a part of its own: `find_job` and the record store (`jobstate.py`) are
reads and small writes beside the queue's hot path, written once in portable
SQL for SQLite, PostgreSQL and MySQL alike, and kept out of `DatabaseQueue`
so the queue's own module stays about pushing and settling.

- `remove_job` deletes a job's row unless a worker holds it (`cancel`).
- `find_job` reads the job's row (`id` has a unique index), or else its
  newest failed record: one indexed read each, on the database's clock.
- The records live in `{prefix}records` (migration 5): a name, a body, and
  an expiry. A write is one upsert (`ON CONFLICT` on SQLite and PostgreSQL,
  `ON DUPLICATE KEY` on MySQL), committed as a worker's acknowledgements
  are, since a record is written for each job someone asked about. The
  expiry is counted on the writer's clock, as a heartbeat's time is (a
  record is a note about this machine's work, not a lease: a clock a few
  seconds off moves when it disappears by as much). Expired rows are
  deleted by a write at most once a minute per process, so no reaper runs
  and the table holds what is live.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

from ..._clock import from_micros, to_micros, utcnow
from ...envelope import QueuedJob
from ...envelope.reading import Malformed, read_columns
from ...jobstate import Found
from .dialect import Dialect, Row, Session
from .schema import Tables
from .statements import ENVELOPE

PURGE_EVERY = 60.0
"""Seconds between deletions of expired records by one process's writes."""


class DatabaseRecords:
    """`JobLookup` and `RecordStore` over the queue's tables, run through the queue's `run`."""

    def __init__(
        self, dialect: Dialect, tables: Tables, run: Callable[..., Awaitable[Any]]
    ) -> None:
        self._dialect = dialect
        self._run = run
        sql = dialect.sql
        self._find = sql(
            f"SELECT {ENVELOPE}, reservation_token, lease_until, due_at FROM {tables.jobs} "
            "WHERE id = ?"
        )
        self._find_failed = sql(
            f"SELECT {ENVELOPE}, error, failed_at FROM {tables.failed} WHERE id = ? "
            "ORDER BY failed_at DESC, seq DESC LIMIT 1"
        )
        self._unheld = sql(
            f"SELECT {ENVELOPE} FROM {tables.jobs} WHERE id = ? AND reservation_token IS NULL"
        )
        self._remove = sql(f"DELETE FROM {tables.jobs} WHERE id = ? AND reservation_token IS NULL")
        # What the claim's `in_order` test finds, by name: the earliest row of the key
        # before this one, or one of its key that holds a lease.
        self._ahead = sql(
            f"SELECT e.id FROM {tables.jobs} AS j JOIN {tables.jobs} AS e "
            "ON e.ordering_key = j.ordering_key AND e.id <> j.id "
            "AND (e.seq < j.seq OR e.lease_until > ?) WHERE j.id = ? ORDER BY e.seq LIMIT 1"
        )
        records = tables.records
        self._records = records
        self._delete = sql(f"DELETE FROM {records} WHERE name = ?")
        insert = f"INSERT INTO {records} (name, body, expires_at) VALUES (?, ?, ?) "
        self._upsert = sql(
            insert + "ON DUPLICATE KEY UPDATE body = VALUES(body), expires_at = VALUES(expires_at)"
            if dialect.name == "mysql"
            else insert + "ON CONFLICT (name) DO UPDATE SET body = excluded.body, "
            "expires_at = excluded.expires_at"
        )
        self._get = sql(f"SELECT body FROM {records} WHERE name = ? AND expires_at > ?")
        self._purge = sql(f"DELETE FROM {records} WHERE expires_at <= ?")
        self._purged = 0.0

    async def find_job(self, job_id: str) -> Found | None:
        async def work(s: Session) -> Found | None:
            now = await self._dialect.now(s)
            rows = await s.fetchall(self._find, (job_id,))
            if rows:
                return _from_jobs(rows[0], job_id, now)
            rows = await s.fetchall(self._find_failed, (job_id,))
            return _from_failed(rows[0], job_id) if rows else None

        found: Found | None = await self._run(work, write=False)
        return found

    async def ahead_of(self, job_id: str) -> str | None:
        """`OrderingLookup`: the job that holds `job_id` back on its ordering key, if any."""

        async def work(s: Session) -> str | None:
            now = await self._dialect.now(s)
            rows = await s.fetchall(self._ahead, (now, job_id))
            return str(rows[0][0]) if rows else None

        ahead: str | None = await self._run(work, write=False)
        return ahead

    async def remove_job(self, job_id: str) -> QueuedJob | None:
        """Delete the job's row unless a worker holds it (its reservation token is set).

        The delete repeats the condition, so a reserve that takes the row
        between the read and the delete wins, and nothing is removed.
        """

        async def work(s: Session) -> QueuedJob | None:
            rows = await s.fetchall(self._unheld, (job_id,))
            if not rows or not await s.execute(self._remove, (job_id,)):
                return None
            job: QueuedJob = _job(rows[0], job_id)
            return job

        removed: QueuedJob | None = await self._run(work)
        return removed

    async def put_record(self, key: str, value: bytes, ttl: timedelta) -> None:
        purge = time.monotonic() - self._purged > PURGE_EVERY
        now = to_micros(utcnow())
        expires = now + int(ttl / timedelta(microseconds=1))

        async def work(s: Session) -> None:
            if purge:
                await s.execute(self._purge, (now,))
            await s.execute(self._upsert, (key, value.decode(), expires))

        # As a worker's acknowledgements: a record kept only as well as the settle after it.
        await self._run(work, durable=False)
        if purge:
            self._purged = time.monotonic()

    async def get_record(self, key: str) -> bytes | None:
        now = to_micros(utcnow())
        rows: list[Row] = await self._run(lambda s: s.fetchall(self._get, (key, now)), write=False)
        return _body(rows[0][0]) if rows else None

    async def forget_record(self, key: str) -> bool:
        deleted: int = await self._run(lambda s: s.execute(self._delete, (key,)), durable=False)
        return deleted > 0

    async def records(self, prefix: str) -> list[bytes]:
        # The prefix's length goes into the text (a whole number, never input), so no
        # database has to guess the type of substr's bound argument.
        sql = self._dialect.sql(
            f"SELECT body FROM {self._records} WHERE substr(name, 1, {len(prefix):d}) = ? "
            "AND expires_at > ?"
        )

        now = to_micros(utcnow())
        rows: list[Row] = await self._run(lambda s: s.fetchall(sql, (prefix, now)), write=False)
        return [_body(row[0]) for row in rows]


def _body(value: object) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    return str(value).encode()


def _job(row: Row, job_id: str) -> Any:
    job = read_columns(row[:10])
    if isinstance(job, Malformed):
        return job.as_job(queue="?", job_id=job_id)
    return job


def _micros(value: object) -> int | None:
    return None if value is None or isinstance(value, str | bytes) else int(str(value))


def _from_jobs(row: Row, job_id: str, now: int) -> Found:
    job = _job(row, job_id)
    token, lease_until, due_at = row[10], _micros(row[11]), _micros(row[12])
    if token is not None:
        return Found(
            job=job,
            where="reserved",
            lease_until=None if lease_until is None else from_micros(lease_until),
        )
    if due_at is not None and due_at > now:
        return Found(job=job, where="delayed", due_at=from_micros(due_at))
    return Found(job=job, where="queued")


def _from_failed(row: Row, job_id: str) -> Found:
    error = row[10]
    failed_at = _micros(row[11])
    return Found(
        job=_job(row, job_id),
        where="failed",
        error=error if isinstance(error, str) else repr(error),
        failed_at=None if failed_at is None else from_micros(failed_at),
    )


__all__ = ["DatabaseRecords"]
