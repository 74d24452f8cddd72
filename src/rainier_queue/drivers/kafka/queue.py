# SPDX-License-Identifier: MIT
"""`KafkaQueue`: the Queue port over a partitioned log (see the package docstring for the costs)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any, ClassVar, Self

from typing_extensions import override

from ..._clock import utcnow
from ...envelope import QueuedJob
from ...errors import ConfigurationError, LeaseLost, NotProvisioned
from ...locks import Cache, LockManager
from ...queue import Capabilities, FailedJob, Finding, Queue, QueueCounts, Reservation
from ..cached_batches import CacheBatches
from ..pausing import CachePauses
from .connection import KafkaClients, translated
from .failed_topics import FailedTopics
from .failing import FailedRecords
from .membership import Membership
from .names import KafkaPosition, batch_prefix, failed_topic_name, paused_key, topic_name
from .partitions import Cursor, Delivery, Partitions, PartitionState
from .provisioning import Topics
from .reserving import Reserver
from .settings import OPTIONS, KafkaSettings, read_settings
from .waking import Waker

if TYPE_CHECKING:
    from .. import DriverContext

log = logging.getLogger("rainier_queue.kafka")


def require_shared(locks: LockManager) -> None:
    """Refuse a lock store other processes cannot see, saying why and what to do instead."""
    if locks.is_shared:
        return
    raise ConfigurationError(
        f"the kafka driver needs a shared lock store, and {locks.cache.name} is seen only by "
        "this process: every worker would lease every partition to itself and every job "
        "would run once per worker. Point `locks` at a Redis or database store "
        "(redis://..., postgresql://..., mysql://..., or an SQLite file all workers share), "
        "or, in a single-process test, pass a LockManager(...).declared_shared()"
    )


class KafkaQueue(Queue):
    """Jobs as records on a topic per queue; partitions leased, cursors kept in the lock store."""

    name: ClassVar[str] = "kafka"
    idle_wait: ClassVar[str] = (
        "a look at the partitions' end offsets a few times a second, ending for a record "
        "on a partition no live worker holds"
    )
    capabilities: ClassVar[Capabilities] = Capabilities(
        survives_restart=True,
        shared_between_processes=True,
        delayed_job_steps_aside=False,
        reserved_job_steps_aside=False,
        fifo_within_queue=False,
        failed_store=False,
        failed_listing=True,
        raw_push=True,
        push_creates_resources=False,
        pausable=True,
        limits=True,
        batches=True,
        batch_callbacks_exactly_once=False,
        ordering_keys=True,
    )

    OPTIONS: ClassVar[frozenset[str]] = OPTIONS

    @classmethod
    def from_config(cls, url: str, options: Mapping[str, Any], context: DriverContext) -> Self:
        """`kafka://host:9092,host:9092/?locks=<lock store URL>&group=...&topic_prefix=...`."""
        settings, locks_url = read_settings(url, options)
        if context.open_cache is None:
            raise ConfigurationError(
                "the kafka driver keeps its partition leases in a lock store, and this "
                "context cannot open one: open the queue with "
                "rainier_queue.connections.open_queue (or a QueueConfig), which can"
            )
        cache = context.open_cache(locks_url)
        return cls(settings, LockManager(cache), owns_cache=True)

    def __init__(
        self, settings: KafkaSettings, locks: LockManager, *, owns_cache: bool = False
    ) -> None:
        require_shared(locks)
        self.settings = settings
        self.locks = locks
        self._owns_cache = owns_cache
        self._clients = KafkaClients(settings)
        self._partitions = Partitions(
            self._clients,
            locks,
            group=settings.group,
            lease=settings.lease,
            recheck=settings.max_wait,
        )
        self._membership = Membership(locks, group=settings.group, lease=settings.lease)
        self._failures = FailedRecords(self._clients)
        self._failed_topics = FailedTopics(self._clients, settings)
        self._reserver = Reserver(self._partitions, self._membership, settings, self._failures)
        self._waker = Waker(self._clients, self._partitions)
        self._topics = Topics(self._clients, settings)
        self.pauses = CachePauses(
            locks.cache, lambda queue: paused_key(settings.group, self.topic_for(queue))
        )
        """The paused queues (`Pausable`): a key per queue in the lock store the group shares."""
        self.batch_store = CacheBatches(
            locks.cache, batch_prefix(settings.group, settings.topic_prefix), self.push_many
        )
        """Batches (`BatchStore`), counted in the lock store; callbacks at least once."""

    @property
    @override
    def lease(self) -> timedelta:
        return self.settings.lease

    @override
    def describe(self) -> str:
        return self.settings.describe()

    def topic_for(self, queue: str) -> str:
        """The topic a queue's jobs are records on (`provision` creates it)."""
        return topic_name(self.settings.topic_prefix, queue)

    def failed_topic_for(self, queue: str) -> str:
        """The topic a queue's exhausted jobs are produced to (`provision` creates it)."""
        return failed_topic_name(self.settings.topic_prefix, queue)

    def partitions_held(self, queue: str) -> list[int]:
        """The partitions of `queue`'s topic whose lease this worker holds, as it last knew.

        Those it is running jobs from, and any whose job ended since its last
        reserve; for watching how the partitions are shared out.
        """
        topic = self.topic_for(queue)
        held = (
            s.tp.partition
            for s in self._partitions.all()
            if s.tp.topic == topic and s.lock is not None
        )
        return sorted(held)

    async def _partitions_of(self, topic: str, queue: str) -> list[int]:
        numbers = await self._clients.partitions(topic)
        if numbers is None:
            raise NotProvisioned(
                f"the Kafka topic {topic!r} (queue {queue!r}) does not exist, and this queue "
                "never creates one on a push, because the partition count decides how many "
                f"of its jobs can run at once: run `rainier-queue provision --queue {queue}` "
                f"(it creates {topic!r} with `partitions` partitions, and its failed topic)",
                queue=queue,
            )
        return numbers

    # -- provisioning (Provisionable) -----------------------------------------------

    async def provision(self, queues: Sequence[str]) -> list[str]:
        """Create each queue's topic and failed topic, and grow a topic short of `partitions`."""
        return await self._topics.provision(queues)

    async def check_provisioned(self, queues: Sequence[str]) -> list[Finding]:
        """Topics missing, short of `partitions`, or (when it is set) of `replication`."""
        return await self._topics.check(queues)

    # -- pushing -------------------------------------------------------------------

    @override
    async def push(self, job: QueuedJob) -> str:
        topic = self.topic_for(job.queue)
        await self._partitions_of(topic, job.queue)
        await self._clients.produce(topic, job)
        return job.id

    @override
    async def push_many(self, jobs: Sequence[QueuedJob]) -> list[str]:
        """Hand every record to the producer first, then wait for all of them together."""
        for queue in {job.queue for job in jobs}:
            await self._partitions_of(self.topic_for(queue), queue)
        sent = [await self._clients.send(self.topic_for(job.queue), job) for job in jobs]
        async with translated("produce jobs"):
            await asyncio.gather(*sent)
        return [job.id for job in jobs]

    @override
    async def push_raw(self, queue: str, body: str) -> None:
        """Produce `body` as it is, for a consumer that is not this library.

        This library's own workers record such a record on the failed topic
        as not a job (the log keeps it for whoever it was meant for too).
        """
        topic = self.topic_for(queue)
        await self._partitions_of(topic, queue)
        producer = await self._clients.producer()
        async with translated(f"produce to topic {topic!r}"):
            await producer.send_and_wait(topic, body.encode())

    # -- reserving -----------------------------------------------------------------

    @override
    async def reserve(self, queue: str, *, limit: int = 1) -> list[Reservation]:
        if limit < 1:
            return []
        topic = self.topic_for(queue)
        numbers = await self._partitions_of(topic, queue)
        return await self._reserver.reserve(topic, numbers, queue, limit)

    @override
    async def wait_for_work(self, queues: Sequence[str], timeout: timedelta) -> None:
        """Return once a record lands on a partition of `queues` that no live worker holds.

        Polls the partitions' end offsets (waking.py); a partition another
        worker holds is passed over, so an idle worker beside a busy one
        does not wake for the busy one's work.
        """
        topics = {
            self.topic_for(queue): await self._partitions_of(self.topic_for(queue), queue)
            for queue in queues
        }
        await self._waker.wait(topics, timeout)

    # -- settling ------------------------------------------------------------------

    def _current(self, reservation: Reservation) -> tuple[PartitionState, Delivery, KafkaPosition]:
        position = reservation.handle
        if not isinstance(position, KafkaPosition):
            raise LeaseLost(f"job {reservation.job.id} was not reserved from Kafka")
        state = self._partitions.get(position.topic, position.partition)
        delivery = None if state is None else state.delivery
        if state is None or delivery is None or delivery.token != reservation.token:
            raise LeaseLost(
                f"job {reservation.job.id} at {position} is no longer reserved by this worker "
                "(its lease lapsed or it was settled already)"
            )
        return state, delivery, position

    async def _advance(self, state: PartitionState, delivery: Delivery, job_id: str) -> None:
        """Move the cursor past the delivered record; `LeaseLost` if it was moved meanwhile."""
        # The partition stays busy until the cursor has moved: a reserve running
        # meanwhile must neither give the lease back nor hand out the next record
        # from a cursor that is about to change. One write: the cursor on the next
        # record, with no delivery of it counted yet.
        moved = await self._partitions.commit(
            state, delivery.cursor, Cursor(delivery.record.offset + 1)
        )
        self._done(state)
        if not moved:
            raise LeaseLost(
                f"job {job_id}: the cursor of partition {state.tp.partition} of topic "
                f"{state.tp.topic!r} moved while the job ran (its lease lapsed and another "
                "worker took the partition, or the queue was cleared)"
            )

    async def _still_at(self, state: PartitionState, delivery: Delivery, job_id: str) -> None:
        """`LeaseLost` (and the partition freed) if the cursor moved since `delivery`."""
        now = await self._partitions.read_cursor(state.tp.topic, state.tp.partition)
        if now == delivery.cursor:
            return
        state.cursor_known = False
        self._done(state)
        raise LeaseLost(
            f"job {job_id}: the cursor of partition {state.tp.partition} of topic "
            f"{state.tp.topic!r} moved while the job ran (the queue was cleared, or another "
            "worker took the partition); it is not retried"
        )

    def _done(self, state: PartitionState) -> None:
        """The partition's job is settled (or lost): it may hand out the next one."""
        self._reserver.done(state)

    @override
    async def acknowledge(self, reservation: Reservation) -> None:
        state, delivery, _ = self._current(reservation)
        await self._advance(state, delivery, reservation.job.id)

    @override
    async def acknowledge_many(self, reservations: Sequence[Reservation]) -> list[Exception | None]:
        """Each on its own partition, so they are settled side by side."""

        async def one(reservation: Reservation) -> Exception | None:
            try:
                await self.acknowledge(reservation)
            except Exception as exc:
                return exc
            return None

        return list(await asyncio.gather(*(one(r) for r in reservations)))

    @override
    async def release(
        self,
        reservation: Reservation,
        *,
        delay: timedelta = timedelta(0),
        count_attempt: bool = True,
    ) -> None:
        state, delivery, position = self._current(reservation)
        if delay <= timedelta(0) and not count_attempt:
            # Handed back unrun (a stopping worker): the cursor never moved, so the
            # record stays where it is, keeps its place in the order, and the
            # delivery is not counted.
            await self._partitions.undeliver(state, delivery)
            state.buffer.appendleft(delivery.record)
            self._done(state)
            return
        # A cursor cannot skip one record and come back for it, so a retry is a new
        # record at the end of the topic, produced before the old one is passed.
        # First, though, the cursor must still be where it was when the job was
        # handed out: a `clear` from another process (or a worker that took the
        # partition over) moved it past this record, and a retry produced now
        # would land past the new cursor and bring a cleared job back.
        await self._still_at(state, delivery, reservation.job.id)
        job = reservation.job
        attempts = job.attempts if count_attempt else max(0, job.attempts - 1)
        retry = job.with_changes(attempts=attempts, available_at=utcnow() + delay)
        await self._clients.produce(state.tp.topic, retry, {"retry-of": str(position)})
        await self._advance(state, delivery, job.id)

    @override
    async def renew(self, reservation: Reservation) -> None:
        state, delivery, position = self._current(reservation)
        if not await self._partitions.renew(state):
            self._done(state)
            raise LeaseLost(f"job {reservation.job.id}: the lease on {position} was lost")
        delivery.deadline = time.monotonic() + self.settings.lease.total_seconds()
        try:
            # A worker busy with long jobs may not reserve for a while; it is still
            # serving the topic, so its seat among the topic's workers is kept too.
            await self._membership.keep(position.topic)
        except Exception as exc:  # the job's own lease is renewed; the seat is retried
            log.warning("could not renew this worker's seat at topic %r: %s", position.topic, exc)

    @override
    async def fail(self, reservation: Reservation, error: str) -> None:
        """Record the job on its failed topic (whole, or what the topic takes), then move on.

        An outage while recording raises, and the cursor stays where it was.
        """
        state, delivery, position = self._current(reservation)
        await self._failures.record(reservation.job, error, position)
        await self._advance(state, delivery, reservation.job.id)

    # -- the failed topics (FailedJobListing) -------------------------------------------

    async def failed_jobs(self, *, queue: str | None = None, limit: int = 100) -> list[FailedJob]:
        """The newest failed records of `queue`'s failed topic, or of every queue's, newest first.

        Every queue's means every topic named as a failed topic under this
        connection's prefix (failed_topics.py). Records that are not jobs
        are listed too, as `rainier-queue:not-a-job` entries with the raw value.
        Read-only: a record cannot be taken out of a log, so there is no
        retrying or forgetting here (see the driver's documentation).
        """
        return await self._failed_topics.newest(queue, limit)

    # -- rate and concurrency limits (limits.LimitStore): the group's lock store ----------

    def limit_store(self) -> Cache:
        """Where limits per key are counted: the lock store every worker of the group shares."""
        return self.locks.cache

    # -- paused queues (Pausable): keys in the group's lock store ------------------------

    async def pause(self, queue: str) -> bool:
        return await self.pauses.pause(queue)

    async def resume(self, queue: str) -> bool:
        return await self.pauses.resume(queue)

    async def paused(self, queues: Sequence[str]) -> frozenset[str]:
        return await self.pauses.paused(queues)

    # -- size and clear ------------------------------------------------------------

    async def _lag(self, queue: str) -> list[tuple[PartitionState, int, Cursor | None, int]]:
        """Per partition: (state, end offset, cursor, waiting records other than a running one)."""
        return [
            (state, end, cursor, waiting)
            for state, end, cursor, waiting, _ in await self._lag_and_running(queue)
        ]

    async def _lag_and_running(
        self, queue: str
    ) -> list[tuple[PartitionState, int, Cursor | None, int, bool]]:
        """`_lag`, and whether the record at each partition's cursor is out with a worker."""
        topic = self.topic_for(queue)
        states = await self._partitions.of(topic, await self._partitions_of(topic, queue))
        consumer = await self._clients.lookups()
        tps = [state.tp for state in states]
        async with translated(f"read the offsets of topic {topic!r}"):
            ends = await self._clients.finished(consumer.end_offsets(tps))
            starts = await self._clients.finished(consumer.beginning_offsets(tps))
        out = []
        for state in states:
            cursor = await self._partitions.read_cursor(topic, state.tp.partition)
            at = starts[state.tp] if cursor is None else max(cursor.offset, starts[state.tp])
            waiting = max(0, ends[state.tp] - at)
            running = bool(waiting) and await self._running_at(state, cursor, at)
            out.append((state, ends[state.tp], cursor, waiting - running, running))
        return out

    async def _running_at(self, state: PartitionState, cursor: Cursor | None, offset: int) -> bool:
        """Whether the record at `offset`, the cursor, is out with a worker whose lease holds."""
        if state.delivery is not None and state.delivery.record.offset == offset:
            return True
        if cursor is None or cursor.offset != offset or not cursor.delivered:
            return False
        part = self._partitions
        return await self.locks.is_held(part.lease_name(state.tp.topic, state.tp.partition))

    @override
    async def size(self, queue: str) -> int:
        """The lag: records past the group's cursor, summed over partitions."""
        return sum(waiting for *_, waiting in await self._lag(queue))

    async def counts(self, queue: str) -> QueueCounts:
        """`Countable`: the lag as waiting, a record out with a live lease as reserved.

        A log cannot tell a delayed record from a due one without reading it,
        so delayed jobs count as waiting here. A reserved record's lease end
        is not known either; the lease length bounds it, so a drain waits that
        long for a dead holder's partition before it calls the queue empty.
        """
        waiting = reserved = 0
        for *_, left, running in await self._lag_and_running(queue):
            waiting += left
            reserved += running
        return QueueCounts(
            waiting=waiting,
            delayed=0,
            reserved=reserved,
            next_due=utcnow() + self.lease if reserved else None,
        )

    @override
    async def clear(self, queue: str) -> int:
        """Move every cursor to the end of the log and say how many jobs that skipped.

        Nothing is deleted: a log removes records only by its retention. A
        worker holding a partition meanwhile finds out at its next hand-out,
        a compare-and-set from its own copy of the cursor (partitions.py).
        """
        skipped = 0
        for state, end, cursor, waiting, running in await self._lag_and_running(queue):
            start = end - waiting - running  # the first record waiting, when any is
            moved_from = await self._partitions.skip_to(state, cursor, end)
            if moved_from is not None and moved_from.offset > start:
                # Workers ran some of them while the clear looked: those were not skipped.
                waiting = max(0, waiting - (moved_from.offset - start))
            skipped += waiting
            state.not_before = None
        return skipped

    # -- stopping --------------------------------------------------------------------

    async def release_partitions(self) -> None:
        """Give back every partition lease held without a job running on it.

        A stopping worker calls this (through `on_worker_stop`), so the next
        worker does not wait out the lease before it can take the partitions.
        """
        async with self._reserver.lock:
            await self._partitions.let_go(self._partitions.all())

    async def leave(self) -> None:
        """Give back the partition leases and this worker's seat among each topic's workers.

        The others count one worker fewer at once, and take its share.
        """
        await self.release_partitions()
        await self._membership.leave()

    @override
    async def on_worker_stop(self) -> None:
        await self.leave()

    @override
    async def aclose(self) -> None:
        try:
            if self._partitions.all() or self._membership.seated:
                await self.leave()
        except Exception as exc:  # closing must not fail because the lock store is down
            log.warning("could not give back the partition leases on close: %s", exc)
        finally:
            await self._clients.aclose()
            if self._owns_cache:
                await self.locks.cache.aclose()


__all__ = ["KafkaQueue", "require_shared"]
