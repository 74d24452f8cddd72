# SPDX-License-Identifier: MIT
"""A real worker process on a private PostgreSQL that is restarted under it.

PostgreSQL is the production default, so a restart (a minor-version upgrade,
a failover, a crash) must cost a pause, never a job. The worker (through the
CLI) must sit the outage out with its capped backoff, not exit; its pooled
connections, all dead after the restart, must be replaced; its `LISTEN`
connection must come back, so an idle worker still hears of new pushes; and
every job must finish exactly once: none lost, none run twice. A lease far
longer than the outage is what makes "exactly once" a fair demand here: the
acknowledgements that fail during the outage are retried after it, while the
worker still holds the jobs.

The server is one this test starts in a temporary folder on a free port
(`tests/postgres_server.py`), never the shared one on 5432. It is stopped
the two ways that matter: `immediate`, which is a crash as far as the data is
concerned (the restart replays the WAL, so only what was committed comes
back), while the worker is busy; and `fast`, the ordinary clean shutdown,
while it is idle.

A web process feels a restart differently: no worker loop retries for it,
so each dispatch that lands on a dead pooled connection is an error its
caller sees. The last test holds the pool to one such error per restart, not
one per pooled connection.
"""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from rainier_queue.drivers import open_queue
from rainier_queue.errors import BrokerUnavailable

from ..postgres_server import ThrowawayPostgres
from .harness import (
    assert_drained,
    config,
    count,
    each_finished_once,
    output,
    push_slow,
    rode_out_an_outage,
    terminate,
    until_finished,
    worker,
)

pytestmark = pytest.mark.slow

OUTAGE = 2.5
"""Seconds the server stays down: several of the worker's polls and backoffs."""


@pytest.fixture
def server() -> Iterator[ThrowawayPostgres]:
    pg = ThrowawayPostgres()
    try:
        pg.start()
        yield pg
    finally:
        pg.remove()


def _start_worker(conf: Path, ledger: Path) -> subprocess.Popen[bytes]:
    return worker(
        conf,
        ledger,
        *("--concurrency", "4", "--sleep", "0.5s", "--timeout", "5s"),
        *("--max-consecutive-errors", "200", "--max-error-backoff", "0.5s"),
    )


async def _restart_under(
    proc: subprocess.Popen[bytes], server: ThrowawayPostgres, mode: str
) -> None:
    server.stop(mode)
    await asyncio.sleep(OUTAGE)
    assert proc.poll() is None, f"the worker died while PostgreSQL was down: {output(proc)}"
    server.start()  # same port, same data folder


@pytest.mark.timeout(120)
async def test_a_busy_worker_rides_out_a_postgres_crash_and_restart_and_runs_every_job_once(
    tmp_path: Path, server: ThrowawayPostgres
) -> None:
    url = f"{server.url}?prefix=rq_busy_"
    conf = config(tmp_path, url, lease="30s")
    ledger = tmp_path / "ledger.db"
    total = 300
    await push_slow(url, range(total))

    proc = _start_worker(conf, ledger)
    try:
        deadline = time.monotonic() + 30
        while len(count(ledger, "finish")) < 30:
            assert time.monotonic() < deadline, f"the worker never got going: {output(proc)}"
            assert proc.poll() is None, output(proc)
            await asyncio.sleep(0.02)
        before = set(count(ledger, "finish"))
        assert len(before) < total, "the crash should land while jobs are still queued"

        await _restart_under(proc, server, "immediate")

        await until_finished(ledger, proc, set(range(total)))
    finally:
        code = await terminate(proc)

    printed = output(proc)
    assert code == 0, f"the worker should exit cleanly on SIGTERM: {printed}"
    assert rode_out_an_outage(printed, "is unavailable"), printed
    assert set(count(ledger, "finish")) - before, "some jobs finished only after the restart"
    each_finished_once(ledger, range(total))
    await assert_drained(url)


