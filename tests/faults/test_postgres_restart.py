# SPDX-License-Identifier: MIT
"""What only PostgreSQL's pool shows around a restart, on a private PostgreSQL.

Workers riding out a PostgreSQL crash (`immediate`) and a clean restart
(`fast`), busy and idle, with every job run exactly once, are tested with
every other server's in test_restarts.py, on the private server the contract
backend starts (tests/contract/backend_postgres.py).

The server here is one this test starts in a temporary folder on a free
port (`tests/postgres_server.py`), never the shared one on 5432.

One test here stays particular to PostgreSQL: a short restart under one
worker at concurrency 24, where every settle the restart catches once
counted as an error in a row and the worker gave up.

A web process feels a restart differently: no worker loop retries for it,
so each dispatch that lands on a dead pooled connection is an error its
caller sees. The test here holds the pool to one such error per restart, not
one per pooled connection.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from rainier_queue.connections import open_queue
from rainier_queue.errors import BrokerUnavailable

from ..postgres_server import ThrowawayPostgres
from .harness import (
    assert_drained,
    config,
    count,
    each_finished_once,
    output,
    push_slow,
    terminate,
    until_finished,
    worker,
)

pytestmark = pytest.mark.slow


@pytest.fixture
def server() -> Iterator[ThrowawayPostgres]:
    pg = ThrowawayPostgres()
    try:
        pg.start()
        yield pg
    finally:
        pg.remove()


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
