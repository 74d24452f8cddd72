# SPDX-License-Identifier: MIT
"""SQS in the contract suite: moto in server mode, a queue-name prefix per namespace.

Two backends share this file's making: `sqs` (standard queues) and
`sqs_fifo` (backend_sqs_fifo.py, FIFO queues), so xdist spreads their load.
The moto server is this test process's own (tests/moto_server.py). A push
never creates a queue, so the namespace's queues (every name the suite
uses, each a work and a failed queue) are made when its URL is first asked
for, by the driver's own provisioning, and deleted after the test.

The URL carries everything (endpoint, credentials, region, prefix, and a
1 s long poll, so a stopping worker does not wait out SQS's 20 s), so a
CLI worker in another process reaches the same queues from the URL alone.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from aiobotocore.session import get_session
from botocore.loaders import Loader, create_loader

from rainier_queue.connections import open_queue
from rainier_queue.queue import Provisionable

from ..foreign.planting import envelope_bodies
from ..moto_server import KEY, PORT, REGION, MotoServer, Outage, free_port, shared
from ..tls_certs import Certs
from .backend_kafka import QUEUES, in_a_thread
from .backends import SECRET, TLS, Backend, Cut, Listen, Plant, batch_locks, closed_port

_provisioned: set[tuple[int, str, str]] = set()
PROVISIONED_BY_TESTS = ("never-provisioned", "provisioned-here")


def _query(namespace: str, fifo: bool, *, https: bool = False) -> str:
    plain = "" if https else "&tls=false"
    return f"region={REGION}{plain}&prefix={namespace}-&wait=1s" + ("&fifo=true" if fifo else "")


def _url(
    port: int,
    namespace: str,
    fifo: bool,
    *,
    host: str = "127.0.0.1",
    user: str = "",
    extra: str = "",
    https: bool = False,
) -> str:
    who = user or f"{KEY}:{KEY}"
    return f"sqs://{who}@{host}:{port}/?{_query(namespace, fifo, https=https)}{extra}"


def _provision(
    port: int, namespace: str, queues: Sequence[str], fifo: bool, *, url: str | None = None
) -> None:
    """Make the namespace's queues on the server at `port` (reached by `url`, given one)."""
    wanted = [q for q in queues if (port, namespace, q) not in _provisioned]
    if not wanted:
        return

    async def provision() -> None:
        queue = open_queue(url or _url(port, namespace, fifo))
        assert isinstance(queue, Provisionable)
        try:
            await queue.provision(wanted)
        finally:
            await queue.aclose()

    in_a_thread(provision)
    _provisioned.update((port, namespace, q) for q in wanted)


@functools.cache
def _models() -> Loader:
    """One loader of botocore's models for the tests' own clients: a fresh one parses the
    SQS model again, some 50 ms of CPU a client."""
    return create_loader()


async def _client_do(port: int, work: Any) -> None:
    session = get_session()
    session.register_component("data_loader", _models())
    async with session.create_client(
        "sqs",
        region_name=REGION,
        endpoint_url=f"http://127.0.0.1:{port}",
        aws_access_key_id=KEY,
        aws_secret_access_key=KEY,
    ) as client:
        await work(client)


async def _delete_namespace(port: int, namespace: str) -> None:
    async def delete(client: Any) -> None:
        answer = await client.list_queues(QueueNamePrefix=f"{namespace}-", MaxResults=1000)
        urls = answer.get("QueueUrls", [])
        await asyncio.gather(*(client.delete_queue(QueueUrl=url) for url in urls))

    await _client_do(port, delete)
    for key in [k for k in _provisioned if k[:2] == (port, namespace)]:
        _provisioned.discard(key)


