# SPDX-License-Identifier: MIT
"""How job rows reach PostgreSQL: binary `COPY` for a batch, one `INSERT` for a few.

Bulk enqueue is how much work arrives (an import, one request fanned out
into thousands of jobs), and the faster it lands the sooner workers start.
An `INSERT ... SELECT FROM unnest(arrays)` makes psycopg build one array per
column and the server unpack them row by row; binary `COPY` streams rows in
the table's own format at about twice the rate, and the client encodes the
next rows while the server is still writing the last ones. What `COPY` costs
is round trips: the clock is read first, and the notification is a
statement of its own. So a push of a few jobs (one dispatch) stays a single
`INSERT` statement, and only a batch of `COPY_FROM` or more goes by `COPY`.

What either way guarantees:

- **Durable on return.** The pool's connections are in autocommit, so the
  `INSERT`, or the `COPY`, is a transaction of its own, committed (and, with
  `synchronous_commit` on, flushed) before the call returns.
- **All or nothing.** A batch is one statement however large it is, streamed
  in pieces rather than built in memory whole. A row that cannot be encoded
  (a payload that is not JSON) aborts the `COPY` and nothing is written.
- **Due times on the server's clock.** A job's delay is measured on the
  caller's clock (its due time less the caller's now) and added to the
  server's clock, read in the same statement or just before the `COPY`: a web
  server whose clock runs ahead never holds jobs back.
- **One notification per queue per batch.** With `COPY` it is sent after the
  commit; if it fails the push still succeeded (the jobs are in), and waiting
  workers find the jobs at their next poll.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from typing import Any

import psycopg

from ...._clock import to_micros, utcnow
from ....envelope import QueuedJob, encode_headers, encode_payload
from ....job import ORDERING_KEY
from ..schema import Tables
from ..statements import PUSHED
from .connection import NOW_US, outcome_unknown
from .listen import PAYLOAD_LIMIT

log = logging.getLogger("rainier_queue.drivers.database.postgres")

COPY_FROM = 32
"""Batches this big or bigger go by `COPY`; smaller ones by one `INSERT` (fewer round trips)."""

COLUMNS = f"{PUSHED}, due_at"

COPY_TYPES = ("text",) * 5 + ("int4",) * 2 + ("int8",) * 2 + ("text", "text", "int8")
"""The PostgreSQL type of each of `COLUMNS`, for binary `COPY`."""

CLOCK = f"SELECT {NOW_US}"


def job_rows(
    jobs: Sequence[QueuedJob], server_now: int, client_now: int
) -> Iterator[tuple[Any, ...]]:
    """Each job as a row of `COLUMNS`, its due time moved onto the server's clock."""
    for job in jobs:
        available_at = job.available_at
        available = to_micros(available_at)
        created_at = job.created_at
        delay = available - client_now
        yield (
            job.id,
            job.queue,
            job.name,
            encode_payload(job.payload),
            encode_headers(job.headers),
            job.attempts,
            job.max_attempts,
            available,
            available if created_at is available_at else to_micros(created_at),
            job.unique_key,
            job.headers.get(ORDERING_KEY),
            server_now + delay if delay > 0 else server_now,
        )


class PushStatements:
    """The SQL of both ways in, for one table."""

    def __init__(self, tables: Tables) -> None:
        arrays = ", ".join(
            f"%s::{t}[]"
            for t in ("text",) * 5 + ("int",) * 2 + ("bigint",) * 2 + ("text", "text", "bigint")
        )
        names = ", ".join(c.strip() for c in PUSHED.split(",")) + ", delay"
        self.copy = f"COPY {tables.jobs} ({COLUMNS}) FROM STDIN (FORMAT BINARY)"
        self.notify = (
            f"SELECT pg_notify(%s, CASE WHEN octet_length(q) <= {PAYLOAD_LIMIT} THEN q "
            "ELSE '' END) FROM unnest(%s::text[]) AS u(q)"
        )
        # One statement: the rows, their due times on the server's clock, and
        # one NOTIFY per queue (delivered only when the transaction commits).
        self.insert = (
            f"WITH clock AS (SELECT {NOW_US} AS now), "
            f"ins AS (INSERT INTO {tables.jobs} ({PUSHED}, due_at) "
            f"SELECT {PUSHED}, clock.now + GREATEST(u.delay, 0) "
            f"FROM unnest({arrays}) AS u({names}), clock RETURNING queue) "
            "SELECT pg_notify(%s, CASE WHEN octet_length(q) <= "
            f"{PAYLOAD_LIMIT} THEN q ELSE '' END) FROM (SELECT DISTINCT queue AS q FROM ins) AS d"
        )

    @staticmethod
    def insert_params(jobs: Sequence[QueuedJob], channel: str) -> tuple[object, ...]:
        """The parameters of `insert`: one array per column (the last the delay), then `channel`.

        The delay is measured from the caller's clock here and added to the
        server's in the statement.
        """
        columns: tuple[list[Any], ...] = tuple([] for _ in range(12))
        appends = [column.append for column in columns]
        # A zero server clock leaves each row's last value the job's own delay (or 0).
        for row in job_rows(jobs, 0, to_micros(utcnow())):
            for append, value in zip(appends, row, strict=True):
                append(value)
        return (*columns, channel)


