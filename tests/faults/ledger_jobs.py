# SPDX-License-Identifier: MIT
"""Jobs for the process-level tests: each run is written to a ledger file.

The ledger is a separate SQLite file (its path in RAINIER_QUEUE_TEST_LEDGER)
with one row per start and one per finish of every run, written by the
handler itself. Counting rows there shows, from outside the queue, how many
times each job really ran and whether two runs of one job ever overlapped.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time

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


registry = JobRegistry([Count, Slow])
