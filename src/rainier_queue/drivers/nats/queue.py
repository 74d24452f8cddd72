# SPDX-License-Identifier: MIT
"""`NATSQueue`: the Queue port over a JetStream work-queue stream (the package docstring says
what choosing it costs)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any, ClassVar, Self

import nats.js.errors as jx
from typing_extensions import override

from ..._clock import utcnow
from ...envelope import QueuedJob
from ...envelope.reading import Malformed, read_envelope
from ...errors import NotProvisioned
from ...queue import Capabilities, FailedJob, Finding, Queue, QueueCounts, Reservation, new_token
from .. import malformed as toolkit
from ..cached_batches import KEPT, CacheBatches
from ..unordered import refuse_ordering_keys
from .connection import NATSConnection, translated
from .delays import DUE, DelayMover
from .ending import cancel_for_sure
from .exhausted import ExhaustedMover
from .failed import FailedStore
from .fetching import Arrival, Fetcher, NoAnswer
from .kvcache import KeyValueCache
from .leases import ACK, PROGRESS, TERMINATE, Delivery, nak, new_ledger
from .names import Names
from .pausing import NATSPauses
from .provisioning import Provisioning
from .records import NATSRecords
from .settings import NATSSettings

if TYPE_CHECKING:
    from .. import DriverContext

log = logging.getLogger("rainier_queue.nats")

SETTLE_TIMEOUT = 5.0
"""Seconds a settle waits for the server to confirm it."""


class _Served:
    """What a worker keeps per queue it serves: the fetchers and the movers' tasks."""

    def __init__(self, fetcher: Fetcher, delays: Fetcher, exhausted: ExhaustedMover) -> None:
        self.fetcher = fetcher
        self.delays = delays
        self.exhausted = exhausted
        self.tasks: list[asyncio.Task[None]] = []
        self.lease = timedelta(0)


UNORDERED = (
    "a pull consumer hands a queue's messages to whichever worker asks, and a retry with a "
    "backoff is published again behind the rest, so nothing holds a key's later jobs behind "
    "an earlier one"
)
"""Why NATS cannot keep an ordering key's order (`Capabilities.ordering_keys`)."""


