# SPDX-License-Identifier: MIT
"""The Redis driver on a cluster: pushes whose answer is lost, redirects, and `doctor`.

Every test runs on a real cluster of three primaries. The shared one
(started once per test process) serves the tests that leave it as it is;
those that move slots or reconfigure a node start a cluster of their own.

A push's answer is lost the way the single-server test loses it: a
`CuttingRelay` stands in front of the node that owns the queue's slot and
cuts the connection once the push went through it (or before). The test's
client reaches that node through the relay because its `address_remap`
turns the node's address into the relay's; every other node it reaches
directly. Nothing is mocked: the cluster, the relay and the cut are real.
"""

from __future__ import annotations

import asyncio
import subprocess
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from redis.asyncio import Redis
from redis.asyncio.cluster import ClusterNode, RedisCluster

from rainier_queue.drivers import open_queue
from rainier_queue.drivers.redis import RedisQueue
from rainier_queue.envelope import QueuedJob
from rainier_queue.errors import BrokerUnavailable, OutcomeUnknown
from rainier_queue.queue import Queue

from ..cutting_relay import CuttingRelay
from ..redis_servers import RedisServers, cluster, shared_cluster


def a_job(queue: str = "default") -> QueuedJob:
    return QueuedJob.create("note", {"text": uuid.uuid4().hex}, queue=queue)


def seeds_of(servers: RedisServers) -> str:
    return ",".join(f"127.0.0.1:{port}" for port in servers.ports)


@pytest.fixture
def prefix() -> str:
    return f"rq:c{uuid.uuid4().hex[:10]}:"


@pytest.fixture(scope="module")
def own_cluster() -> Iterator[RedisServers]:
    """A cluster for the tests that move slots or reconfigure a node."""
    servers = cluster()
    try:
        yield servers
    finally:
        servers.stop()


def open_cluster(servers: RedisServers, prefix: str, opened: list[Queue]) -> RedisQueue:
    queue = open_queue(f"redis-cluster://{seeds_of(servers)}/?prefix={prefix}")
    assert isinstance(queue, RedisQueue)
    opened.append(queue)
    return queue


async def owner_of(queue: RedisQueue, name: str) -> int:
    """The port of the primary that holds queue `name`'s slot, as `queue`'s client sees it."""
    await queue.size(name)  # the client has discovered the cluster
    client: Any = queue.client
    node = client.nodes_manager.get_node_from_slot(client.keyslot(queue.keys.queue(name).stream))
    return int(node.port)


class Relayed:
    """A queue on the cluster whose client reaches one node through a relay, until it cuts.

    The client asks `remap` for a node's address whenever it (re)discovers
    the cluster. Once the relay has cut, the node's own address is given
    out again: a client that resends the push after looking the cluster up
    afresh reaches the node directly, so a resend would show as a second job.
    """

    def __init__(self, servers: RedisServers, prefix: str, node_port: int) -> None:
        self.servers = servers
        self.prefix = prefix
        self.node_port = node_port
        self.current: CuttingRelay | None = None
        self.relay_port = 0

    def remap(self, address: tuple[str, int]) -> tuple[str, int]:
        host, port = address
        if port == self.node_port and self.current is not None and not self.current.cut:
            return host, self.relay_port
        return address

    async def relay(self, marker: bytes, *, deliver: bool) -> CuttingRelay:
        self.current = CuttingRelay(self.node_port, marker, deliver=deliver)
        self.relay_port = await self.current.start()
        return self.current

    def queue(self) -> RedisQueue:
        seed = next(port for port in self.servers.ports if port != self.node_port)
        client = RedisCluster(
            startup_nodes=[ClusterNode("127.0.0.1", seed)],
            decode_responses=True,
            address_remap=self.remap,
        )
        return RedisQueue(client, prefix=self.prefix, cluster=True)


async def push_by(how: str, queue: RedisQueue) -> None:
    if how == "push":
        await queue.push(a_job())
    elif how == "push_many":
        await queue.push_many([a_job(), a_job()])
    else:
        await queue.push_raw("default", a_job().to_json())


