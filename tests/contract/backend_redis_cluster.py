# SPDX-License-Identifier: MIT
"""The contract suite on a three-node Redis cluster this test process starts."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..foreign.planting import envelope_bodies
from ..redis_servers import shared_cluster
from .backend_redis import stream_key
from .backends import SECRET, Backend, closed_port
from .raw_storage import redis_keys_raw


def _seeds() -> str:
    return ",".join(f"127.0.0.1:{port}" for port in shared_cluster().ports)


def url(tmp: Path, namespace: str) -> str:
    return f"redis-cluster://{_seeds()}/?prefix=rq:{namespace}:"


def check() -> None:
    shared_cluster()


async def cleanup(tmp: Path, namespace: str) -> None:
    from redis.asyncio.cluster import ClusterNode, RedisCluster

    nodes = [ClusterNode("127.0.0.1", port) for port in shared_cluster().ports]
    client = RedisCluster(startup_nodes=nodes)
    try:
        keys = [key async for key in client.scan_iter(match=f"rq:{namespace}:*", count=1000)]
        for key in keys:
            await client.delete(key)
    finally:
        await client.aclose()


async def _add(tmp: Path, namespace: str, queue: str, entries: Sequence[tuple[str, Any]]) -> None:
    """`XADD` each body to the queue's stream, on the node that holds its slot."""
    from redis.asyncio.cluster import ClusterNode, RedisCluster

    nodes = [ClusterNode("127.0.0.1", port) for port in shared_cluster().ports]
    client = RedisCluster(startup_nodes=nodes)
    try:
        for _, body in entries:
            await client.xadd(stream_key(f"rq:{namespace}:", queue), {"body": body})
    finally:
        await client.aclose()


async def _raw(tmp: Path, namespace: str, queue: str) -> list[bytes]:
    """Every value under the namespace's keys, on whichever node holds each."""
    from redis.asyncio.cluster import ClusterNode, RedisCluster

    nodes = [ClusterNode("127.0.0.1", port) for port in shared_cluster().ports]
    client = RedisCluster(startup_nodes=nodes)
    try:
        return await redis_keys_raw(client, namespace)
    finally:
        await client.aclose()


BACKEND = Backend(
    name="redis-cluster",
    url=url,
    check=check,
    cleanup=cleanup,
    secret_url=lambda tmp, ns: f"redis-cluster://app:{SECRET}@{_seeds()}/?prefix=rq:{ns}:",
    unreachable_url=lambda tmp, ns: f"redis-cluster://127.0.0.1:{closed_port()}/?prefix=rq:{ns}:",
    plant=envelope_bodies(_add),
    raw=_raw,
    lacks={
        "ordering_across_queues": (
            "a key's line is kept beside its queue's stream, in the queue's hash slot, so one"
            " script moves it with the settle: the same key on two queues is two lines"
            " (docs/flow-control.md)"
        ),
        "cut": (
            "a cluster client reaches each node at the address the cluster announces, not"
            " through one relay in the URL; tests/drivers/test_redis_cluster.py cuts a node's"
            " answer through an address remap"
        ),
        "private_server": (
            "restarting a cluster means restarting and re-forming its nodes; the driver is the"
            " redis driver, whose restart the redis backend rides out"
        ),
        "tls": (
            "a cluster over TLS is three nodes started with certificates and re-formed; its"
            " connections and their TLS rules are the redis driver's (drivers/redis/connection.py),"
            " which the redis backend holds to them"
        ),
        "backlog": (
            "the same driver code as redis: 20,000 jobs again on a cluster cost minutes of"
            " the suite's time and test nothing the redis run does not"
        ),
    },
)