@pytest.mark.timeout(120)
async def test_an_idle_worker_rides_out_a_postgres_restart_and_takes_jobs_pushed_after_it(
    tmp_path: Path, server: ThrowawayPostgres
) -> None:
    url = f"{server.url}?prefix=rq_idle_"
    conf = config(tmp_path, url, lease="30s")
    ledger = tmp_path / "ledger.db"
    await push_slow(url, range(10))

    proc = _start_worker(conf, ledger)
    try:
        await until_finished(ledger, proc, set(range(10)))
        await asyncio.sleep(1)  # every slot free: the worker waits on its LISTEN connection

        await _restart_under(proc, server, "fast")
        await push_slow(url, range(10, 30))  # one INSERT: the small-push path
        await push_slow(url, range(30, 100))  # COPY: the bulk path

        await until_finished(ledger, proc, set(range(100)))
    finally:
        code = await terminate(proc)

    printed = output(proc)
    assert code == 0, f"the worker should exit cleanly on SIGTERM: {printed}"
    assert rode_out_an_outage(printed, "is unavailable"), (
        "its pooled connections died with the server"
    )
    each_finished_once(ledger, range(100))
    await assert_drained(url)


async def _until_open(url: str, count: int) -> None:
    """Wait until the server sees `count` of the queue's pooled connections."""
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        while True:
            cur = await conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'rainier-queue'"
            )
            row = await cur.fetchone()
            if row is not None and row[0] >= count:
                return
            await asyncio.sleep(0.05)


@pytest.mark.timeout(60)
async def test_after_a_restart_one_call_finds_a_dead_connection_not_one_per_pooled_connection(
    server: ThrowawayPostgres,
) -> None:
    pooled = 6
    queue = open_queue(f"{server.url}?prefix=rq_pool_&pool_min={pooled}&pool_max={pooled}")
    try:
        await queue.size("default")
        await _until_open(server.url, pooled)  # the pool opens the rest in the background

        await _restart_under_nobody(server)
        failures = 0
        for _ in range(2 * pooled):  # one at a time, as a web app's dispatches come
            try:
                await queue.size("default")
            except BrokerUnavailable:
                failures += 1

        assert 1 <= failures < pooled / 2, f"{failures} calls found a dead connection"
    finally:
        await queue.aclose()


async def _restart_under_nobody(server: ThrowawayPostgres) -> None:
    server.stop("fast")
    await asyncio.sleep(0.5)
    server.start()


@pytest.mark.timeout(180)
async def test_a_short_restart_under_a_worker_at_high_concurrency_never_ends_it(
    tmp_path: Path, server: ThrowawayPostgres
) -> None:
    # The default --max-consecutive-errors (20) on purpose: once, every one of the
    # 24 settles a restart caught counted as an error in a row, and the worker gave up.
    url = f"{server.url}?prefix=rq_wide_"
    conf = config(tmp_path, url, lease="30s")
    ledger = tmp_path / "ledger.db"
    total = 600
    await push_slow(url, range(total), seconds=0.05)

    proc = worker(conf, ledger, "--concurrency", "24", "--sleep", "0.5s", "--timeout", "5s")
    try:
        deadline = time.monotonic() + 30
        while len(count(ledger, "finish")) < 48:
            assert time.monotonic() < deadline, f"the worker never got going: {output(proc)}"
            assert proc.poll() is None, output(proc)
            await asyncio.sleep(0.02)

        server.stop("immediate")
        await asyncio.sleep(1.0)
        server.start()

        await until_finished(ledger, proc, set(range(total)), within=120)
    finally:
        code = await terminate(proc)

    printed = output(proc)
    assert code == 0, f"the worker should exit cleanly on SIGTERM: {printed}"
    assert "gave up" not in printed, printed
    assert "giving up" not in printed, printed
    each_finished_once(ledger, range(total))
    await assert_drained(url)
