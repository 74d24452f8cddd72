# SPDX-License-Identifier: MIT
"""aiokafka underneath: one producer, one consumer, and the one place errors are translated.

The consumer never joins a consumer group (see the package docstring): it
is assigned every partition of the topics it serves, reads ahead only those
no other worker is found holding (the rest are paused), and reads from
wherever the lock store's cursor says. Nothing is
committed to Kafka; `auto_offset_reset` is `none`, so a position that fell
out of the log is an error the driver reports instead of a silent jump.

Topics are looked up by name with automatic creation switched off (a plain
lookup may make a broker create the topic) and the answer is kept for half a
minute: a partition count changes when somebody repartitions a topic, not
between two reserves. A missing topic is not remembered, so creating it
takes effect at once.

Every call that reaches the broker goes through `translated()`, so the worker
sees `BrokerUnavailable` (wait and retry) or `BrokerRejected` (a refusal),
never an aiokafka class.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Coroutine, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka import errors as kx
from aiokafka.cluster import ClusterMetadata
from aiokafka.protocol.metadata import MetadataRequest

from ...envelope import QueuedJob
from ...errors import BrokerRejected, BrokerUnavailable
from ...job import ORDERING_KEY
from .settings import KafkaSettings

_T = TypeVar("_T")

CLOSE_GRACE = 10.0
"""Seconds `aclose` waits for broker calls already under way before it cancels them."""

METADATA_TTL = 30.0
"""Seconds a topic's partition list is trusted before it is asked for again."""

_UNAVAILABLE: tuple[type[BaseException], ...] = (
    kx.KafkaConnectionError,
    kx.KafkaTimeoutError,
    kx.NodeNotReadyError,
    kx.RequestTimedOutError,
    kx.KafkaUnavailableError,
    kx.ConsumerStoppedError,
)


@contextlib.asynccontextmanager
async def translated(what: str) -> AsyncIterator[None]:
    """Turn aiokafka's exceptions into this library's, naming what was being done."""
    try:
        yield
    except kx.OffsetOutOfRangeError:
        raise  # the driver handles this one itself: it means jobs were lost to retention
    except _UNAVAILABLE as exc:
        raise BrokerUnavailable(f"Kafka is unreachable while trying to {what}: {exc}") from exc
    except kx.KafkaError as exc:
        if getattr(exc, "retriable", False):
            raise BrokerUnavailable(f"Kafka could not {what} for now: {exc}") from exc
        raise BrokerRejected(f"Kafka refused to {what}: {exc}") from exc
    except OSError as exc:
        raise BrokerUnavailable(f"Kafka is unreachable while trying to {what}: {exc}") from exc


def record_key(job: QueuedJob) -> bytes:
    """The record key: the job's ordering key if it has one, else its uniqueness key, else
    its id.

    The key picks the partition, and a partition hands out one job at a time in the
    order its records were produced, so jobs that share an ordering key run one at a
    time, in dispatch order (a retry with a backoff is produced again, at the end).
    """
    ordering = job.headers.get(ORDERING_KEY) if job.headers else None
    return (ordering or job.unique_key or job.id).encode("utf-8", "backslashreplace")


def record_headers(
    job: QueuedJob, extra: Mapping[str, str] | None = None
) -> list[tuple[str, bytes]]:
    """Headers a person reading the topic with Kafka's own tools can make sense of.

    An error text may quote anything a handler saw, lone surrogates included;
    those are written as `\\udxxx` escapes rather than failing the record.
    """
    headers = {"job": job.name, "attempts": str(job.attempts), **(extra or {})}
    return [(name, value.encode("utf-8", "backslashreplace")) for name, value in headers.items()]


