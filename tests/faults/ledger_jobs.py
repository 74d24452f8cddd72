# SPDX-License-Identifier: MIT
"""Jobs for the process-level tests: each run is written to a ledger file.

The ledger is a separate SQLite file (its path in RAINIER_QUEUE_TEST_LEDGER)
with one row per start and one per finish of every run, written by the
handler itself. Counting rows there shows, from outside the queue, how many
times each job really ran and whether two runs of one job ever overlapped.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import threading
import time
from datetime import timedelta
from typing import ClassVar

from rainier_queue import Job, JobContext, JobRegistry


def ledger(path: str | None = None) -> sqlite3.Connection:
    """The ledger, in WAL mode with its table made; `harness.worker` makes it first.

    Made by one process before the workers start: switching a new file to
    WAL takes a lock that SQLite's busy timeout does not wait for, so 32
    handler threads doing it at the same first moment failed a job now and
    then with "database is locked" (and then it had no start row).
    """
    conn = sqlite3.connect(
        path or os.environ["RAINIER_QUEUE_TEST_LEDGER"], timeout=30, isolation_level=None
    )
    conn.execute("PRAGMA journal_mode=WAL")
    # NORMAL in WAL mode survives a killed process (only a power cut loses the
    # last commits), which is all these tests do, at half the cost of FULL.
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute(
        "CREATE TABLE IF NOT EXISTS runs (job_id TEXT, n INTEGER, attempt INTEGER, pid INTEGER,"
        " event TEXT, at REAL)"
    )
    return conn


_open = threading.local()


def _connection() -> sqlite3.Connection:
    """This thread's ledger connection, opened once and kept for the life of the process.

    A connection per row, opened and closed, made every close the ledger's
    last one now and then, and the last close checkpoints the WAL and removes
    it under an exclusive lock; a handler opening the file in that moment on a
    loaded machine could fail its `start` row, which failed its job before it
    began (seen once in CI: seven jobs of one batch "never ran").
    """
    conn: sqlite3.Connection | None = getattr(_open, "conn", None)
    if conn is None:
        conn = _open.conn = ledger()
    return conn


def record(ctx: JobContext, n: int, event: str) -> None:
    """Write one row; a lock that outlasts SQLite's busy wait is waited out here, not failed."""
    row = (ctx.job_id, n, ctx.attempt, os.getpid(), event, time.time())
    for attempt in range(20):
        try:
            _connection().execute("INSERT INTO runs VALUES (?, ?, ?, ?, ?, ?)", row)
            return
        except sqlite3.OperationalError as exc:
            if ("locked" not in str(exc) and "busy" not in str(exc)) or attempt == 19:
                raise
            time.sleep(0.05 * (attempt + 1))


class Count(Job):
    """Records its run; fails for every n divisible by 97 so the failed table is used too."""

    name = "count"
    tries = 1
    n: int

    def handle(self, ctx: JobContext) -> None:
        record(ctx, self.n, "start")
        if self.n % 97 == 0:
            record(ctx, self.n, "fail")
            raise RuntimeError(f"job {self.n} fails on purpose")
        record(ctx, self.n, "finish")


class Slow(Job):
    """Takes a while, so a worker can be killed while it runs."""

    name = "slow"
    tries = 5
    n: int
    seconds: float = 0.4

    def handle(self, ctx: JobContext) -> None:
        record(ctx, self.n, "start")
        time.sleep(self.seconds)
        record(ctx, self.n, "finish")


class Overrun(Job):
    """A plain `def` job whose first attempt runs past its timeout, blocked in a sleep.

    The exception the worker raises in its thread reaches it only when the
    sleep returns, so the first attempt's thread outlives its timeout by
    about a second; its `end` row is written as it really ends. The retry
    is due at once (no backoff) and returns quickly.
    """

    name = "overrun"
    tries = 2
    timeout: ClassVar[timedelta | float | None] = timedelta(seconds=1)
    n: int
    seconds: float = 2.0

    def handle(self, ctx: JobContext) -> None:
        try:
            record(ctx, self.n, "start")
            if ctx.attempt == 1:
                time.sleep(self.seconds)
        finally:
            record(ctx, self.n, "end")
        record(ctx, self.n, "finish")

    def backoff(self, attempt: int) -> timedelta:
        return timedelta(0)


class Naps(Job):
    """Sleeps in short naps: the exception raised in its thread at a stop ends it between two."""

    name = "naps"
    tries = 3
    n: int
    seconds: float = 45.0

    def handle(self, ctx: JobContext) -> None:
        record(ctx, self.n, "start")
        until = time.monotonic() + self.seconds
        while time.monotonic() < until:
            time.sleep(0.01)
        record(ctx, self.n, "finish")


class Lingering(Job):
    """An `async def` job that runs until it is cancelled (or two minutes pass)."""

    name = "lingering"
    tries = 3
    n: int

    async def handle(self, ctx: JobContext) -> None:
        record(ctx, self.n, "start")
        try:
            await asyncio.sleep(120)
        except asyncio.CancelledError:
            record(ctx, self.n, "cancelled")
            raise
        record(ctx, self.n, "finish")


class Rated(Job):
    """Five starts a second per key, across every worker (tests/faults/test_limits.py)."""

    name = "rated"
    rate_limit = "5/s"
    n: int
    key: str = "rated"

    def limit_key(self) -> str:
        return self.key

    def handle(self, ctx: JobContext) -> None:
        record(ctx, self.n, "start")
        record(ctx, self.n, "finish")


class Paired(Job):
    """Two at a time per key, across every worker; each run takes a while, so runs overlap
    when nothing holds them apart (tests/faults/test_limits.py)."""

    name = "paired"
    concurrency_limit = 2
    n: int
    key: str = "paired"
    seconds: float = 0.2

    def limit_key(self) -> str:
        return self.key

    def handle(self, ctx: JobContext) -> None:
        record(ctx, self.n, "start")
        time.sleep(self.seconds)
        record(ctx, self.n, "finish")


class Tally(Job):
    """A job of a batch: a short nap and one `finish` row (a batch of 10,000 writes 10,000)."""

    name = "tally"
    tries = 5
    n: int

    def handle(self, ctx: JobContext) -> None:
        time.sleep(0.002)
        record(ctx, self.n, "finish")


class BatchDone(Job):
    """A batch's callback: one row whose event is `<kind>:<succeeded>:<failed>:<cancelled>`."""

    name = "batch-done"
    tries = 5
    kind: str

    def handle(self, ctx: JobContext) -> None:
        counts = ctx.batch
        assert counts is not None, "a batch's callback is told its counts"
        event = f"{self.kind}:{counts.succeeded}:{counts.failed}:{counts.cancelled}"
        record(ctx, counts.total, event)


class Ordered(Job):
    """Runs one at a time per ordering key, in dispatch order, across every worker; each run
    takes a while, so runs of one key would overlap if nothing held them apart
    (tests/faults/test_ordering.py)."""

    name = "ordered"
    n: int
    key: str
    seconds: float = 0.1

    def ordering_key(self) -> str:
        return self.key

    def handle(self, ctx: JobContext) -> None:
        record(ctx, self.n, "start")
        time.sleep(self.seconds)
        record(ctx, self.n, "finish")


registry = JobRegistry([Count, Slow, Overrun, Naps, Lingering, Tally, BatchDone, Ordered])

limited = JobRegistry([Rated, Paired])
"""The limited jobs, apart: a worker whose registry holds a limited job needs a shared store
for its limits, which a broker connection alone does not give."""
