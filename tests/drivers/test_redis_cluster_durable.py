# SPDX-License-Identifier: MIT
"""The durable mode (`wait_replicas`) on a Redis Cluster: each push waits for the replicas
of the primary that owns its queue's slot.

A cluster of three primaries, each with one replica, started for this module.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from redis.asyncio import Redis
from redis.exceptions import MovedError

from rainier_queue.drivers import open_queue
from rainier_queue.drivers.redis import RedisQueue
from rainier_queue.envelope import QueuedJob
from rainier_queue.errors import NotReplicated

from ..redis_servers import RedisServers, cluster


def a_job(queue: str) -> QueuedJob:
    return QueuedJob.create("note", {"text": uuid.uuid4().hex}, queue=queue)


@pytest.fixture(scope="module")
def replicated_cluster() -> Iterator[RedisServers]:
    servers = cluster(3, replicas=1)
    try:
        yield servers
    finally:
        servers.stop()


@pytest.fixture
async def open_durable(replicated_cluster: RedisServers) -> AsyncIterator[Any]:
    opened: list[RedisQueue] = []
    prefix = f"rq:d{uuid.uuid4().hex[:10]}:"
    seeds = ",".join(f"127.0.0.1:{port}" for port in replicated_cluster.ports)

    def opener(query: str) -> RedisQueue:
        queue = open_queue(f"redis-cluster://{seeds}/?prefix={prefix}&{query}")
        assert isinstance(queue, RedisQueue)
        opened.append(queue)
        return queue

    yield opener
    for queue in opened:
        await queue.aclose()


async def copies_on_replicas(servers: RedisServers, key: str) -> int:
    """How many replicas hold `key` (each asked directly, in READONLY mode)."""
    held = 0
    for port in servers.ports:
        node = Redis(port=port, decode_responses=True)
        try:
            info = await node.info("replication")
            if info.get("role") != "slave":
                continue
            await node.readonly()
            try:
                held += int(await node.exists(key))
            except MovedError:  # a replica of another primary's slots
                continue
        finally:
            await node.aclose()
    return held


async def test_a_durable_push_returns_once_the_owning_primarys_replica_has_it(
    open_durable: Any, replicated_cluster: RedisServers
) -> None:
    queue = open_durable("wait_replicas=1&wait_timeout=5s")
    names = [f"q{n}" for n in range(4)]  # several slots, so several primaries
    jobs = [a_job(name) for name in names]

    await queue.push_many(jobs)

    assert "wait_replicas=1" in queue.describe()
    for name in names:
        stream = queue.keys.queue(name).stream
        assert await copies_on_replicas(replicated_cluster, stream) == 1, name
        got = await queue.reserve(name)
        assert [r.job.id for r in got] == [j.id for j in jobs if j.queue == name]


async def test_a_durable_push_short_of_replicas_names_its_node_and_is_queued_once(
    open_durable: Any,
) -> None:
    queue = open_durable("wait_replicas=2&wait_timeout=50ms")  # each primary has one
    job = a_job("default")

    with pytest.raises(NotReplicated) as raised:
        await queue.push(job)

    assert list(raised.value.job_ids) == [job.id]
    assert raised.value.confirmed == 1
    assert "127.0.0.1:" in str(raised.value), "the message names the primary"
    assert "Do not push them again" in str(raised.value)
    got = await queue.reserve("default", limit=5)
    assert [r.job.id for r in got] == [job.id], "queued once, on the primary"


async def test_the_report_on_a_cluster_warns_when_wait_replicas_exceeds_each_primarys(
    open_durable: Any,
) -> None:
    enough = await open_durable("wait_replicas=1").diagnose()
    too_many = await open_durable("wait_replicas=2").diagnose()

    assert not any("wait_replicas" in w for w in enough.warnings), enough.warnings
    assert any(
        "every primary (3)" in w and "wait_replicas is 2 but the primary has 1" in w
        for w in too_many.warnings
    ), too_many.warnings
