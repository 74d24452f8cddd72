# SPDX-License-Identifier: MIT
"""NATS JetStream in the contract suite: the server on 4222, a stream prefix per namespace.

A push never makes a stream or a consumer, so the namespace's stream and the
consumers of every queue name the suite uses are made when its URL is first
asked for, by the driver's own provisioning, as `rainier-queue provision`
makes them. A queue opened with another lease brings its consumer's ack
wait to that lease when it first reserves (queue.py, `_adopt_lease`).
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import nats

from rainier_queue.connections import open_queue
from rainier_queue.drivers.nats.names import Names
from rainier_queue.queue import Provisionable

from ..foreign.planting import envelope_bodies
from ..nats_server import NATSServer, with_tls
from ..services import require_port
from ..tls_certs import Certs
from .backend_kafka import QUEUES, in_a_thread
from .backends import SECRET, TLS, Backend, Cut, Listen, closed_port
from .raw_storage import nats_raw

SERVER = "nats://127.0.0.1:4222"

_provisioned: set[tuple[str, str, str]] = set()


def _provision(server: str, namespace: str, queues: Sequence[str], query: str = "") -> None:
    wanted = [q for q in queues if (server, namespace, q) not in _provisioned]
    if not wanted:
        return

    async def provision() -> None:
        queue = open_queue(f"{server}/?prefix={namespace}{query}")
        assert isinstance(queue, Provisionable)
        try:
            await queue.provision(wanted)
        finally:
            await queue.aclose()

    in_a_thread(provision)
    _provisioned.update((server, namespace, q) for q in wanted)


def prepare(tmp: Path, namespace: str, queues: Sequence[str]) -> None:
    _provision(SERVER, namespace, queues)


def url(tmp: Path, namespace: str) -> str:
    prepare(tmp, namespace, QUEUES)
    return f"{SERVER}/?prefix={namespace}"


def _provided(tmp: Path, namespace: str, server: str) -> str:
    """The namespace's URL on `server` (a relay, a password), its queues provisioned first."""
    prepare(tmp, namespace, QUEUES)
    return f"{server}/?prefix={namespace}"


def check() -> None:
    require_port("NATS", 4222)


async def cleanup(tmp: Path, namespace: str) -> None:
    client = await nats.connect(SERVER)
    try:
        js = client.jetstream()
        names = Names(namespace)
        for stream in (
            names.stream,
            names.failed_stream,
            f"KV_{namespace}-paused",
            f"KV_{namespace}-records",
            f"KV_{namespace}-batches",
        ):
            try:
                await js.delete_stream(stream)
            except Exception:
                continue
    finally:
        await client.close()


async def _publish(
    tmp: Path, namespace: str, queue: str, entries: Sequence[tuple[str, Any]]
) -> None:
    """Publish each body on the queue's subject, as a producer in another language would."""
    client = await nats.connect(SERVER)
    try:
        js = client.jetstream()
        for _, body in entries:
            data = body.encode() if isinstance(body, str) else bytes(body)
            await js.publish(Names(namespace).jobs(queue), data)
    finally:
        await client.close()


class _Private:
    outage = "NATS is unreachable"

    def __init__(self, folder: Path, listen: Listen | None) -> None:
        self.server = NATSServer(
            Path(tempfile.mkdtemp(prefix="rq-nats-", dir=folder)),
            host="0.0.0.0" if listen is not None else "127.0.0.1",
        )
        self.host = listen.host if listen is not None else "127.0.0.1"
        self.server.start()

    def url(self, tmp: Path, namespace: str) -> str:
        server = f"nats://{self.host}:{self.server.port}"
        _provision(server, namespace, ["default"])
        return f"{server}/?prefix={namespace}"

    def crash(self) -> None:
        self.server.crash()

    def stop(self) -> None:
        self.server.stop()

    def start(self) -> None:
        self.server.start()

    def remove(self) -> None:
        self.server.remove()


class _TLSServer:
    """A private nats-server with JetStream that speaks TLS alone, its queues provisioned
    over TLS by the authority that signed its certificate."""

    def __init__(self, certs: Certs, folder: Path) -> None:
        self.server = with_tls(folder, certs.cert, certs.key)
        self.port = self.server.port
        self.ca = certs.ca

    def url(self, host: str, namespace: str, query: str) -> str:
        trusted = f"&tls=true&tls_ca={self.ca}"  # by the name its certificate holds
        _provision(f"nats://localhost:{self.port}", namespace, ["default"], trusted)
        return f"nats://{host}:{self.port}/?prefix={namespace}&{query}"

    def stop(self) -> None:
        self.server.remove()


TLS_RULES = TLS(
    server=_TLSServer,
    trusting=lambda ca: f"tls=true&tls_ca={ca}",
    checked="tls=true",  # the system's authorities alone, which never signed the tests' own
    insecure="tls=true&insecure_skip_verify=true",
    weakenings=(),  # no option turns a check off but insecure_skip_verify itself
    plain_url=lambda ns: f"{url(Path(), ns)}&tls=true",  # provisioned: a push would land
)

BACKEND = Backend(
    name="nats",
    url=url,
    check=check,
    cleanup=cleanup,
    prepare=prepare,
    secret_url=lambda tmp, ns: _provided(tmp, ns, f"nats://app:{SECRET}@127.0.0.1:4222"),
    unreachable_url=lambda tmp, ns: f"nats://127.0.0.1:{closed_port()}/?prefix={ns}",
    cut=Cut(
        4222,
        lambda tmp, ns, port: _provided(tmp, ns, f"nats://127.0.0.1:{port}"),
        [(1, b".jobs.default "), (3, b".jobs.default ")],
    ),
    private_server=lambda folder, listen: _Private(folder, listen),
    raw=nats_raw,
    plant=envelope_bodies(_publish),
    known_failures={
        "test_a_push_whose_answer_is_lost_says_its_outcome_is_unknown": (
            "the push is OutcomeUnknown as it should be, but nats-py 2.16 leaks a socket:"
            " when a reconnect attempt connects and then fails its CONNECT handshake (the"
            " cut relay), `Client._attempt_reconnect` retries on the same TcpTransport,"
            " whose `connect` replaces the StreamWriter without closing the old one, and"
            " the suite turns that ResourceWarning into an error"
        ),
    },
    tls=TLS_RULES,
    crash_forgets=(
        10.0,
        "a NATS 2.9.10 server writes the removal of acknowledged messages from the middle"
        " of a work-queue stream to disk seconds after it answers the ack, so SIGKILLed it"
        " hands those jobs out again (bench.studies.nats_crash_acks: acks 4 s old forgotten,"
        " 6 s old kept; 10 s leaves room for a loaded machine); a clean stop forgets nothing"
        " (the idle-worker restart test)",
    ),
    lacks={
        "lock_store": (
            "there is no NATS lock store (cache/stores.py): schedules and locks use another"
            " server's, as with Kafka"
        ),
    },
)