def record_value(job: QueuedJob) -> bytes:
    """The job's JSON form as UTF-8, whatever its payload holds.

    A payload with a lone surrogate (it came in through a path that did not
    check it) cannot be UTF-8 as it is; it is written with every non-ASCII
    character as a JSON escape instead, which is still the same JSON. A
    reader of this library refuses that record as not a job (a surrogate is
    not text) and records it as failed, which is better than a job whose
    failure can never be written and which comes back after every lease.
    """
    text = job.to_json()
    try:
        return text.encode()
    except UnicodeEncodeError:
        return json.dumps(job.to_dict(), separators=(",", ":")).encode()


_UNKNOWN_TOPIC = 3
"""Kafka's error code for a topic the cluster does not have (UNKNOWN_TOPIC_OR_PARTITION)."""


@dataclass(frozen=True, slots=True)
class TopicShape:
    """A topic as the cluster has it; a topic that does not exist has no partitions."""

    brokers: int
    """Brokers in the cluster (the most replicas a new topic can have)."""
    partitions: int
    replicas: int
    """The fewest replicas any of its partitions has."""

    @property
    def exists(self) -> bool:
        return self.partitions > 0


class KafkaClients:
    """The producer, the consumer and the topic metadata, started on first use."""

    def __init__(self, settings: KafkaSettings) -> None:
        self.settings = settings
        self._producer: AIOKafkaProducer | None = None
        self._consumer: AIOKafkaConsumer | None = None
        self._lookups: AIOKafkaConsumer | None = None
        self._starting: asyncio.Lock | None = None
        self._topics: dict[str, tuple[float, list[int]]] = {}
        self._under_way: set[asyncio.Task[Any]] = set()
        """Broker calls that run to their end even when their caller is cancelled."""

    async def finished(self, call: Coroutine[Any, Any, _T]) -> _T:
        """Run `call` to its end even if the caller is cancelled meanwhile.

        aiokafka opens connections inside its calls (a client's start, the
        first request to a broker); a cancel that lands between a socket
        opening and the client recording it leaves a connection nobody
        closes. So such calls run as their own task: a cancelled caller
        stops waiting at once, the call finishes, and `aclose` waits for it
        before stopping the clients, which then own every connection.
        """
        task = asyncio.ensure_future(call)
        self._under_way.add(task)
        task.add_done_callback(self._settled)
        return await asyncio.shield(task)

    def _settled(self, task: asyncio.Task[Any]) -> None:
        self._under_way.discard(task)
        if not task.cancelled():
            task.exception()  # a caller that was cancelled never reads it; this one does

    async def _start(self) -> tuple[AIOKafkaProducer, AIOKafkaConsumer]:
        if self._producer is not None and self._consumer is not None:
            return self._producer, self._consumer
        await self._start_all()
        assert self._producer is not None
        assert self._consumer is not None
        return self._producer, self._consumer

    async def lookups(self) -> AIOKafkaConsumer:
        """A consumer that never fetches, for metadata and offsets.

        The reading consumer keeps a long-poll fetch open on its connection, and
        a broker may answer one connection's requests in order, so a lookup sent
        behind that fetch would wait out the poll.
        """
        if self._lookups is None:
            await self._start_all()
        assert self._lookups is not None
        return self._lookups

    async def _start_all(self) -> None:
        await self.finished(self._start_clients())

    async def _start_clients(self) -> None:
        if self._starting is None:
            self._starting = asyncio.Lock()
        async with self._starting:
            if self._producer is None or self._consumer is None or self._lookups is None:
                args = self.settings.client_arguments()
                producer = AIOKafkaProducer(
                    acks="all", linger_ms=0, max_batch_size=self.settings.batch_bytes, **args
                )
                consumer = AIOKafkaConsumer(
                    group_id=None,
                    enable_auto_commit=False,
                    auto_offset_reset="none",
                    fetch_max_wait_ms=int(self.settings.max_wait.total_seconds() * 1000),
                    **args,
                )
                lookups = AIOKafkaConsumer(group_id=None, enable_auto_commit=False, **args)
                async with translated("connect to the brokers"):
                    try:
                        await producer.start()
                        await consumer.start()
                        await lookups.start()
                    except BaseException:
                        await producer.stop()
                        await consumer.stop()
                        await lookups.stop()
                        raise
                self._producer, self._consumer, self._lookups = producer, consumer, lookups

    async def producer(self) -> AIOKafkaProducer:
        return (await self._start())[0]

    async def consumer(self) -> AIOKafkaConsumer:
        return (await self._start())[1]

    async def partitions(self, topic: str) -> list[int] | None:
        """The partition numbers of `topic`, or None if the cluster has no such topic."""
        known = self._topics.get(topic)
        if known is not None and time.monotonic() - known[0] < METADATA_TTL:
            return known[1]
        answer = await self._metadata(topic)
        cluster = ClusterMetadata()
        cluster.update_metadata(answer)
        found = cluster.partitions_for_topic(topic)
        if not found:
            self._topics.pop(topic, None)
            return None
        numbers = sorted(found)
        self._topics[topic] = (time.monotonic(), numbers)
        return numbers

    async def shape(self, topic: str) -> TopicShape:
        """`topic`'s partitions and replicas as the cluster has them now, never remembered."""
        answer = (await self._metadata(topic)).to_object()
        brokers = len(answer["brokers"])
        for found in answer["topics"]:
            if found["topic"] != topic or found["error_code"] == _UNKNOWN_TOPIC:
                continue
            async with translated(f"read the metadata of topic {topic!r}"):
                if found["error_code"]:
                    raise kx.for_code(found["error_code"])(f"topic {topic!r}")
            partitions = found["partitions"]
            replicas = min((len(p["replicas"]) for p in partitions), default=0)
            return TopicShape(brokers, len(partitions), replicas)
        return TopicShape(brokers, 0, 0)

    async def _metadata(self, topic: str) -> Any:
        consumer = await self.lookups()
        async with translated(f"read the metadata of topic {topic!r}"):
            # Asked by name with auto-creation off: a plain lookup by name may make a
            # broker create the topic, and asking for every topic is slow on a big
            # cluster. aiokafka's client has no public call for this request.
            client = consumer._client
            request = MetadataRequest([topic], allow_auto_topic_creation=False)
            return await self.finished(client.send(client.get_random_node(), request))

    def forget(self, topic: str) -> None:
        """Drop what is remembered of `topic`, after provisioning changed it."""
        self._topics.pop(topic, None)

    async def send(
        self, topic: str, job: QueuedJob, extra: Mapping[str, str] | None = None
    ) -> asyncio.Future[Any]:
        """Hand the job's record to the producer; the future resolves once the brokers have it."""
        producer = await self.producer()
        async with translated(f"produce to topic {topic!r}"):
            sent: asyncio.Future[Any] = await producer.send(
                topic,
                record_value(job),
                key=record_key(job),
                headers=record_headers(job, extra),
            )
        return sent

    async def produce(
        self, topic: str, job: QueuedJob, extra: Mapping[str, str] | None = None
    ) -> None:
        """Produce one record and wait until every in-sync replica has it (acks=all)."""
        sent = await self.send(topic, job, extra)
        async with translated(f"produce to topic {topic!r}"):
            await sent

    async def aclose(self) -> None:
        if self._under_way:
            _, late = await asyncio.wait(set(self._under_way), timeout=CLOSE_GRACE)
            for task in late:
                task.cancel()
            if late:
                await asyncio.wait(late)
        producer, consumer, lookups = self._producer, self._consumer, self._lookups
        self._producer = self._consumer = self._lookups = None
        for reader in (consumer, lookups):
            with contextlib.suppress(kx.KafkaError, OSError):
                if reader is not None:
                    await reader.stop()
        with contextlib.suppress(kx.KafkaError, OSError):
            if producer is not None:
                await producer.stop()


__all__ = [
    "KafkaClients",
    "TopicShape",
    "record_headers",
    "record_key",
    "record_value",
    "translated",
]
