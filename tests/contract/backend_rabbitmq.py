# SPDX-License-Identifier: MIT
"""RabbitMQ in the contract suite: the machine's server, a queue prefix per namespace.

A push never declares a queue, so the namespace's queues (one per queue
name the suite uses, each with its delay tiers, and the failed queue) are
declared when its URL is first asked for, by the driver's own provisioning,
as `rainier-queue provision` declares them, and deleted after the test.
One short tier (250ms) keeps that to two quorum queues per queue
name; a delay goes round them as often as it needs (queue.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import aio_pika

from rainier_queue.connections import open_queue
from rainier_queue.drivers.rabbitmq.names import failed_exchange, work_queue
from rainier_queue.drivers.rabbitmq.topology import Topology
from rainier_queue.queue import Provisionable

from ..foreign.planting import envelope_bodies
from ..services import require_port
from .backend_kafka import QUEUES, in_a_thread
from .backends import SECRET, Backend, Cut, closed_port

HOST = "127.0.0.1:5672"
DELAYS = "250ms"

_provisioned: set[tuple[str, str]] = set()


def _query(namespace: str) -> str:
    return f"prefix={namespace}.&delays={DELAYS}"


def prepare(tmp: Path, namespace: str, queues: Sequence[str]) -> None:
    """Declare these queues (work queue, tiers, failed queue) in the namespace."""
    wanted = [q for q in queues if (namespace, q) not in _provisioned]
    if not wanted:
        return

    async def provision() -> None:
        queue = open_queue(f"amqp://guest:guest@{HOST}/?{_query(namespace)}")
        assert isinstance(queue, Provisionable)
        try:
            await queue.provision(wanted)
        finally:
            await queue.aclose()

    _provisioned.update((namespace, q) for q in wanted)  # cleaned up even if it fails halfway
    in_a_thread(provision)


def url(tmp: Path, namespace: str) -> str:
    prepare(tmp, namespace, QUEUES)
    return f"amqp://guest:guest@{HOST}/?{_query(namespace)}"


def secret_url(tmp: Path, namespace: str) -> str:
    prepare(tmp, namespace, QUEUES)
    return f"amqp://app:{SECRET}@{HOST}/?{_query(namespace)}"


def unreachable_url(tmp: Path, namespace: str) -> str:
    return f"amqp://guest:guest@127.0.0.1:{closed_port()}/?{_query(namespace)}"


def check() -> None:
    require_port("RabbitMQ", 5672)


async def cleanup(tmp: Path, namespace: str) -> None:
    """Delete every queue the namespace declared, and its dead-letter exchange."""
    made = [q for ns, q in _provisioned if ns == namespace]
    if not made:
        return
    queue = open_queue(url(tmp, namespace))
    topology = getattr(queue, "_topology")  # noqa: B009 - the driver's own list of names
    assert isinstance(topology, Topology)
    connection = await aio_pika.connect(f"amqp://guest:guest@{HOST}/")
    try:
        channel = await (await connection.channel()).get_underlay_channel()
        for _, name, _ in topology.wanted(made):
            await channel.queue_delete(name)
        await channel.exchange_delete(failed_exchange(f"{namespace}."))
    finally:
        await connection.close()
        await queue.aclose()
    _provisioned.difference_update((namespace, q) for q in made)


async def _publish(
    tmp: Path, namespace: str, queue: str, entries: Sequence[tuple[str, Any]]
) -> None:
    """Publish each body to the work queue, as a producer in another language would."""
    connection = await aio_pika.connect(f"amqp://guest:guest@{HOST}/")
    try:
        channel = await (await connection.channel()).get_underlay_channel()
        for _, body in entries:
            data = body.encode() if isinstance(body, str) else bytes(body or b"")
            await channel.basic_publish(data, routing_key=work_queue(f"{namespace}.", queue))
    finally:
        await connection.close()


def _relayed(tmp: Path, namespace: str, port: int) -> str:
    prepare(tmp, namespace, QUEUES)
    return f"amqp://guest:guest@127.0.0.1:{port}/?{_query(namespace)}"


BACKEND = Backend(
    name="rabbitmq",
    url=url,
    check=check,
    cleanup=cleanup,
    prepare=prepare,
    secret_url=secret_url,
    unreachable_url=unreachable_url,
    cut=Cut(
        5672,
        _relayed,
        [(1, b"\x00\x3c\x00\x28")],  # Basic.Publish: class 60, method 40
    ),
    plant=envelope_bodies(_publish),
    lacks={
        "private_server": (
            "RabbitMQ is an Erlang node that takes seconds and a few hundred MB to start, too "
            "heavy for one per test on CI; the machine's server is stopped and started under "
            "running workers by tests/faults/test_rabbitmq_restart.py instead"
        ),
        "tls": (
            "the machine's RabbitMQ has no TLS listener, and a private node to give it one is "
            "as heavy as above; `amqps://` and its options are read in "
            "tests/drivers/test_rabbitmq_settings.py"
        ),
    },
)
