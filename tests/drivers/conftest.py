# SPDX-License-Identifier: MIT
"""The Kafka driver tests' broker, topics and queues, and the helpers they share.

The test_kafka_*.py files that need a broker run against Tansu (see
tests/kafka_broker.py), each test on topics of its own under a fresh prefix,
with a memory lock store vouched for as shared, because everything here runs
in one process. The fixtures live here, where pytest hands them to every one
of those files (imported into a test module, a fixture would read to ruff as
an unused import that the test's argument redefines); the helpers are
imported from here, as tests/contract does. A fixture is set up only when a
test asks for it, so the other drivers' tests in this directory never start
a broker, and test_kafka_retention.py keeps a broker of its own.

`rabbit` is the RabbitMQ files' queue, on a namespace of its own made and
removed through the contract suite's backend. `opened` is every driver's:
the queues a test opened, closed after it (the Redis files use it;
test_postgres_queue.py has an `opened` of its own).
`sql_opener` opens queues on each SQL database in turn (SQLite, PostgreSQL, MySQL), all
under one fresh table prefix, and drops those tables after the test; `migrations_up_to`
stands in an older release's schema for the upgrade tests.
`certs` is the TLS files' authority and server certificate, one set per
test module (tests/tls_certs.py).
"""

from __future__ import annotations

import contextlib
import tempfile
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition

from rainier_queue.cache import LockManager
from rainier_queue.cache.memory import MemoryCache
from rainier_queue.connections import open_queue
from rainier_queue.drivers.database import DatabaseQueue
from rainier_queue.drivers.database import schema as schema_module
from rainier_queue.drivers.database.mysql import MySQLQueue
from rainier_queue.drivers.database.postgres import PostgresQueue
from rainier_queue.drivers.database.sqlite import SQLiteQueue
from rainier_queue.drivers.kafka import KafkaQueue
from rainier_queue.drivers.kafka.names import failed_topic_name, topic_name
from rainier_queue.drivers.kafka.settings import KafkaSettings
from rainier_queue.drivers.rabbitmq import RabbitMQQueue
from rainier_queue.drivers.sqs import SQSQueue
from rainier_queue.envelope import QueuedJob
from rainier_queue.queue import Queue

from .. import mysql_service
from ..contract.backends import BACKENDS
from ..kafka_broker import KafkaBroker, broker
from ..moto_server import KEY, REGION, delete_queues, shared
from ..postgres import PG_URL, drop_prefixed, require_postgres
from ..tls_certs import Certs, make_certs

SHORT = timedelta(milliseconds=300)


def a_job(queue: str = "default", **kwargs: Any) -> QueuedJob:
    return QueuedJob.create("note", {"text": uuid.uuid4().hex}, queue=queue, **kwargs)


def shared_locks(cache: MemoryCache | None = None) -> LockManager:
    # One process, so a memory store is as shared as it needs to be; the test vouches for it.
    return LockManager(cache or MemoryCache()).declared_shared()


def settings(**changes: Any) -> KafkaSettings:
    return KafkaSettings(brokers=("127.0.0.1:1",), **changes)


Opener = Callable[..., KafkaQueue]


@pytest.fixture
async def opened() -> AsyncIterator[list[Queue]]:
    """Queues a test opens go in this list; each is closed when the test ends."""
    queues: list[Queue] = []
    yield queues
    for queue in queues:
        await queue.aclose()


SQLOpener = Callable[[], DatabaseQueue]


@contextlib.contextmanager
def migrations_up_to(version: int) -> Iterator[Callable[[], None]]:
    """The schema's migrations as a release that ended at `version` shipped them, until the
    function given is called (the upgrade to this code) or the block ends."""
    shipped = schema_module.MIGRATIONS

    def upgrade() -> None:
        schema_module.MIGRATIONS = shipped

    schema_module.MIGRATIONS = tuple(m for m in shipped if m.version <= version)
    try:
        yield upgrade
    finally:
        upgrade()