class _Private:
    """A moto server of the test's own behind a relay that the test may cut off (an outage)."""

    outage = "SQS is unreachable"

    def __init__(self, folder: Path, listen: Listen | None, fifo: bool) -> None:
        self.fifo = fifo
        self.outage_server = Outage(host="0.0.0.0" if listen is not None else "127.0.0.1")
        self.host = listen.host if listen is not None else "127.0.0.1"
        self.extra = "&timeout=5s" if listen is not None else ""

    def url(self, tmp: Path, namespace: str) -> str:
        _provision(self.outage_server.target, namespace, ["default"], self.fifo)
        # Behind a network partition (`listen` given), a call's answer is awaited 5 s, not
        # 30 (plus the long poll), so a network gone silent is an outage the worker sees and
        # rides out rather than a hang that outlasts the cut. A crash closes connections,
        # which the default sees at once; there a short timeout would only fail in-flight
        # acknowledgements that a longer wait lets land inside their leases.
        return _url(self.outage_server.port, namespace, self.fifo, host=self.host, extra=self.extra)

    def crash(self) -> None:
        self.outage_server.crash()

    def stop(self) -> None:
        self.outage_server.stop()

    def start(self) -> None:
        self.outage_server.start()

    def remove(self) -> None:
        self.outage_server.remove()


class _TLSServer:
    """A moto server of the test's own that speaks HTTPS alone (moto's `--ssl-cert`), its
    queues provisioned over HTTPS checked against the authority that signed its certificate."""

    def __init__(self, certs: Certs, folder: Path, fifo: bool) -> None:
        self.port = free_port()
        self.server = MotoServer(self.port, cert=certs.cert, key=certs.key)
        self.ca = certs.ca
        self.fifo = fifo

    def url(self, host: str, namespace: str, query: str) -> str:
        trusted = _url(
            self.port,
            namespace,
            self.fifo,
            host="localhost",  # the name its certificate holds
            https=True,
            extra=f"&tls_ca={self.ca}",
        )
        _provision(self.port, namespace, ["default"], self.fifo, url=trusted)
        return _url(self.port, namespace, self.fifo, host=host, https=True, extra=f"&{query}")

    def stop(self) -> None:
        self.server.stop()


def _tls_rules(fifo: bool) -> TLS:
    def plain_url(namespace: str) -> str:
        """The shared server, which speaks plain HTTP, its queues made, dialled with HTTPS."""
        port = shared()
        _provision(port, namespace, ["default"], fifo)
        return _url(port, namespace, fifo, https=True)

    return TLS(
        server=lambda certs, folder: _TLSServer(certs, folder, fifo),
        trusting=lambda ca: f"tls_ca={ca}",
        checked="tls=true",  # botocore's authorities alone, which never signed the tests' own
        insecure="insecure_skip_verify=true",
        weakenings=(),  # no option turns a check off but insecure_skip_verify itself
        plain_url=plain_url,
    )


def _unicode_only(plant: Plant) -> Plant:
    """The catalog's bodies less the one that is not UTF-8: an SQS message body is Unicode
    text, so no producer can leave such a body on a queue (SQS refuses it at the send)."""
    bad = {name: entry for name, entry in plant.bad.items() if not isinstance(entry[0], bytes)}
    return dataclasses.replace(plant, bad=bad)


