# SPDX-License-Identifier: MIT
"""RabbitMQ in the contract suite: the machine's server, a queue prefix per namespace.

A push never declares a queue, so the namespace's queues (one per queue
name the suite uses, each with its delay tiers, and the failed queue) are
declared when its URL is first asked for, by the driver's own provisioning,
as `rainier-queue provision` declares them, and deleted after the test.
One short tier (250ms) keeps that to two quorum queues per queue
name; a delay goes round them as often as it needs (queue.py).

Quorum queues are costly on this machine's server (a file handle each, out
of 1,024: a few hundred left behind wedge it for every test process), so a
namespace a test provisioned and did not clean up (a test that asks only for
a URL) is deleted when the test process ends (`_sweep`).
"""

from __future__ import annotations

import atexit
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import aio_pika

from rainier_queue.connections import open_queue
from rainier_queue.drivers.rabbitmq.names import failed_exchange, work_queue
from rainier_queue.drivers.rabbitmq.topology import Topology
from rainier_queue.queue import Provisionable

from ..foreign.planting import envelope_bodies
from ..rabbitmq_server import RabbitMQServer
from ..services import require_port
from ..tls_certs import Certs
from .backend_kafka import QUEUES, in_a_thread
from .backends import SECRET, TLS, Backend, Cut, Listen, batch_locks, closed_port
from .raw_storage import rabbitmq_raw

HOST = "127.0.0.1:5672"
DELAYS = "250ms"

_provisioned: set[tuple[str, str]] = set()
"""(namespace, queue) pairs provisioned on the shared server, to delete after the test."""
PROVISIONED_BY_TESTS = ("never-provisioned", "provisioned-here")
"""Queue names the capability tests provision through the driver itself: deleted too."""


def _query(namespace: str) -> str:
    return f"prefix={namespace}.&delays={DELAYS}"


def _provision(server: str, namespace: str, queues: Sequence[str]) -> None:
    async def provision() -> None:
        queue = open_queue(f"amqp://guest:guest@{server}/?{_query(namespace)}")
        assert isinstance(queue, Provisionable)
        try:
            await queue.provision(queues)
        finally:
            await queue.aclose()

    in_a_thread(provision)


def prepare(tmp: Path, namespace: str, queues: Sequence[str]) -> None:
    """Declare these queues (work queue, tiers, failed queue) in the namespace."""
    wanted = [q for q in queues if (namespace, q) not in _provisioned]
    if wanted:
        _provisioned.update((namespace, q) for q in wanted)  # cleaned up even if it fails
        _provision(HOST, namespace, wanted)


def url(tmp: Path, namespace: str) -> str:
    """The namespace's URL, with a lock store in `tmp` to count batches in."""
    prepare(tmp, namespace, QUEUES)
    return f"amqp://guest:guest@{HOST}/?{_query(namespace)}{batch_locks(tmp)}"


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
    made += PROVISIONED_BY_TESTS
    queue = open_queue(f"amqp://guest:guest@{HOST}/?{_query(namespace)}")
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


@atexit.register
def _sweep() -> None:
    """Delete what every namespace still provisioned declared, as the process ends."""
    left = sorted({namespace for namespace, _ in _provisioned})
    if not left:
        return

    async def sweep() -> None:
        for namespace in left:
            await cleanup(Path(), namespace)

    try:
        in_a_thread(sweep)
    except Exception as exc:  # the server is gone; nothing to leak on it then
        print(f"could not delete the RabbitMQ queues of {left}: {exc}")


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


class _Private:
    """A RabbitMQ node of the test's own (tests/rabbitmq_server.py), removed with its queues."""

    outage = "RabbitMQ is unreachable"

    def __init__(self, folder: Path, listen: Listen | None) -> None:
        self.server = RabbitMQServer(
            folder / "rabbitmq", host="0.0.0.0" if listen is not None else "127.0.0.1"
        )
        self.host = listen.host if listen is not None else "127.0.0.1"
        self.server.start()

    def url(self, tmp: Path, namespace: str) -> str:
        _provision(f"127.0.0.1:{self.server.port}", namespace, ["default"])
        return f"amqp://guest:guest@{self.host}:{self.server.port}/?{_query(namespace)}"

    def crash(self) -> None:
        self.server.crash()

    def stop(self) -> None:
        self.server.stop()

    def start(self) -> None:
        self.server.start()

    def remove(self) -> None:
        self.server.remove()


class _TLSServer:
    """A private node that speaks TLS (and plain AMQP, through which its queues are
    provisioned), with a certificate for `localhost` alone."""

    def __init__(self, certs: Certs, folder: Path) -> None:
        self.server = RabbitMQServer(folder / "rabbitmq", tls=(certs.cert, certs.key))
        self.server.start()
        self.port = self.server.tls_port

    def url(self, host: str, namespace: str, query: str) -> str:
        _provision(f"127.0.0.1:{self.server.port}", namespace, ["default"])
        return f"amqps://guest:guest@{host}:{self.port}/?{_query(namespace)}&{query}"

    def stop(self) -> None:
        self.server.remove()


def _plain_url(namespace: str) -> str:
    """The shared server, which speaks no TLS, dialled with `amqps://`."""
    prepare(Path(), namespace, QUEUES)
    return f"amqps://guest:guest@{HOST}/?{_query(namespace)}"


TLS_RULES = TLS(
    server=_TLSServer,
    trusting=lambda ca: f"ssl_ca_certs={ca}",
    checked="",  # amqps:// asks for TLS, checked against the system's authorities alone
    insecure="insecure_skip_verify=true",
    weakenings=(),  # no option turns a check off but insecure_skip_verify itself
    plain_url=_plain_url,
)


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
    raw=rabbitmq_raw,
    plant=envelope_bodies(_publish),
    private_server=lambda folder, listen: _Private(folder, listen),
    tls=TLS_RULES,
    crash_forgets=(
        5.0,
        "a job finished just before RabbitMQ is SIGKILLed may run again: an acknowledgement"
        " the broker has taken is not known to be on disk (a quorum queue applies it once its"
        " log is synced), and AMQP cannot acknowledge on a new channel, so a job whose"
        " acknowledgement died with the connection comes back; its own worker settles it"
        " unrun (settles.py), another worker runs it. Both touch only acknowledgements of the"
        " last moments, sent within milliseconds of a job's end; 5 s is an allowance for a"
        " loaded machine, not a measured bound. A clean stop forgets nothing (the idle-worker"
        " restart test)",
    ),
    lacks={
        "lock_store": (
            "there is no RabbitMQ lock store (cache/stores.py): schedules and locks use "
            "another server's"
        ),
    },
)