PUSHED = {"push": 1, "push_many": 2, "push_raw": 1}


@pytest.mark.parametrize(
    ("how", "deliver"),
    [("push", True), ("push", False), ("push_many", True), ("push_raw", True)],
    ids=["push-written", "push-not-written", "push_many-written", "push_raw-written"],
)
async def test_a_cluster_push_whose_answer_is_lost_says_its_outcome_is_unknown_and_is_not_resent(
    prefix: str, opened: list[Queue], how: str, deliver: bool
) -> None:
    servers = shared_cluster()
    direct = open_cluster(servers, prefix, opened)
    port = await owner_of(direct, "default")
    relayed = Relayed(servers, prefix, port)
    relay = await relayed.relay(b"XADD" if how == "push_raw" else b"EVALSHA", deliver=deliver)
    queue = relayed.queue()
    opened.append(queue)
    try:
        await push_by(how, queue)  # connected through the relay, script loaded
        assert await direct.size("default") == PUSHED[how]
        relay.armed = True

        with pytest.raises(OutcomeUnknown, match="unknown"):
            await push_by(how, queue)

        assert relay.cut
        # Written once if it reached the node, never twice: the client sent it once.
        assert await direct.size("default") == PUSHED[how] * (2 if deliver else 1)
    finally:
        await relay.close()


async def test_a_cluster_push_to_a_node_that_is_down_is_a_plain_outage_and_later_goes_through(
    prefix: str, opened: list[Queue]
) -> None:
    servers = shared_cluster()
    direct = open_cluster(servers, prefix, opened)
    port = await owner_of(direct, "default")
    relayed = Relayed(servers, prefix, port)
    relay = await relayed.relay(b"never sent", deliver=False)
    queue = relayed.queue()
    opened.append(queue)
    await queue.push(a_job())
    await relay.close()  # the node is unreachable: connections cut, nobody listening

    with pytest.raises(BrokerUnavailable) as raised:
        await queue.push(a_job())

    assert not isinstance(raised.value, OutcomeUnknown), "nothing was sent"
    back = await relayed.relay(b"never sent", deliver=False)  # reachable again, elsewhere
    try:
        await queue.push(a_job())  # the client looked the cluster up again
    finally:
        await back.close()
    assert await direct.size("default") == 2


def cluster_cli(port: int, *args: str) -> str:
    return subprocess.run(
        ["redis-cli", "-p", str(port), *args], capture_output=True, text=True, check=True
    ).stdout.strip()


def node_ids(servers: RedisServers) -> dict[int, str]:
    return {port: cluster_cli(port, "cluster", "myid") for port in servers.ports}


async def test_a_push_whose_slot_moved_follows_the_redirect_and_queues_the_job_once(
    own_cluster: RedisServers, prefix: str, opened: list[Queue]
) -> None:
    queue = open_cluster(own_cluster, prefix, opened)
    source = await owner_of(queue, "moving")
    target = next(port for port in own_cluster.ports if port != source)
    slot = str(queue.client.keyslot(queue.keys.queue("moving").stream))  # type: ignore[union-attr]
    ids = node_ids(own_cluster)
    # The slot is empty, so it can be handed over at once; the queue's client still
    # believes the source holds it.
    for port in [target, source, *own_cluster.ports]:
        cluster_cli(port, "cluster", "setslot", slot, "node", ids[target])

    await queue.push(a_job("moving"))

    fresh = open_cluster(own_cluster, prefix, opened)
    assert await owner_of(fresh, "moving") == target
    assert await fresh.size("moving") == 1
    assert await owner_of(queue, "moving") == target, "the client learnt the move"


class Migration:
    """Queue `name`'s slot marked as migrating from its owner to another primary."""

    def __init__(self, servers: RedisServers, slot: int, source: int) -> None:
        self.servers = servers
        self.slot = str(slot)
        self.source = source
        self.target = next(port for port in servers.ports if port != source)
        self.ids = node_ids(servers)

    def begin(self) -> None:
        cluster_cli(
            self.target, "cluster", "setslot", self.slot, "importing", self.ids[self.source]
        )
        cluster_cli(
            self.source, "cluster", "setslot", self.slot, "migrating", self.ids[self.target]
        )

    def finish(self) -> None:
        """Hand the slot to the target (it holds nothing on the source in these tests)."""
        for port in [self.target, self.source, *self.servers.ports]:
            cluster_cli(port, "cluster", "setslot", self.slot, "node", self.ids[self.target])


