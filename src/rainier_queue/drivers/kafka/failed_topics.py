# SPDX-License-Identifier: MIT
"""Listing what the failed topics hold, so `rainier-queue failed` works on Kafka too.

A failed job on Kafka is a record on `{topic}.failed`. Without a way to
read those back, a user had to find a Kafka tool, the right topic name and
the header format to learn what failed and why. This reads them the way a
person would, from the first record to the last, with a consumer of its
own that lives for one listing and commits nothing, and turns each record
into a `FailedJob`.

The listing is total, like the read path of the queues: a record on a
failed topic that is not a job (someone else produced it, or it was written
by a newer release) is listed as a `NOT_A_JOB` entry carrying its raw
value and saying what was wrong, never skipped and never a crash.

Which topics "every queue" means: a log has no table of queues, so it is
every topic on the cluster named as some queue's failed topic under this
connection's topic prefix (`{prefix}{encoded queue}.failed`, see names.py).
With an empty prefix that includes another application's `orders.failed`,
which is also what this library would call queue `orders`'s failed topic.

Nothing here retries, forgets or deletes: a record cannot be taken out of a
log, and a retry that cannot remember being done would run the job again on
every `retry`. The queue says so (`UnsupportedOperation`) instead.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import logging
from collections.abc import AsyncGenerator
from datetime import UTC, datetime

from aiokafka import AIOKafkaConsumer, ConsumerRecord, TopicPartition

from ...envelope import parse_time
from ...envelope.reading import Malformed, read_envelope
from ...queue import FailedJob
from .connection import KafkaClients, translated
from .failing import header_text, why_not_a_job
from .names import KafkaPosition, failed_topic_name, queue_of_failed_topic
from .settings import KafkaSettings

log = logging.getLogger("rainier_queue.kafka")

POLL_MS = 1000
"""How long one fetch of a listing waits for the broker."""

EMPTY_POLLS = 5
"""Fetches in a row that return nothing before a listing stops short of the end offsets."""


def failed_job_of(record: ConsumerRecord[bytes, bytes], queue: str) -> FailedJob:
    """One record of `queue`'s failed topic as a `FailedJob`, whatever the record holds."""
    headers = {name: value for name, value in record.headers or ()}
    failed_at = _failed_at(header_text(headers, "failed-at"), record.timestamp)
    recorded = header_text(headers, "error")
    read = read_envelope(record.value, field="value")
    if isinstance(read, Malformed):
        read = why_not_a_job(record, read)
        position = KafkaPosition(record.topic, record.partition, record.offset)
        job = read.as_job(queue=queue, job_id=f"kafka:{position}")
        error = (
            f"not a job: {read.reason}. This record on the failed topic, at {position}, was "
            "written by something other than this version of rainier-queue; its value is shown "
            "as it was (payload `raw`)"
        )
        if recorded:
            error += f". Its own `error` header says: {recorded}"
        return FailedJob(job=job, error=error, failed_at=failed_at)
    error = recorded if recorded is not None else "(the record carries no `error` header)"
    return FailedJob(job=read, error=error, failed_at=failed_at)


def _failed_at(header: str | None, timestamp: int | None) -> datetime:
    if header is not None:
        try:
            return parse_time(header)
        except Exception:  # a header anything may have written: fall back to the timestamp
            pass
    if timestamp is not None and timestamp >= 0:
        try:
            return datetime.fromtimestamp(timestamp / 1000, UTC)
        except (OverflowError, OSError, ValueError):
            pass
    return datetime.fromtimestamp(0, UTC)


class FailedTopics:
    """Reads the failed topics of one `KafkaQueue`'s connection."""

    def __init__(self, clients: KafkaClients, settings: KafkaSettings) -> None:
        self._clients = clients
        self._settings = settings

    async def topics(self, queue: str | None) -> dict[str, str]:
        """The failed topics to read, each with the queue it belongs to."""
        prefix = self._settings.topic_prefix
        if queue is not None:
            return {failed_topic_name(prefix, queue): queue}
        consumer = await self._clients.lookups()
        async with translated("list the topics"):
            names = await consumer.topics()
        found = {name: queue_of_failed_topic(prefix, name) for name in names}
        return {name: q for name, q in sorted(found.items()) if q is not None}

    async def newest(self, queue: str | None, limit: int) -> list[FailedJob]:
        """The newest `limit` failed jobs of `queue` (or of every queue), newest first."""
        wanted = await self.topics(queue)
        tps: list[TopicPartition] = []
        for topic in wanted:
            numbers = await self._clients.partitions(topic)
            tps += [TopicPartition(topic, n) for n in numbers or ()]
        if not tps or limit < 1:
            return []
        kept: list[tuple[float, int, int, int, FailedJob]] = []
        count = itertools.count()
        async with contextlib.aclosing(self._read(tps)) as fetched:
            async for batch in fetched:
                for record in batch:
                    failed = failed_job_of(record, wanted[record.topic])
                    stamp = failed.failed_at.timestamp()
                    item = (stamp, record.offset, record.partition, next(count), failed)
                    if len(kept) < limit:
                        heapq.heappush(kept, item)
                    else:
                        heapq.heappushpop(kept, item)
        return [item[-1] for item in sorted(kept, reverse=True)]

    async def _read(
        self, tps: list[TopicPartition]
    ) -> AsyncGenerator[list[ConsumerRecord[bytes, bytes]], None]:
        """The records of `tps` as they are fetched, from the earliest retained to the end offset
        read first (records produced meanwhile may come too)."""
        consumer = AIOKafkaConsumer(
            group_id=None,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            **self._settings.client_arguments(),
        )
        async with translated("read the failed topics"):
            await consumer.start()
            try:
                consumer.assign(tps)
                ends = await consumer.end_offsets(tps)
                starts = await consumer.beginning_offsets(tps)
                left = {tp for tp in tps if ends[tp] > starts[tp]}
                for tp in tps:
                    consumer.seek(tp, starts[tp])
                empty = 0
                while left and empty < EMPTY_POLLS:
                    batches = await consumer.getmany(*left, timeout_ms=POLL_MS)
                    empty = 0 if any(batches.values()) else empty + 1
                    for batch in batches.values():
                        yield batch
                    for tp in list(left):
                        if await consumer.position(tp) >= ends[tp]:
                            left.discard(tp)
                if left:
                    log.warning(
                        "listing failed jobs stopped short of the end of %s: the broker sent "
                        "nothing more",
                        ", ".join(f"{tp.topic}:{tp.partition}" for tp in sorted(left)),
                    )
            finally:
                await consumer.stop()


__all__ = ["FailedTopics", "failed_job_of"]