def make_backend(name: str, *, fifo: bool) -> Backend:
    def url(tmp: Path, namespace: str) -> str:
        """The namespace's URL, with a lock store in `tmp` to count batches in."""
        port = shared()
        _provision(port, namespace, QUEUES, fifo)
        return _url(port, namespace, fifo, extra=batch_locks(tmp))

    def prepare(tmp: Path, namespace: str, queues: Sequence[str]) -> None:
        _provision(shared(), namespace, queues, fifo)

    async def cleanup(tmp: Path, namespace: str) -> None:
        await _delete_namespace(shared(), namespace)

    async def publish(
        tmp: Path, namespace: str, queue: str, entries: Sequence[tuple[str, Any]]
    ) -> None:
        """Send each body to the work queue, as a producer in another language would."""
        from rainier_queue.drivers.sqs.names import Names

        sqs_name = Names(f"{namespace}-", fifo=fifo, urls={}).work(queue)

        async def send(client: Any) -> None:
            found = await client.get_queue_url(QueueName=sqs_name)
            for index, (_, body) in enumerate(entries):
                text = body.decode("utf-8", "replace") if isinstance(body, bytes) else str(body)
                args: dict[str, Any] = {"QueueUrl": found["QueueUrl"], "MessageBody": text}
                if fifo:
                    args["MessageGroupId"] = f"planted-{index}"
                    args["MessageDeduplicationId"] = f"planted-{namespace}-{index}"
                await client.send_message(**args)

        await _client_do(shared(), send)

    async def raw(tmp: Path, namespace: str, queue: str) -> list[bytes]:
        """Every message body on the queue's work queue and the connection's failed queue,
        received by another client and made visible again at once (each receive counts in
        its `ApproximateReceiveCount`: read only at the end of a test)."""
        from rainier_queue.drivers.sqs.names import Names

        names = Names(f"{namespace}-", fifo=fifo, urls={})
        found: list[bytes] = []

        async def read(client: Any) -> None:
            for sqs_name in (names.work(queue), names.failed()):
                url = (await client.get_queue_url(QueueName=sqs_name))["QueueUrl"]
                handles: list[str] = []
                while True:
                    answer = await client.receive_message(
                        QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=60
                    )
                    messages = answer.get("Messages", [])
                    if not messages:
                        break
                    for message in messages:
                        found.append(message["Body"].encode())
                        handles.append(message["ReceiptHandle"])
                for handle in handles:
                    await client.change_message_visibility(
                        QueueUrl=url, ReceiptHandle=handle, VisibilityTimeout=0
                    )

        await _client_do(shared(), read)
        return found

    def relayed(tmp: Path, namespace: str, port: int) -> str:
        _provision(shared(), namespace, QUEUES, fifo)
        return _url(port, namespace, fifo)

    def secret_url(tmp: Path, namespace: str) -> str:
        port = shared()
        _provision(port, namespace, QUEUES, fifo)
        return _url(port, namespace, fifo, user=f"app:{SECRET}")

    def check() -> None:
        shared()  # moto runs inside the test process: it is there whenever the tests are

    return Backend(
        name=name,
        url=url,
        check=check,
        cleanup=cleanup,
        prepare=prepare,
        secret_url=secret_url,
        unreachable_url=lambda tmp, ns: _url(closed_port(), ns, fifo),
        cut=Cut(
            PORT,  # this process's moto server, started by the URL's provisioning first
            relayed,
            [(1, b'"Entries":'), (3, b'"Entries":')],
        ),
        private_server=lambda folder, listen: _Private(folder, listen, fifo),
        plant=_unicode_only(envelope_bodies(publish)),
        raw=raw,
        tls=_tls_rules(fifo),
        dispatches=50,  # moto answers tens of requests a second here: 400 pushes, not 4,000
        # moto walks a queue's messages on every call, so a drain's cost grows with the
        # square of its backlog: 20,000 jobs took 220 s on standard queues and 276 s on FIFO
        # ones in one run. The standard queues carry the 20,000 through 4 processes; the
        # FIFO ones, whose worker path differs only in the send's group and dedup ids, 5,000.
        backlog=(5_000, 4) if fifo else (20_000, 4),
        model_examples=8,  # each example's namespace is fifteen queues made and deleted
        lacks={
            **(
                {
                    "dedup_outlives_delete": (
                        "moto's, not SQS's: moto drops a message sent again under a"
                        " deduplication id only while the first copy still waits on the queue"
                        " (its add_message compares with the messages it holds), where SQS"
                        " drops it for 5 minutes whether or not the first was received and"
                        " deleted; so whether a finisher's rerun queues its callback again"
                        " here depends on which ran first. tests/drivers/test_sqs_batches.py"
                        " shows the drop while the first copy waits"
                    ),
                    "ordered_retries": ORDERED_RETRIES,
                    "ordering_across_queues": ACROSS,
                }
                if fifo
                else {}
            ),
            "lock_store": (
                "there is no SQS lock store (cache/stores.py): schedules and locks use "
                "another server's"
            ),
        },
    )


ORDERED_RETRIES = (
    "a retry with a backoff is sent again (a send and a delete: SQS cannot delay a message in"
    " flight on a FIFO queue and keep its place), so it joins the back of its message group"
    " and the later jobs of its key run before it (docs/flow-control.md)"
)
ACROSS = (
    "each queue is a FIFO queue of its own, and SQS keeps a message group's order within one"
    " queue: a key's jobs on two queues are two lines (docs/flow-control.md)"
)

BACKEND = make_backend("sqs", fifo=False)