async def migration_of(queue: RedisQueue, servers: RedisServers, name: str) -> Migration:
    client: Any = queue.client
    slot = client.keyslot(queue.keys.queue(name).stream)
    return Migration(servers, slot, await owner_of(queue, name))


async def test_a_push_to_a_slot_being_migrated_is_asked_to_the_importing_node(
    own_cluster: RedisServers, prefix: str, opened: list[Queue]
) -> None:
    queue = open_cluster(own_cluster, prefix, opened)
    migration = await migration_of(queue, own_cluster, "asked")
    migration.begin()
    try:
        # The stream does not exist on the source, so it answers ASK (a raw push is
        # one command on one key, which the importing node takes behind ASKING).
        await queue.push_raw("asked", a_job("asked").to_json())
    finally:
        migration.finish()

    fresh = open_cluster(own_cluster, prefix, opened)
    assert await fresh.size("asked") == 1


async def test_a_push_during_a_migration_redis_cannot_run_yet_is_an_outage_safe_to_retry(
    own_cluster: RedisServers, prefix: str, opened: list[Queue]
) -> None:
    queue = open_cluster(own_cluster, prefix, opened)
    migration = await migration_of(queue, own_cluster, "migrating")
    migration.begin()
    try:
        # The push script touches two keys, neither of them on either node yet:
        # Redis answers TRYAGAIN until the migration ends, and runs nothing.
        with pytest.raises(BrokerUnavailable, match="being migrated") as raised:
            await queue.push(a_job("migrating"))
        assert not isinstance(raised.value, OutcomeUnknown)
    finally:
        migration.finish()

    await queue.push(a_job("migrating"))
    assert await queue.size("migrating") == 1


@pytest.fixture
async def evicting_node(own_cluster: RedisServers) -> AsyncIterator[int]:
    """One primary of the cluster set to `allkeys-lru`, the others left at `noeviction`."""
    port = own_cluster.ports[1]
    client = Redis(port=port)
    await client.config_set("maxmemory-policy", "allkeys-lru")
    try:
        yield port
    finally:
        await client.config_set("maxmemory-policy", "noeviction")
        await client.aclose()


async def test_the_report_on_a_cluster_checks_every_primary_and_names_the_evicting_one(
    own_cluster: RedisServers, evicting_node: int, prefix: str, opened: list[Queue]
) -> None:
    queue = open_cluster(own_cluster, prefix, opened)

    report = await queue.diagnose()

    assert sorted(report.nodes) == sorted(f"127.0.0.1:{port}" for port in own_cluster.ports)
    assert report.nodes[f"127.0.0.1:{evicting_node}"].maxmemory_policy == "allkeys-lru"
    evicting = [w for w in report.warnings if "allkeys-lru" in w]
    assert len(evicting) == 1
    assert f"127.0.0.1:{evicting_node}" in evicting[0]
    others = [p for p in own_cluster.ports if p != evicting_node]
    assert not any(f"127.0.0.1:{p}" in evicting[0] for p in others)
    assert report.maxmemory_policy is None, "the primaries disagree"


async def test_doctor_on_a_cluster_warns_about_the_one_evicting_node(
    own_cluster: RedisServers, evicting_node: int
) -> None:
    from ..cli.harness import APP, run

    url = f"redis-cluster://{seeds_of(own_cluster)}"
    result = await asyncio.to_thread(run, "--app", APP, "--url", url, "doctor")

    lines = [line for line in result.stdout.splitlines() if "allkeys-lru" in line]
    assert len(lines) == 1, result.output
    assert lines[0].lstrip().startswith("warn"), result.output
    assert f"127.0.0.1:{evicting_node}" in lines[0], result.output
    assert "3 primaries" in result.stdout, result.output
