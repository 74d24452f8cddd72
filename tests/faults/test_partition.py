# SPDX-License-Identifier: MIT
"""A busy worker cut off from its broker by the network rides the cut out; every job runs once.

Restart tests stop the server, which answers at once with refused
connections. A network that goes silent answers nothing: the worker's calls
hang until its connections give up (about 10 s, see `test_silent_server`),
its jobs' results cannot be recorded, and their leases cannot be renewed.
The worker here runs in a network namespace whose cable the test takes
down for longer than that, while jobs are running, then back up. Every job
must then run to the end exactly once, with the lease (30 s) outlasting the
cut, so no job is handed to anyone else, and nothing must be left queued or
failed.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path

import pytest

from ..mysql_service import ThrowawayServer
from ..partition import Partition
from ..postgres_server import ThrowawayPostgres
from ..redis_servers import RedisServers
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

CUT = 14.0
"""Seconds the cable stays down: past the drivers' 10 s give-up, short of the 30 s lease."""
TOTAL = 300


async def ride_out_a_cut(tmp_path: Path, partition: Partition, url: str, outage: str) -> None:
    conf = config(tmp_path, url, lease="30s")
    ledger = tmp_path / "ledger.db"
    await push_slow(url, range(TOTAL))
    proc = worker(
        conf,
        ledger,
        *("--concurrency", "4", "--sleep", "0.5s", "--timeout", "5s"),
        *("--max-consecutive-errors", "500", "--max-error-backoff", "0.5s"),
        within=partition.prefix,
    )
    try:
        deadline = time.monotonic() + 60
        while len(count(ledger, "finish")) < 30:
            assert time.monotonic() < deadline, f"the worker never got going: {output(proc)}"
            assert proc.poll() is None, output(proc)
            await asyncio.sleep(0.02)
        before = set(count(ledger, "finish"))
        assert len(before) < TOTAL, "the cut should come while jobs are still queued"

        partition.cut()
        await asyncio.sleep(CUT)
        assert proc.poll() is None, f"the worker died while cut off: {output(proc)}"
        partition.heal()

        await until_finished(ledger, proc, set(range(TOTAL)), within=90)
    finally:
        partition.heal()
        code = await terminate(proc)

    printed = output(proc)
    assert code == 0, f"the worker should exit cleanly on SIGTERM: {printed}"
    assert rode_out_an_outage(printed, outage), printed
    assert set(count(ledger, "finish")) - before, "some jobs finished only after the cut"
    each_finished_once(ledger, range(TOTAL))
    await assert_drained(url)


@pytest.mark.timeout(180)
async def test_a_worker_rides_out_a_network_cut_from_postgres(
    tmp_path: Path, partition: Partition
) -> None:
    server = ThrowawayPostgres()
    try:
        server.listen_also(partition.host, partition.network)
        server.start()
        url = f"postgresql://postgres@{partition.host}:{server.port}/postgres?prefix=rq_cut_"
        await ride_out_a_cut(tmp_path, partition, url, "is unavailable")
    finally:
        server.remove()


@pytest.mark.timeout(180)
async def test_a_worker_rides_out_a_network_cut_from_mysql(
    tmp_path: Path, partition: Partition
) -> None:
    with tempfile.TemporaryDirectory(prefix="rq-cut-mysql-") as folder:
        server = ThrowawayServer(Path(folder))
        try:
            server.listen_also(partition.host)
            server.start()
            url = f"mysql://root@{partition.host}:{server.port}/test?prefix=rq_cut_"
            await ride_out_a_cut(tmp_path, partition, url, "MySQL at")
        finally:
            server.stop()


@pytest.mark.timeout(180)
async def test_a_worker_rides_out_a_network_cut_from_redis(
    tmp_path: Path, partition: Partition
) -> None:
    servers = RedisServers(tmp_path / "redis")
    (tmp_path / "redis").mkdir()
    try:
        port = servers.start("--bind", f"127.0.0.1 {partition.host}", "--protected-mode", "no")
        url = f"redis://{partition.host}:{port}/0?prefix=cut:"
        await ride_out_a_cut(tmp_path, partition, url, "Redis is unreachable")
    finally:
        servers.stop()