@pytest.fixture(params=["sqlite", "postgres", "mysql"])
async def sql_opener(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[SQLOpener]:
    prefix = f"up{uuid.uuid4().hex[:10]}_"
    kind: str = request.param
    if kind == "postgres":
        require_postgres()
    elif kind == "mysql":
        mysql_service.check()
    opened: list[DatabaseQueue] = []

    def open_one() -> DatabaseQueue:
        queue: DatabaseQueue
        if kind == "sqlite":
            queue = SQLiteQueue(str(tmp_path / "jobs.db"), prefix=prefix)
        elif kind == "postgres":
            queue = PostgresQueue(PG_URL, prefix=prefix)
        else:
            queue = MySQLQueue(mysql_service.SERVER, prefix=prefix)
        opened.append(queue)
        return queue

    yield open_one
    for queue in opened:
        await queue.aclose()
    if kind == "postgres":
        await drop_prefixed(prefix)
    elif kind == "mysql":
        await mysql_service.drop_tables(prefix)


@pytest.fixture(scope="module")
def certs() -> Iterator[Certs]:
    """A throw-away authority and a certificate it signed for `localhost`."""
    with tempfile.TemporaryDirectory(prefix="rq-tls-certs-") as folder:
        yield make_certs(Path(folder))


@pytest.fixture(scope="session")
def tansu() -> KafkaBroker:
    return broker()


@pytest.fixture
def prefix() -> str:
    return f"k{uuid.uuid4().hex[:10]}."


@pytest.fixture
async def topics(tansu: KafkaBroker, prefix: str) -> Callable[..., Any]:
    async def create(*queues: str, partitions: int = 1, failed: bool = True) -> None:
        names = [topic_name(prefix, q) for q in queues]
        names += [failed_topic_name(prefix, q) for q in queues] if failed else []
        await tansu.create_topics(names, partitions)

    await create("default")
    return create


@pytest.fixture
async def open_kafka(tansu: KafkaBroker, prefix: str) -> AsyncIterator[Opener]:
    opened: list[KafkaQueue] = []

    def opener(locks: LockManager | None = None, **changes: Any) -> KafkaQueue:
        made = KafkaSettings(
            brokers=(tansu.bootstrap,), topic_prefix=prefix, batch_bytes=1, **changes
        )
        queue = KafkaQueue(made, locks or shared_locks())
        opened.append(queue)
        return queue

    yield opener
    for queue in opened:
        await queue.aclose()


async def records_of(tansu: KafkaBroker, topic: str) -> list[Any]:
    """Every record on `topic`, read with a plain consumer."""
    consumer = AIOKafkaConsumer(bootstrap_servers=tansu.bootstrap, group_id=None)
    await consumer.start()
    try:
        found: list[Any] = []
        tps = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic))]
        consumer.assign(tps)
        ends = await consumer.end_offsets(tps)
        await consumer.seek_to_beginning(*tps)
        for _ in range(50):
            batches = await consumer.getmany(*tps, timeout_ms=200)
            found += [r for records in batches.values() for r in records]
            if all([await consumer.position(tp) >= ends[tp] for tp in tps]):
                break
        return found
    finally:
        await consumer.stop()


@pytest.fixture
async def rabbit(tmp_path: Path) -> AsyncIterator[RabbitMQQueue]:
    """A RabbitMQ queue on a namespace of its own, provisioned, closed and removed after."""
    backend = BACKENDS["rabbitmq"]
    assert backend.check is not None
    backend.check()
    namespace = "rq" + uuid.uuid4().hex[:12]
    backend.setup(tmp_path, namespace, ["default"])
    queue = backend.open(tmp_path, namespace)
    assert isinstance(queue, RabbitMQQueue)
    try:
        yield queue
    finally:
        await queue.aclose()
        assert backend.cleanup is not None
        await backend.cleanup(tmp_path, namespace)


SQSOpener = Callable[..., SQSQueue]


@pytest.fixture
async def open_sqs() -> AsyncIterator[SQSOpener]:
    """Opens SQS queues on this test process's moto server, under a prefix of the test's own
    (`fifo=True` for FIFO queues, other driver options as keywords), closed and deleted after."""
    port = shared()
    namespace = "d" + uuid.uuid4().hex[:10]
    opened: list[SQSQueue] = []

    def opener(*, fifo: bool = False, **options: Any) -> SQSQueue:
        query = f"region={REGION}&tls=false&prefix={namespace}-&wait=1s"
        queue = open_queue(
            f"sqs://{KEY}:{KEY}@127.0.0.1:{port}/?{query}", {"fifo": fifo, **options}
        )
        assert isinstance(queue, SQSQueue)
        opened.append(queue)
        return queue

    yield opener
    for queue in opened:
        await queue.aclose()
    await delete_queues(port, f"{namespace}-")
