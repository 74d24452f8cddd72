# SPDX-License-Identifier: MIT
"""A real worker process on a private Redis that is stopped and started again under it.

The server keeps its data in an append-only file fsynced on every write, so
the restart brings every queued job back. The worker (through the CLI) must
sit the outage out with its capped backoff instead of exiting, and carry on
when the server answers again. Never the shared server on 6379: this one is
started for the test on a free port, in a directory of its own.

A Redis that comes back *empty* is covered in-process by
`tests/drivers/test_redis_queue.py`
(`test_a_redis_restarted_without_persistence_is_an_outage_then_a_reported_loss`).
"""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from redis.asyncio import Redis

from rainier_queue.drivers import open_queue
from rainier_queue.drivers.redis import RedisQueue
from rainier_queue.errors import BrokerUnavailable

from ..redis_servers import RedisServers, standalone
from .harness import (
    assert_drained,
    config,
    count,
    output,
    push_slow,
    rode_out_an_outage,
    terminate,
    until_finished,
    worker,
)

pytestmark = pytest.mark.slow

PERSISTENT = ("--appendonly", "yes", "--appendfsync", "always")
"""Later arguments win in redis-server, so these override RedisServers.start's defaults."""


@pytest.fixture
def private_redis() -> Iterator[tuple[RedisServers, int]]:
    servers, port = standalone()
    try:
        # `standalone()` starts it without persistence; start it again with it.
        servers.restart(port, *PERSISTENT)
        yield servers, port
    finally:
        servers.stop()


async def _appendonly(port: int) -> str:
    client = Redis(port=port, decode_responses=True)
    try:
        return str((await client.config_get("appendonly"))["appendonly"])
    finally:
        await client.aclose()


async def _check_dataset(queue: RedisQueue) -> bool:
    """`check_dataset`, past the one `BrokerUnavailable` a pooled connection gives after a restart.

    The pool still holds the connection the old server closed; its first use
    fails ("Connection closed by server") and the next command reconnects.
    """
    for _ in range(20):
        try:
            return await queue.check_dataset()
        except BrokerUnavailable:
            await asyncio.sleep(0.1)
    return await queue.check_dataset()


async def _restart_under(
    proc: subprocess.Popen[bytes], servers: RedisServers, port: int, url: str
) -> None:
    """Stop the server for a few seconds under `proc`, then start it on its AOF again.

    A queue opened here looks at the dataset marker on both sides of the
    restart: with the AOF it is still there, so nothing is reported lost.
    """
    queue = open_queue(url)
    assert isinstance(queue, RedisQueue)
    try:
        assert await queue.check_dataset() is True
        servers.stop_one(port)
        await asyncio.sleep(2.5)
        assert proc.poll() is None, f"the worker died while Redis was down: {output(proc)}"
        servers.start(*PERSISTENT, port=port)  # same port, same directory: the AOF reloads
        assert await _check_dataset(queue) is True, "the AOF should bring the marker back"
    finally:
        await queue.aclose()


def _start_worker(conf: Path, ledger: Path) -> subprocess.Popen[bytes]:
    return worker(
        conf,
        ledger,
        *("--concurrency", "2", "--sleep", "0.2s", "--timeout", "1.5s"),
        *("--max-consecutive-errors", "50", "--max-error-backoff", "0.5s"),
    )


@pytest.mark.timeout(60)
async def test_a_worker_rides_out_a_redis_restart_and_resumes_when_it_is_back(
    tmp_path: Path, private_redis: tuple[RedisServers, int]
) -> None:
    servers, port = private_redis
    assert await _appendonly(port) == "yes", "the extra arguments must override the defaults"
    url = f"redis://127.0.0.1:{port}/0?prefix=rq:restart:"
    conf = config(tmp_path, url, lease="2s")
    ledger = tmp_path / "ledger.db"
    total = 200
    await push_slow(url, range(total))

    proc = _start_worker(conf, ledger)
    try:
        deadline = time.monotonic() + 30
        while len(count(ledger, "finish")) < 20:
            assert time.monotonic() < deadline, f"the worker never got going: {output(proc)}"
            assert proc.poll() is None, output(proc)
            await asyncio.sleep(0.02)

        before = set(count(ledger, "finish"))
        assert len(before) < total, "the restart should land while jobs are still queued"
        await _restart_under(proc, servers, port, url)

        await until_finished(ledger, proc, set(range(total)), within=40)
    finally:
        code = await terminate(proc, within=30)

    printed = output(proc)
    assert code == 0, f"the worker should exit cleanly on SIGTERM: {printed}"
    assert rode_out_an_outage(printed, "Redis is unreachable"), printed
    assert "lost its data" not in printed, "the AOF should have brought every key back"
    assert set(count(ledger, "finish")) - before, "some jobs finished only after the restart"
    await assert_drained(url)


@pytest.mark.timeout(60)
async def test_an_idle_worker_rides_out_a_redis_restart_and_takes_jobs_pushed_after_it(
    tmp_path: Path, private_redis: tuple[RedisServers, int]
) -> None:
    servers, port = private_redis
    url = f"redis://127.0.0.1:{port}/0?prefix=rq:idle:"
    conf = config(tmp_path, url, lease="2s")
    ledger = tmp_path / "ledger.db"
    await push_slow(url, range(10))

    proc = _start_worker(conf, ledger)
    try:
        await until_finished(ledger, proc, set(range(10)), within=40)
        await asyncio.sleep(0.5)  # every slot free: the worker waits on an empty stream

        await _restart_under(proc, servers, port, url)
        await push_slow(url, range(10, 30))

        await until_finished(ledger, proc, set(range(30)), within=40)
    finally:
        code = await terminate(proc, within=30)

    printed = output(proc)
    assert code == 0, f"the worker should exit cleanly on SIGTERM: {printed}"
    assert rode_out_an_outage(printed, "Redis is unreachable"), printed
    assert "lost its data" not in printed, "the AOF should have brought every key back"
    await assert_drained(url)
