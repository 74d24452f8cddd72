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
