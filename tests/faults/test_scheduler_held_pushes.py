# SPDX-License-Identifier: MIT
"""Schedulers SIGKILLed while held in their pushes: the ticks they claimed are still enqueued.

The report (issue 27, item 13): with three PostgreSQL schedulers, another
connection locked the jobs table, so each scheduler in turn claimed a tick
and was held in its push; all three were SIGKILLed. The ticks lived only in
the dead processes' memory, and the cursor had moved past them, so a
scheduler started afterwards never enqueued them.

Here the same happens with real processes and a real lock: three schedulers
(`held_scheduler`, two-second claims) are held until each has claimed a tick,
then killed; the lock is let go, and one fresh scheduler must enqueue every
claimed tick exactly once. The store-level forms of this, on every store,
are in `tests/cache_contract/test_schedule_claims.py`.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from datetime import datetime
from pathlib import Path

import psycopg
import pytest

from rainier_queue.cache.postgres import PostgresCache
from rainier_queue.drivers import DriverContext, open_queue
from rainier_queue.envelope import parse_time
from rainier_queue.scheduling import TICK_HEADER
from rainier_queue.scheduling.claims import Claims, Outcome

from ..conftest import unreachable
from ..postgres import PG_URL, drop_prefixed

ROOT = Path(__file__).resolve().parents[2]
PATIENCE = 90.0
"""Seconds to wait for a state the test drives towards (not a timing assertion)."""


def scheduler(url: str, log: Path) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAINIER_QUEUE_")}
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "tests.faults.held_scheduler", url],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=out,
        )


async def until(check: Callable[[], Awaitable[bool]], what: str, log: Path) -> None:
    deadline = time.monotonic() + PATIENCE
    while not await check():
        if time.monotonic() > deadline:
            tail = log.read_text()[-3000:]  # noqa: ASYNC240 - a small file, once, on failure
            raise AssertionError(f"gave up waiting for {what}\n{tail}")
        await asyncio.sleep(0.2)


async def ledger(url: str) -> Counter[datetime]:
    queue = open_queue(url, {}, DriverContext())
    ticks: Counter[datetime] = Counter()
    try:
        while batch := await queue.reserve("default", limit=500):
            for reservation in batch:
                ticks[parse_time(reservation.job.headers[TICK_HEADER])] += 1
            await queue.acknowledge_many(batch)
    finally:
        await queue.aclose()
    return ticks


@pytest.mark.slow
@pytest.mark.timeout(300)
async def test_ticks_claimed_by_schedulers_killed_in_their_pushes_are_enqueued_once(
    tmp_path: Path,
) -> None:
    try:
        async with await psycopg.AsyncConnection.connect(PG_URL, connect_timeout=3):
            pass
    except psycopg.OperationalError as exc:
        unreachable("PostgreSQL", exc)
    ns = "rq" + uuid.uuid4().hex[:10]
    url = f"{PG_URL}?prefix={ns}_"
    log = tmp_path / "schedulers.log"
    queue = open_queue(url, {}, DriverContext())
    await queue.size("default")  # creates the jobs table, so it can be locked
    await queue.aclose()
    store = PostgresCache.from_url(url)
    claims = Claims(store, owner="the test")
    await store.get("nothing")  # creates the claims table, so it can be read
    locker = await psycopg.AsyncConnection.connect(PG_URL)
    reader = await psycopg.AsyncConnection.connect(PG_URL, autocommit=True)
    running: list[subprocess.Popen[bytes]] = []
    try:
        await locker.execute(f"LOCK TABLE {ns}_jobs IN ACCESS EXCLUSIVE MODE")
        running = [scheduler(url, log) for _ in range(3)]

        async def claimed_ticks() -> list[datetime]:
            # Read from the table itself, so the test needs nothing of the fix to run.
            rows = await (
                await reader.execute(
                    f"SELECT key FROM {ns}_cache WHERE key LIKE 'schedule:ledger:tick:%%' "
                    "AND value LIKE 'claimed %%'"
                )
            ).fetchall()
            return sorted(parse_time(str(key).rpartition(":tick:")[2]) for (key,) in rows)

        async def three_held() -> bool:
            # Each scheduler's push waits for the table lock. Held longer than a claim's
            # lease, a claim lapses, and a scheduler that starts late may take over a
            # lapsed tick rather than claim a new one, so the ticks held number 1 to 3.
            row = await (
                await reader.execute(
                    "SELECT count(*) FROM pg_stat_activity "
                    "WHERE wait_event_type = 'Lock' AND query LIKE %s",
                    (f"%{ns}_jobs%",),
                )
            ).fetchone()
            return row is not None and row[0] >= 3

        await until(three_held, "three schedulers each held in a push", log)
        claimed = await claimed_ticks()
        assert claimed, "the schedulers held in their pushes hold claims"
        for process in running:
            process.send_signal(signal.SIGKILL)
            process.wait()
        # A server notices a dead client only when it next writes to it; the
        # pushes waiting for the lock are ended as the server would end them.
        await locker.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE pid <> pg_backend_pid() AND query LIKE %s",
            (f"%{ns}_jobs%",),
        )
        await locker.rollback()
        running = [scheduler(url, log)]

        async def all_settled() -> bool:
            states = [await claims.state("ledger", t) for t in claimed]
            return all(isinstance(state, Outcome) for state in states)

        await until(all_settled, "the fresh scheduler to settle the claimed ticks", log)
    finally:
        for process in running:
            process.send_signal(signal.SIGTERM)
        for process in running:
            process.wait(timeout=60)
        await locker.close()
        await reader.close()
        await store.aclose()
    try:
        ticks = await ledger(url)
        missing = [t.isoformat() for t in claimed if ticks[t] == 0]
        twice = [t.isoformat() for t in claimed if ticks[t] > 1]
        assert not missing, f"claimed ticks never enqueued: {missing}\n{log.read_text()[-3000:]}"
        assert not twice, f"claimed ticks enqueued twice: {twice}"
        assert "took over tick" in log.read_text()
    finally:
        await drop_prefixed(f"{ns}_")
