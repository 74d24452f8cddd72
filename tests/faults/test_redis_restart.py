# SPDX-License-Identifier: MIT
"""What only Redis shows around a restart: its dataset marker comes back with its AOF.

Workers riding out a Redis crash and a clean restart are tested with every
other server's in test_restarts.py, on the private server the contract
backend starts (tests/contract/backend_redis.py: an append-only file fsynced
on every write). This file holds what is Redis's own: the marker the driver
keeps to notice a server that came back empty is still there after a restart
on the AOF, so nothing is reported lost. A Redis that comes back *empty* is
covered in-process by `tests/drivers/test_redis_queue.py`
(`test_a_redis_restarted_without_persistence_is_an_outage_then_a_reported_loss`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from redis.asyncio import Redis

from rainier_queue.cache.redis import RedisCache
from rainier_queue.connections import open_queue
from rainier_queue.drivers.redis import RedisQueue
from rainier_queue.envelope import QueuedJob
from rainier_queue.errors import BrokerUnavailable

from ..contract.backend_redis import PERSISTENT
from ..redis_servers import RedisServers, standalone

pytestmark = pytest.mark.slow


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


@pytest.mark.parametrize("how", ["stopped", "killed"])
@pytest.mark.timeout(60)
async def test_a_redis_restarted_on_its_append_only_file_keeps_its_marker_and_its_jobs(
    private_redis: tuple[RedisServers, int], how: str
) -> None:
    servers, port = private_redis
    assert await _appendonly(port) == "yes", "the extra arguments must override the defaults"
    queue = open_queue(f"redis://127.0.0.1:{port}/0?prefix=rq:restart:")
    assert isinstance(queue, RedisQueue)
    try:
        await queue.push(QueuedJob.create("kept", None))
        assert await queue.check_dataset() is True

        if how == "stopped":
            servers.stop_one(port)
        else:
            servers.kill(port)
        servers.start(*PERSISTENT, port=port)  # same port, same directory: the AOF reloads

        assert await _check_dataset(queue) is True, "the AOF should bring the marker back"
        assert await queue.size("default") == 1
    finally:
        await queue.aclose()


async def test_a_batch_of_cursor_writes_after_the_server_lost_its_scripts_loads_them_again(
    private_redis: tuple[RedisServers, int],
) -> None:
    # A restart (or SCRIPT FLUSH) forgets the scripts a client loaded; the batched
    # compare-and-sets (the Kafka cursors') are sent by sha and must load it again.
    _, port = private_redis
    cache = RedisCache.from_url(f"redis://127.0.0.1:{port}/0?prefix=t:")
    try:
        await cache.put("a", b"1")
        await cache.put("b", b"1")
        assert await cache.replace_if("a", b"1", b"2") is True  # loads the script once
        admin = Redis(port=port)
        await admin.script_flush()
        await admin.aclose()

        answers = await cache.replace_many_if([("a", b"2", b"3"), ("b", b"0", b"3")])

        assert answers == [True, False]
        assert [await cache.get("a"), await cache.get("b")] == [b"3", b"1"]
    finally:
        await cache.aclose()