class NATSQueue(Queue):
    """Jobs as messages on a JetStream work-queue stream, one durable pull consumer per queue."""

    name: ClassVar[str] = "nats"
    idle_wait: ClassVar[str] = "a subscription to the queues' subjects that each push wakes"
    capabilities: ClassVar[Capabilities] = Capabilities(
        survives_restart=True,
        shared_between_processes=True,
        push_creates_resources=False,
        pausable=True,
        records=True,
        cancellable=True,
        batches=True,
        batch_callbacks_exactly_once=False,
    )

    OPTIONS: ClassVar[frozenset[str]] = NATSSettings.OPTIONS

    @classmethod
    def from_config(cls, url: str, options: Mapping[str, Any], context: DriverContext) -> Self:
        """`nats://[user:password@]host:4222[,host:4222]/?prefix=...&lease=...`."""
        settings, _ = NATSSettings.read(url, options, who="the `nats` driver")
        if settings.lossy and cls is NATSQueue:
            return NATSMemoryQueue(settings)  # type: ignore[return-value]
        return cls(settings)

    def __init__(self, settings: NATSSettings) -> None:
        self.settings = settings
        self.names = Names(settings.prefix)
        self._connection = NATSConnection(settings)
        self._provisioning = Provisioning(self._connection, settings, self.names)
        self._failed = FailedStore(self._connection, self.names, self._push_again)
        self._records = NATSRecords(self._connection, self.names, settings)
        """The record store (heartbeats, succeeded records, results), a key-value bucket."""
        self._ledger = new_ledger()
        self.pauses = NATSPauses(self._connection, self.names)
        """The paused queues (`Pausable`), entries of a key-value bucket."""
        self._batch_bucket = KeyValueCache(
            self._connection, settings, f"{self.names.prefix}-batches", KEPT
        )
        self.batch_store = CacheBatches(self._batch_bucket, "", self.push_many)
        """Batches (`BatchStore`) in a bucket; callbacks deduplicated (docs/drivers/nats.md)."""
        self._known: set[str] = set()
        self._served: dict[str, _Served] = {}
        self._starting = asyncio.Lock()

    @property
    @override
    def lease(self) -> timedelta:
        return self.settings.lease

    @override
    def describe(self) -> str:
        return self.settings.describe()

    @property
    @override
    def reserves_behind_wait(self) -> bool:
        return True

    # -- provisioning (Provisionable) -------------------------------------------------

    async def provision(self, queues: Sequence[str]) -> list[str]:
        """Create or update the streams and each queue's two consumers."""
        done = await self._provisioning.provision(queues)
        done += await self._records.provision()
        done += await self._batch_bucket.provision()
        self._known.difference_update(queues)
        return done

    async def check_provisioned(self, queues: Sequence[str]) -> list[Finding]:
        return await self._provisioning.check(queues)

    async def _provisioned(self, queue: str) -> None:
        """`NotProvisioned` unless the queue's consumer exists (remembered once seen)."""
        if queue in self._known:
            return
        if await self._provisioning.consumer(self.names.consumer(queue)) is None:
            raise NotProvisioned(
                f"the NATS consumer {self.names.consumer(queue)!r} of stream "
                f"{self.names.stream!r} (queue {queue!r}) does not exist, and this queue never "
                "makes one on a push, because its stream's storage and its consumer's ack wait "
                f"and delivery limit are decisions: run `rainier-queue provision --queue {queue}`",
                queue=queue,
            )
        self._known.add(queue)

    # -- paused queues (Pausable, NATSPauses) -----------------------------------------

    async def pause(self, queue: str) -> bool:
        return await self.pauses.pause(queue)

    async def resume(self, queue: str) -> bool:
        return await self.pauses.resume(queue)

    async def paused(self, queues: Sequence[str]) -> frozenset[str]:
        return await self.pauses.paused(queues)

    # -- RecordStore: the records part (records.py) ------------------------------------

    async def put_record(self, key: str, value: bytes, ttl: timedelta) -> None:
        await self._records.put_record(key, value, ttl)

    async def get_record(self, key: str) -> bytes | None:
        return await self._records.get_record(key)

    async def forget_record(self, key: str) -> bool:
        return await self._records.forget_record(key)

    async def records(self, prefix: str) -> list[bytes]:
        return await self._records.records(prefix)

    # -- batches: counted in a key-value bucket (kvcache.py), held as `batch_store` ------

    @property
    def repeat_window(self) -> timedelta:  # DropsRepeatedCallbacks: the duplicate window
        return self.settings.duplicate_window

    # -- pushing ----------------------------------------------------------------------

    @override
    async def push(self, job: QueuedJob) -> str:
        refuse_ordering_keys(self, UNORDERED, (job,))
        await self._provisioned(job.queue)
        await self._publish(job, msg_id=job.id)
        return job.id

    async def _push_again(self, job: QueuedJob) -> str:
        """A retried failed job: pushed again under no message id (its own is spent)."""
        await self._provisioned(job.queue)
        await self._publish(job, msg_id=None)
        return job.id

    async def _publish(self, job: QueuedJob, *, msg_id: str | None) -> None:
        headers = {"Rq-Job": job.name.encode("ascii", "replace").decode()}
        if msg_id is not None:
            headers["Nats-Msg-Id"] = msg_id
        body = job.to_json().encode("utf-8", "backslashreplace")
        if job.available_at > utcnow():
            headers[DUE] = str(int(job.available_at.timestamp() * 1_000_000))
            await self._connection.publish(self.names.delayed(job.queue), body, headers)
        else:
            await self._connection.publish(self.names.jobs(job.queue), body, headers)

    @override
    async def push_many(self, jobs: Sequence[QueuedJob]) -> list[str]:
        """Publish them side by side and wait for every acknowledgement."""
        refuse_ordering_keys(self, UNORDERED, jobs)
        for queue in {job.queue for job in jobs}:
            await self._provisioned(queue)
        await asyncio.gather(*(self._publish(job, msg_id=job.id) for job in jobs))
        return [job.id for job in jobs]

    # -- reserving --------------------------------------------------------------------

    async def _serve(self, queue: str) -> _Served:
        """This worker's fetchers for `queue`, with its delay and max-deliveries movers started."""
        served = self._served.get(queue)
        if served is not None:
            return served
        await self._provisioned(queue)
        async with self._starting:
            if queue in self._served:
                return self._served[queue]
            names = self.names
            stream, consumer = names.stream, names.consumer(queue)
            served = _Served(
                Fetcher(self._connection, stream, consumer),
                Fetcher(self._connection, stream, names.delay_consumer(queue)),
                ExhaustedMover(
                    self._connection,
                    self._failed,
                    stream=stream,
                    consumer=consumer,
                    subject=names.jobs(queue),
                    queue=queue,
                    every=self.settings.sweep_every.total_seconds(),
                ),
            )
            served.lease = await self._adopt_lease(queue)
            await served.exhausted.listen()
            mover = DelayMover(self._connection, served.delays, names.jobs(queue))
            await mover.once()  # what fell due while no worker served the queue, first
            served.tasks = [
                asyncio.ensure_future(mover.run()),
                asyncio.ensure_future(served.exhausted.run()),
            ]
            self._served[queue] = served
            return served

    async def _adopt_lease(self, queue: str) -> timedelta:
        """Bring the consumer's ack wait to this worker's lease; the lease to fence at.

        The lease is the worker's setting on every driver, so a worker brings
        the server's timer to it rather than refusing to start; it says so,
        since workers of one queue with two leases would undo each other.
        """
        name = self.names.consumer(queue)
        info = await self._provisioning.consumer(name)
        lease = self.settings.lease
        if info is None:
            return lease
        have = info.config.ack_wait or 0.0
        if abs(have - lease.total_seconds()) > 1e-3:
            log.warning(
                "consumer %r had an ack wait of %gs; this worker's lease is %gs, so it sets "
                "the ack wait to that (run every worker of queue %r with one lease)",
                name,
                have,
                lease.total_seconds(),
                queue,
            )
            config = info.config
            config.ack_wait = lease.total_seconds()
            js = await self._connection.jetstream()
            async with translated(f"update the ack wait of consumer {name!r}"):
                await js.add_consumer(self.names.stream, config)
        return lease

    @override
    async def wait_for_work(self, queues: Sequence[str], timeout: timedelta) -> None:
        """Return when a job is published to one of `queues`, or after `timeout`.

        A plain subscription to the queues' jobs subjects: it sees each push
        (and each delayed job moved in), not a lease that lapsed or a retry,
        which the caller's next reserve finds anyway.
        """
        client = await self._connection.client()
        heard = asyncio.Event()

        async def on_message(_: Any) -> None:
            heard.set()

        subs = []
        async with translated("listen for new jobs"):
            for queue in queues:
                subs.append(await client.subscribe(self.names.jobs(queue), cb=on_message))
        try:
            await asyncio.wait_for(heard.wait(), timeout.total_seconds())
        except TimeoutError:
            pass
        finally:
            for sub in subs:
                try:
                    await sub.unsubscribe()
                except Exception:
                    break

    @override
    async def reserve(self, queue: str, *, limit: int = 1) -> list[Reservation]:
        if limit < 1:
            return []
        served = await self._serve(queue)
        first = await self._hand_out(queue, served, await self._take(queue, served, limit))
        return await toolkit.top_up(
            first,
            limit,
            lambda places: self._again(queue, served, places),
        )

    async def _again(self, queue: str, served: _Served, places: int) -> toolkit.Pass:
        return await self._hand_out(queue, served, await self._take(queue, served, places))

    async def _take(self, queue: str, served: _Served, limit: int) -> list[Arrival]:
        try:
            return await served.fetcher.take(limit)
        except NoAnswer:
            # 2.9 sends no status to a request that met only a message it just gave up
            # on (max_deliver); the consumer is asked for, so an outage or a consumer
            # that was deleted is still told apart from an empty queue.
            self._known.discard(queue)
            await self._provisioned(queue)
            return []

    @override
    async def wait_and_reserve(
        self, queue: str, timeout: timedelta, *, limit: int
    ) -> list[Reservation]:
        """Wait in one pull request on the server, which brings up to `limit` jobs at once."""
        served = await self._serve(queue)
        reserving = asyncio.ensure_future(self._wait_and_take(queue, served, timeout, limit))
        try:
            return await asyncio.shield(reserving)
        except asyncio.CancelledError:
            # The wait itself stops at once (a message that comes for it later is kept,
            # stamped, for the next reserve); jobs already taken are handed back.
            reserving.cancel()
            try:
                taken = await reserving
            except BaseException:
                taken = []
            await self.hand_back_unstarted(taken)
            raise

    async def _wait_and_take(
        self, queue: str, served: _Served, timeout: timedelta, limit: int
    ) -> list[Reservation]:
        got = await served.fetcher.wait(max(timeout.total_seconds(), 0.01), limit)
        reservations, _ = await self._hand_out(queue, served, got)
        return reservations

    async def _hand_out(self, queue: str, served: _Served, got: list[Arrival]) -> toolkit.Pass:
        out: list[Reservation] = []
        malformed = 0
        for arrival in got:
            msg = arrival.msg
            meta = msg.metadata
            delivery = Delivery(
                reply=msg.reply,
                stream_seq=meta.sequence.stream,
                delivered=meta.num_delivered,
                queue=queue,
            )
            token = new_token()
            deadline = self._ledger.hold(token, delivery, arrival.at, served.lease)
            left = deadline - time.monotonic()
            if left <= 0:
                self._ledger.done(token)  # it waited too long: the server hands it out again
                continue
            found = read_envelope(msg.data, field="data", queue=queue, delivered=meta.num_delivered)
            if isinstance(found, Malformed):
                malformed += 1
                self._ledger.done(token)
                where = f"queue {queue!r}: message {delivery.stream_seq} of {self.names.stream!r}"
                source = f"{self.names.stream}:{delivery.stream_seq}"
                await toolkit.quarantine(
                    log,
                    where,
                    found,
                    "the failed stream",
                    self._failed.record_malformed(found, queue=queue, source=source),
                )
                await self._send(delivery, TERMINATE, "remove an entry that is not a job")
                continue
            if found.available_at > utcnow():
                # Pushed as due by a clock ahead of this one: it waits with the delayed jobs.
                await self._set_aside(msg.data, found, delivery)
                self._ledger.done(token)
                continue
            out.append(
                Reservation(
                    job=found,
                    token=token,
                    lease_until=utcnow() + timedelta(seconds=left),
                    lease=timedelta(seconds=delivery.lease),
                    handle=delivery,
                )
            )
        return out, malformed

    async def _set_aside(self, data: bytes, job: QueuedJob, delivery: Delivery) -> None:
        """Move a job that is not due yet by this worker's clock to its delayed subject."""
        headers = {
            "Nats-Msg-Id": f"{job.id}:early:{delivery.stream_seq}",
            DUE: str(int(job.available_at.timestamp() * 1_000_000)),
        }
        await self._connection.publish(self.names.delayed(job.queue), data, headers)
        await self._send(delivery, ACK, f"set aside job {job.id}, which is not due yet")

    # -- settling ---------------------------------------------------------------------

    async def _send(self, delivery: Delivery, body: bytes, what: str) -> None:
        client = await self._connection.client()
        async with translated(what):
            await client.request(delivery.reply, body, timeout=SETTLE_TIMEOUT)

    @override
    async def acknowledge(self, reservation: Reservation) -> None:
        delivery = self._ledger.current(reservation.token, reservation.job.id)
        await self._send(delivery, ACK, f"acknowledge job {reservation.job.id}")
        self._ledger.done(reservation.token)

    @override
    async def acknowledge_many(self, reservations: Sequence[Reservation]) -> list[Exception | None]:
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
        delivery = self._ledger.current(reservation.token, reservation.job.id)
        job = reservation.job
        # Published again with its attempts, written first, then the delivery is
        # acknowledged. A nak would be one message fewer, but a nakked message counts
        # as a delivery in flight until the server hands it out again (so `size`
        # would miss it, a retry's backoff included), and a nak cannot give a
        # delivery back when the attempt is refunded.
        attempts = job.attempts if count_attempt else max(0, job.attempts - 1)
        await self._publish(
            job.with_changes(attempts=attempts, available_at=utcnow() + delay), msg_id=None
        )
        self._ledger.current(reservation.token, job.id)
        await self._send(delivery, ACK, f"release job {job.id}")
        self._ledger.done(reservation.token)

    @override
    async def renew(self, reservation: Reservation) -> None:
        delivery = self._ledger.current(reservation.token, reservation.job.id)
        sent = time.monotonic()
        await self._send(delivery, PROGRESS, f"renew the lease of job {reservation.job.id}")
        self._ledger.renewed(reservation.token, sent)

    @override
    async def fail(self, reservation: Reservation, error: str) -> None:
        """Copy the job to the failed stream, then `+TERM` it, which deletes it."""
        delivery = self._ledger.current(reservation.token, reservation.job.id)
        source = f"{self.names.stream}:{delivery.stream_seq}"
        await self._failed.record(reservation.job, error, source=source)
        self._ledger.current(reservation.token, reservation.job.id)
        await self._send(delivery, TERMINATE, f"remove failed job {reservation.job.id}")
        self._ledger.done(reservation.token)

    # -- the failed store (FailedJobStore) ----------------------------------------------

    async def failed_jobs(self, *, queue: str | None = None, limit: int = 100) -> list[FailedJob]:
        return await self._failed.listing(queue, limit)

    async def retry_failed(self, job_id: str) -> bool:
        return await self._failed.retry(job_id)

    async def forget_failed(self, job_id: str) -> bool:
        return await self._failed.forget(job_id)

    async def flush_failed(self, *, queue: str | None = None) -> int:
        return await self._failed.flush(queue)

    async def sweep(self, queue: str) -> int:
        """Move `queue`'s messages the server stopped delivering to the failed store now."""
        served = await self._serve(queue)
        return await served.exhausted.sweep()

    # -- size and clear -----------------------------------------------------------------

    async def counts(self, queue: str) -> QueueCounts:
        """`Countable`: the consumers' counts. A job waiting out a retry's backoff (a nak with
        a delay) is a delivery in flight to the server, so it counts as reserved."""
        js = await self._connection.jetstream()
        numbers: list[tuple[int, int]] = []
        for name in (self.names.consumer(queue), self.names.delay_consumer(queue)):
            try:
                async with translated(f"count the jobs of queue {queue!r}"):
                    info = await js.consumer_info(self.names.stream, name)
                numbers.append((info.num_pending or 0, info.num_ack_pending or 0))
            except jx.NotFoundError:
                numbers.append((0, 0))
        (waiting, reserved), (delayed, held_back) = numbers
        next_due = None
        if reserved:
            mine = [d.deadline for d in self._ledger.held(queue)]
            left = min(mine) - time.monotonic() if mine else self.lease.total_seconds()
            next_due = utcnow() + timedelta(seconds=left)
        return QueueCounts(
            waiting=waiting, delayed=delayed + held_back, reserved=reserved, next_due=next_due
        )

    @override
    async def size(self, queue: str) -> int:
        counts = await self.counts(queue)
        return counts.waiting + counts.delayed

    @override
    async def clear(self, queue: str) -> int:
        stream = self.names.stream
        return await self._connection.purge(
            stream, self.names.jobs(queue)
        ) + await self._connection.purge(stream, self.names.delayed(queue))

    # -- doctor (Diagnosable) ---------------------------------------------------------

    async def health_warnings(self) -> list[str]:
        """How jobs travel to the server, for `rainier-queue doctor`: in the clear to another
        machine, or over TLS whose certificate is not checked."""
        return self._connection.transport_warnings()

    # -- closing ------------------------------------------------------------------------

    @override
    async def aclose(self) -> None:
        served, self._served = list(self._served.values()), {}
        for one in served:
            await cancel_for_sure(one.tasks)
        for one in served:
            for arrival in one.fetcher.leftovers():  # came after their wait was given up
                try:
                    client = await self._connection.client()
                    await client.publish(arrival.msg.reply, nak(timedelta(0)))
                except Exception:
                    break
            await one.fetcher.aclose()
            await one.delays.aclose()
            await one.exhausted.aclose()
        await self._connection.aclose()


class NATSMemoryQueue(NATSQueue):
    """`storage=memory`: the stream lives in the server's memory, and a restart loses it."""

    capabilities: ClassVar[Capabilities] = Capabilities(
        survives_restart=False,
        shared_between_processes=True,
        may_lose_accepted_job=True,
        push_creates_resources=False,
        pausable=True,
        records=True,
        cancellable=True,
        batches=True,
        batch_callbacks_exactly_once=False,
    )


__all__ = ["NATSMemoryQueue", "NATSQueue"]