async def insert_jobs(
    conn: psycopg.AsyncConnection[Any], statement: str, params: Sequence[object], where: str
) -> None:
    """Run the one-statement push on `conn` (in autocommit): committed when it returns.

    A connection lost once the statement was sent is `OutcomeUnknown`; other
    psycopg exceptions are left to the caller to translate.
    """
    try:
        await conn.execute(statement, params, binary=True)
    except psycopg.Error as exc:
        unknown = outcome_unknown(where, exc)
        if unknown is not None:
            raise unknown from exc
        raise


async def copy_jobs(
    conn: psycopg.AsyncConnection[Any],
    statements: PushStatements,
    jobs: Sequence[QueuedJob],
    channel: str,
    where: str,
) -> None:
    """Push `jobs` by `COPY` on `conn` (in autocommit), then notify their queues.

    Returns once the rows are committed. A connection lost once every row
    was sent (the server may be committing) is `OutcomeUnknown`; other
    psycopg exceptions are left to the caller to translate. A failed
    notification is logged, not raised.
    """
    cur = conn.cursor()
    await cur.execute(CLOCK)
    clock = await cur.fetchone()
    assert clock is not None
    server_now, client_now = int(clock[0]), to_micros(utcnow())
    sent = False
    try:
        async with cur.copy(statements.copy) as copy:
            copy.set_types(list(COPY_TYPES))
            write = copy.write_row
            for row in job_rows(jobs, server_now, client_now):
                await write(row)
            sent = True  # leaving the block ends the COPY, which commits it
    except psycopg.Error as exc:
        unknown = outcome_unknown(where, exc) if sent else None
        if unknown is not None:
            raise unknown from exc
        raise
    queues = sorted({job.queue for job in jobs})
    try:
        await cur.execute(statements.notify, (channel, queues))
    except psycopg.Error as exc:
        log.info(
            "pushed %d jobs, but could not notify waiting workers (they find the jobs at "
            "their next poll): %s",
            len(jobs),
            exc,
        )


# -- inside the caller's transaction ---------------------------------------------
#
# The caller commits, so the notification goes in the same transaction (it is
# delivered at that commit, or never), and every row is encoded before the
# COPY starts: a payload that is not JSON then raises before anything reaches
# the server, and leaves the caller's transaction usable, as the one-statement
# push does.


async def copy_in(
    cur: psycopg.AsyncCursor[Any],
    statements: PushStatements,
    jobs: Sequence[QueuedJob],
    channel: str,
) -> None:
    """Push `jobs` by `COPY` in the transaction `cur` is in; they exist once it commits."""
    await cur.execute(CLOCK)
    clock = await cur.fetchone()
    assert clock is not None
    rows = list(job_rows(jobs, int(clock[0]), to_micros(utcnow())))
    async with cur.copy(statements.copy) as copy:
        copy.set_types(list(COPY_TYPES))
        for row in rows:
            await copy.write_row(row)
    await cur.execute(statements.notify, (channel, sorted({job.queue for job in jobs})))


def copy_in_sync(
    cur: psycopg.Cursor[Any],
    statements: PushStatements,
    jobs: Sequence[QueuedJob],
    channel: str,
) -> None:
    """`copy_in` on a blocking cursor."""
    cur.execute(CLOCK)
    clock = cur.fetchone()
    assert clock is not None
    rows = list(job_rows(jobs, int(clock[0]), to_micros(utcnow())))
    with cur.copy(statements.copy) as copy:
        copy.set_types(list(COPY_TYPES))
        for row in rows:
            copy.write_row(row)
    cur.execute(statements.notify, (channel, sorted({job.queue for job in jobs})))


__all__ = [
    "COPY_FROM",
    "PushStatements",
    "copy_in",
    "copy_in_sync",
    "copy_jobs",
    "insert_jobs",
    "job_rows",
]
