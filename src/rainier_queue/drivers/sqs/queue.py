# SPDX-License-Identifier: MIT
"""`SQSQueue`: the Queue port over SQS queues (the package docstring says what it costs)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import replace
from datetime import timedelta
from typing import TYPE_CHECKING, Any, ClassVar, Self, cast

from typing_extensions import override

from ..._clock import utcnow
from ...envelope import QueuedJob
from ...errors import BrokerRejected, LeaseLost, PayloadError
from ...locks import Cache
from ...queue import (
    Capabilities,
    FailedJob,
    Finding,
    Queue,
    QueueCounts,
    Reservation,
    new_token,
)
from ..lock_store_batches import keeping_batches, lock_store_batches, open_lock_store
from ..unordered import refuse_ordering_keys
from .connection import QueueMissing, SQSConnection, code_of, not_provisioned
from .delays import DelayMover
from .failed import FailedStore
from .leases import Delivery, SQSLedger, visibility
from .messages import delay_of, entry, ordering_key, raw_entry
from .names import Names
from .provisioning import Queues
from .receiving import MOST, Receiver
from .settings import DEDUPLICATION_WINDOW, SQSSettings

if TYPE_CHECKING:
    from .. import DriverContext

log = logging.getLogger("rainier_queue.sqs")

BATCHES_IN_FLIGHT = 8
"""`SendMessageBatch` calls a `push_many` has on their way at once: enough to hide the round
trip, few enough that no call waits out its timeout behind the others."""
PURGE_FIX = (
    "SQS allows one PurgeQueue per queue every 60 seconds: wait a minute and clear again, or "
    "let the workers run the jobs"
)


UNORDERED = (
    "a standard SQS queue delivers its messages in no set order, to any worker; a FIFO queue "
    "(`fifo=true` in the URL) keeps each ordering key's jobs in order, as one message group"
)
"""Why standard SQS cannot keep an ordering key's order (`Capabilities.ordering_keys`)."""
GONE = "ReceiptHandleIsInvalid"
"""SQS's answer to a delete of a message that is no longer there (a `clear` took it)."""


class SQSQueue(Queue):
    """Jobs as messages on SQS queues: one work queue per queue name, one failed queue per
    connection."""

    name: ClassVar[str] = "sqs"
    idle_wait: ClassVar[str] = (
        "a long poll (`ReceiveMessage` with `WaitTimeSeconds`, the `wait` option, at most 20 s) "
        "that SQS answers as soon as a job arrives"
    )
    capabilities: ClassVar[Capabilities] = Capabilities(
        survives_restart=True,
        shared_between_processes=True,
        fifo_within_queue=False,
        raw_push=True,
        due_on_server_clock=True,
        push_creates_resources=False,
    )
    """Without a lock store: a connection given `locks` keeps batches too (`__init__`)."""

    OPTIONS: ClassVar[frozenset[str]] = SQSSettings.OPTIONS

    @classmethod
    def from_config(cls, url: str, options: Mapping[str, Any], context: DriverContext) -> Self:
        """`sqs://[key:secret@][host:port]/?region=...&prefix=...&fifo=...&lease=...`."""
        settings, _ = SQSSettings.read(url, options, who="the `sqs` driver")
        locks = open_lock_store(settings.locks, context, "sqs") if settings.locks else None
        return cls(settings, locks, owns_cache=locks is not None)

    def __new__(
        cls, settings: SQSSettings, locks: Cache | None = None, *, owns_cache: bool = False
    ) -> Self:
        """An `SQSFifoQueue` when `settings` say FIFO: its capabilities differ."""
        if settings.fifo and not issubclass(cls, SQSFifoQueue):
            return cast(Self, object.__new__(SQSFifoQueue))
        return object.__new__(cls)

    def __init__(
        self, settings: SQSSettings, locks: Cache | None = None, *, owns_cache: bool = False
    ) -> None:
        self.settings = settings
        self.names = Names(settings.prefix, fifo=settings.fifo, urls=settings.queue_urls)
        self._connection = SQSConnection(settings)
        self._queues = Queues(self._connection, settings, self.names)
        self._ledger = SQSLedger()
        self._failed = FailedStore(self._connection, self._queues, self._push_again)
        self._mover = DelayMover(self._connection, self._queues, self._failed)
        self._receiver = Receiver(
            self._connection, self._queues, self._ledger, self._failed, settings.lease, self._mover
        )
        self._locks, self._owns_locks = locks, owns_cache
        self.batch_store = lock_store_batches(
            locks, f"sqs-batch:{settings.prefix}:", self.push_many
        )
        """Batches (`HoldsBatchStore`), counted in the `locks` store; None without one."""
        if locks is not None:
            self.capabilities = keeping_batches(self.capabilities)  # type: ignore[misc]

    @property
    def repeat_window(self) -> timedelta | None:
        """`DropsRepeatedCallbacks`: a FIFO queue drops a callback sent again under its id
        within SQS's deduplication interval; a standard queue keeps every copy."""
        return DEDUPLICATION_WINDOW if self.names.fifo else None

    @property
    @override
    def lease(self) -> timedelta:
        return self.settings.lease

    @override
    def describe(self) -> str:
        return self.settings.describe()

    @property
    def api_calls(self) -> int:
        """SQS requests this queue has made (what SQS bills)."""
        return sum(self._connection.calls.values())

    @property
    @override
    def reserves_behind_wait(self) -> bool:
        return True

    # -- provisioning (Provisionable) -------------------------------------------------

    async def provision(self, queues: Sequence[str]) -> list[str]:
        """Create each queue's work and failed SQS queues, or bring their timeout to the lease."""
        return await self._queues.provision(queues)

    async def check_provisioned(self, queues: Sequence[str]) -> list[Finding]:
        return await self._queues.check(queues)

    # -- pushing ----------------------------------------------------------------------

    def _to_delay_queue(self, job: QueuedJob) -> bool:
        """A delayed job without an ordering key on a FIFO queue waits in its delay queue."""
        return (
            self._mover.has_delays(job.queue)
            and ordering_key(job) is None
            and delay_of(job) > timedelta(0)
        )

    async def _address(
        self, job: QueuedJob, dedup: str | None = None
    ) -> tuple[str, dict[str, Any]]:
        """Where `job` is sent (the queue's, or its delay queue's, URL) and the arguments."""
        limit = self.settings.max_message_size
        if self._to_delay_queue(job):
            url = await self._queues.delay_url(job.queue)
            assert url is not None
            return url, entry(job, fifo=False, max_size=limit, moved_dedup=dedup or job.id)
        url = await self._queues.url(job.queue)
        return url, entry(job, fifo=self.names.fifo, max_size=limit, dedup=dedup)

    async def _send(self, job: QueuedJob, *, dedup: str | None = None) -> None:
        url, args = await self._address(job, dedup)
        try:
            await self._connection.call(
                "send_message", f"push job {job.id}", write=True, QueueUrl=url, **args
            )
        except QueueMissing:
            self._queues.forget(job.queue)
            raise not_provisioned(job.queue, self.names.work(job.queue)) from None

    @override
    async def push(self, job: QueuedJob) -> str:
        if not self.names.fifo:
            refuse_ordering_keys(self, UNORDERED, (job,))
        await self._send(job)
        return job.id

    async def _push_again(self, job: QueuedJob) -> str:
        """A retried failed job: sent under a fresh deduplication id (its own is spent)."""
        await self._send(job, dedup=f"{job.id}-{new_token()}")
        return job.id

    @override
    async def push_raw(self, queue: str, body: str) -> None:
        """A bare body, for a consumer that is not this library (no delay, no attributes)."""
        size = len(body.encode("utf-8", "surrogatepass"))
        if size > self.settings.max_message_size:
            raise PayloadError(
                f"the raw body is {size} bytes, over the {self.settings.max_message_size} "
                "bytes an SQS message may hold here (`max_message_size`); nothing was sent"
            )
        url = await self._queues.url(queue)
        await self._connection.call(
            "send_message",
            f"push a raw body to queue {queue!r}",
            write=True,
            QueueUrl=url,
            **raw_entry(body, fifo=self.names.fifo),
        )

    @override
    async def push_many(self, jobs: Sequence[QueuedJob]) -> list[str]:
        """`SendMessageBatch`, ten a call (fewer when large), eight calls on their way at once;
        on a FIFO queue given a job with an ordering key, one SQS queue's calls go one after
        another, so that a key's jobs keep their order across calls."""
        if not self.names.fifo:
            refuse_ordering_keys(self, UNORDERED, jobs)
        limit = self.settings.max_message_size
        addressed: dict[str, list[tuple[QueuedJob, dict[str, Any]]]] = {}
        for job in jobs:
            url, args = await self._address(job)
            addressed.setdefault(url, []).append((job, args))
        chains: list[list[tuple[str, list[tuple[QueuedJob, dict[str, Any]]]]]] = []
        for url, items in addressed.items():
            batches: list[tuple[str, list[tuple[QueuedJob, dict[str, Any]]]]] = []
            batch: list[tuple[QueuedJob, dict[str, Any]]] = []
            size = 0
            for job, args in items:
                length = len(args["MessageBody"].encode("utf-8", "surrogatepass"))
                if batch and (len(batch) == MOST or size + length > limit):
                    batches.append((url, batch))
                    batch, size = [], 0
                batch.append((job, args))
                size += length
            if batch:
                batches.append((url, batch))
            if any(ordering_key(job) is not None for job, _ in items):
                chains.append(batches)  # in order, one call after another
            else:
                chains += [[one] for one in batches]
        in_flight = asyncio.Semaphore(BATCHES_IN_FLIGHT)

        async def send(chain: list[tuple[str, list[tuple[QueuedJob, dict[str, Any]]]]]) -> None:
            for url, batch in chain:
                async with in_flight:
                    await self._send_batch(url, batch)

        results = await asyncio.gather(*(send(chain) for chain in chains), return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                raise result
        return [job.id for job in jobs]

    async def _send_batch(self, url: str, batch: list[tuple[QueuedJob, dict[str, Any]]]) -> None:
        entries = [{"Id": str(i), **args} for i, (_, args) in enumerate(batch)]
        answer = await self._connection.call(
            "send_message_batch",
            f"push {len(batch)} jobs",
            write=True,
            QueueUrl=url,
            Entries=entries,
        )
        failed = answer.get("Failed", [])
        if failed:
            refused = ", ".join(
                f"{batch[int(f['Id'])][0].id} ({f.get('Code')}: {f.get('Message')})" for f in failed
            )
            raise BrokerRejected(
                f"SQS stored {len(batch) - len(failed)} of {len(batch)} jobs of one batch and "
                f"refused {refused}; push those again"
            )

    # -- reserving --------------------------------------------------------------------

    @override
    async def reserve(self, queue: str, *, limit: int = 1) -> list[Reservation]:
        return await self._receiver.reserve(queue, limit)

    @override
    async def wait_and_reserve(
        self, queue: str, timeout: timedelta, *, limit: int
    ) -> list[Reservation]:
        """One long poll on SQS (`WaitTimeSeconds`); cancelled, it returns at once and the poll's
        catch is kept for the next reserve (receiving.py)."""
        return await self._receiver.wait_and_reserve(queue, timeout, limit, asyncio.sleep)

    @override
    async def wait_for_work(self, queues: Sequence[str], timeout: timedelta) -> None:
        """Long polls on the queues; a job one brings is kept for the next reserve."""
        await self._receiver.wait_for_work(queues, timeout)

    # -- settling ---------------------------------------------------------------------

    def _current(self, reservation: Reservation) -> Delivery:
        return self._ledger.current(reservation.token, reservation.job.id)

    @override
    async def acknowledge(self, reservation: Reservation) -> None:
        try:
            delivery = self._current(reservation)
            await self._delete(delivery, f"acknowledge job {reservation.job.id}")
            self._ledger.done(reservation.token)
        finally:
            self._receiver.settled(reservation)

    async def _delete(self, delivery: Delivery, what: str) -> None:
        """Delete a delivery's message; one that is no longer there (a `clear` took it while
        its lease held: the fencing sends nothing later) is gone, as asked."""
        try:
            await self._connection.call(
                "delete_message", what, QueueUrl=delivery.url, ReceiptHandle=delivery.receipt
            )
        except BrokerRejected as exc:
            cause = exc.__cause__
            if cause is None or GONE not in code_of(cause):
                raise
            log.info("%s: its message was no longer on SQS (cleared)", what)

    @override
    async def acknowledge_many(self, reservations: Sequence[Reservation]) -> list[Exception | None]:
        """`DeleteMessageBatch`, ten a call, the calls side by side; a stale one is `LeaseLost`."""
        for reservation in reservations:
            self._receiver.settled(reservation)
        results: list[Exception | None] = [None] * len(reservations)
        by_url: dict[str, list[tuple[int, Delivery]]] = {}
        for i, reservation in enumerate(reservations):
            try:
                delivery = self._current(reservation)
            except LeaseLost as exc:
                results[i] = exc
                continue
            by_url.setdefault(delivery.url, []).append((i, delivery))
        calls = [
            (url, items[start : start + MOST])
            for url, items in by_url.items()
            for start in range(0, len(items), MOST)
        ]
        outcomes = await asyncio.gather(
            *(self._delete_batch(url, items) for url, items in calls), return_exceptions=True
        )
        for (_, items), outcome in zip(calls, outcomes, strict=True):
            for i, _ in items:
                error: Exception | None
                if isinstance(outcome, Exception):
                    error = outcome
                elif isinstance(outcome, BaseException):
                    raise outcome
                else:
                    error = outcome.get(i)
                results[i] = error
                if error is None:
                    self._ledger.done(reservations[i].token)
        return results

    async def _delete_batch(
        self, url: str, items: list[tuple[int, Delivery]]
    ) -> dict[int, Exception]:
        answer = await self._connection.call(
            "delete_message_batch",
            f"acknowledge {len(items)} jobs",
            QueueUrl=url,
            Entries=[{"Id": str(i), "ReceiptHandle": d.receipt} for i, d in items],
        )
        return {
            int(f["Id"]): BrokerRejected(
                f"SQS refused to delete a message: {f.get('Code')}: {f.get('Message')}"
            )
            for f in answer.get("Failed", [])
            if GONE not in str(f.get("Code"))  # no longer there: gone, as asked
        }

    @override
    async def release(
        self,
        reservation: Reservation,
        *,
        delay: timedelta = timedelta(0),
        count_attempt: bool = True,
    ) -> None:
        """Due now and counted: the message is made visible again (one call). Otherwise it is
        sent again (with its delay, or with the attempt given back) and then deleted, so that
        `size` counts it as waiting or delayed, which a hidden message would not be.

        On a FIFO queue a job without an ordering key released with a delay goes to the
        queue's delay queue (delays.py). A job with one keeps its key's order: due now, it is
        made visible again (one call) even when its attempt is given back, so that it keeps
        its place at the head of its message group (SQS counted the delivery); with a delay,
        it is sent again to the back of its group, carrying its delay."""
        try:
            await self._release(reservation, delay, count_attempt=count_attempt)
        finally:
            self._receiver.settled(reservation)

    async def _release(
        self, reservation: Reservation, delay: timedelta, *, count_attempt: bool
    ) -> None:
        delivery = self._current(reservation)
        job = reservation.job
        keyed = self.names.fifo and ordering_key(job) is not None
        if delay <= timedelta(0) and (count_attempt or keyed):
            await self._change_visibility(delivery, 0, f"release job {job.id}")
            self._ledger.done(reservation.token)
            return
        attempts = job.attempts if count_attempt else max(0, job.attempts - 1)
        again = job.with_changes(attempts=attempts, available_at=utcnow() + delay)
        await self._send(again, dedup=f"{job.id}-{reservation.token}")
        self._current(reservation)
        await self._delete(delivery, f"release job {job.id}")
        self._ledger.done(reservation.token)

    async def _change_visibility(self, delivery: Delivery, seconds: int, what: str) -> None:
        try:
            await self._connection.call(
                "change_message_visibility",
                what,
                QueueUrl=delivery.url,
                ReceiptHandle=delivery.receipt,
                VisibilityTimeout=seconds,
            )
        except BrokerRejected as exc:
            cause = exc.__cause__
            if cause is not None and "ReceiptHandle" in code_of(cause):
                raise LeaseLost(f"SQS no longer takes this delivery's receipt: {exc}") from exc
            raise

    @override
    async def renew(self, reservation: Reservation) -> None:
        """`ChangeMessageVisibility` to the lease from now; `LeaseLost` past SQS's 12 hours."""
        delivery = self._ledger.check_renewable(reservation.token, reservation.job.id)
        sent = time.monotonic()
        seconds = visibility(self.settings.lease)
        await self._change_visibility(
            delivery, seconds, f"renew the lease of job {reservation.job.id}"
        )
        self._ledger.renewed(reservation.token, sent)

    @override
    async def fail(self, reservation: Reservation, error: str) -> None:
        """The record goes to the failed queue first, then the message is deleted."""
        try:
            delivery = self._current(reservation)
            await self._failed.record(reservation.job, error)
            self._current(reservation)
            await self._delete(delivery, f"remove failed job {reservation.job.id}")
            self._ledger.done(reservation.token)
        finally:
            self._receiver.settled(reservation)

    # -- the failed store (FailedJobStore) ----------------------------------------------

    async def failed_jobs(self, *, queue: str | None = None, limit: int = 100) -> list[FailedJob]:
        return await self._failed.listing(queue, limit)

    async def retry_failed(self, job_id: str) -> bool:
        return await self._failed.retry(job_id)

    async def forget_failed(self, job_id: str) -> bool:
        return await self._failed.forget(job_id)

    async def flush_failed(self, *, queue: str | None = None) -> int:
        return await self._failed.flush(queue)

    # -- size and clear -----------------------------------------------------------------

    async def counts(self, queue: str) -> QueueCounts:
        """`Countable`: SQS's approximate counts (visible, delayed, in flight). A job whose
        carried delay hid it after an early receive counts as in flight. On a FIFO queue the
        delay queue's delayed and in-flight messages (hidden until due, or being moved) count
        as delayed, and its visible ones (due, not moved yet) as waiting."""
        waiting, delayed, reserved = await self._count(queue, self._queues.url)
        if self._mover.has_delays(queue):
            due, later, moving = await self._count(queue, self._queues.delay_url)
            waiting, delayed = waiting + due, delayed + later + moving
        # Received here by a poll whose wait was given up, kept for the next reserve: SQS
        # counts them in flight, but they wait, due now (a draining worker that took them
        # for jobs running elsewhere stopped and handed them back unrun).
        unstarted = self._receiver.unstarted(queue)
        moved = min(len(unstarted), reserved)
        waiting, reserved = waiting + moved, reserved - moved
        next_due = None
        if reserved and self._receiver.polling(queue):
            next_due = utcnow()  # what SQS counts in flight may be that poll's, on its way
        elif reserved:
            kept = {id(d) for d in unstarted}
            mine = [d.deadline for d in self._ledger.held(queue) if id(d) not in kept]
            left = min(mine) - time.monotonic() if mine else self.lease.total_seconds()
            next_due = utcnow() + timedelta(seconds=left)
        return QueueCounts(waiting=waiting, delayed=delayed, reserved=reserved, next_due=next_due)

    async def _count(
        self, queue: str, url_of: Callable[[str], Awaitable[str | None]]
    ) -> tuple[int, int, int]:
        """One SQS queue's visible, delayed and in-flight counts (none where it is missing)."""
        try:
            url = await url_of(queue)
        except BrokerRejected as exc:
            if getattr(exc, "queue", None) == queue:
                return 0, 0, 0
            raise
        if url is None:
            return 0, 0, 0
        answer = await self._connection.call(
            "get_queue_attributes",
            f"count the jobs of queue {queue!r}",
            QueueUrl=url,
            AttributeNames=[
                "ApproximateNumberOfMessages",
                "ApproximateNumberOfMessagesDelayed",
                "ApproximateNumberOfMessagesNotVisible",
            ],
        )
        got = answer.get("Attributes", {})
        return (
            int(got.get("ApproximateNumberOfMessages", 0)),
            int(got.get("ApproximateNumberOfMessagesDelayed", 0)),
            int(got.get("ApproximateNumberOfMessagesNotVisible", 0)),
        )

    @override
    async def size(self, queue: str) -> int:
        """SQS's approximate count of visible and delayed messages."""
        counts = await self.counts(queue)
        return counts.waiting + counts.delayed

    @override
    async def clear(self, queue: str) -> int:
        """`PurgeQueue` (once per 60 s per queue, SQS's rule) of the queue and, on a FIFO
        queue, of its delay queue, each only when it holds something; the approximate count
        before. Jobs received here and not handed out are forgotten with them."""
        before = await self.size(queue)
        if before == 0:
            return 0
        if sum(await self._count(queue, self._queues.delay_url)):  # none where missing
            delay_url = await self._queues.delay_url(queue)
            assert delay_url is not None
            await self._purge(queue, delay_url)
        if sum(await self._count(queue, self._queues.url)):
            await self._purge(queue, await self._queues.url(queue))
        self._receiver.drop(queue)
        return before

    async def _purge(self, queue: str, url: str) -> None:
        try:
            await self._connection.call("purge_queue", f"clear queue {queue!r}", QueueUrl=url)
        except BrokerRejected as exc:
            cause = exc.__cause__
            if cause is not None and "PurgeQueueInProgress" in code_of(cause):
                raise BrokerRejected(
                    f"queue {queue!r} was cleared less than a minute ago: {PURGE_FIX}"
                ) from exc
            raise

    # -- doctor (Diagnosable) ---------------------------------------------------------

    async def health_warnings(self) -> list[str]:
        """How jobs travel to SQS, for `rainier-queue doctor`: in the clear to another
        machine, or over HTTPS whose certificate is not checked."""
        return self._connection.transport_warnings()

    # -- closing ------------------------------------------------------------------------

    @override
    async def on_worker_stop(self) -> None:
        """Hand back what a long poll received after its wait was given up."""
        left = await self._receiver.settle_polls()
        await self.hand_back_unstarted(left)

    @override
    async def aclose(self) -> None:
        try:
            left = await self._receiver.settle_polls()
            await self.hand_back_unstarted(left)
        finally:
            await self._connection.aclose()
            if self._locks is not None and self._owns_locks:
                await self._locks.aclose()


class SQSFifoQueue(SQSQueue):
    """`fifo=true`: FIFO queues, whose message groups keep each ordering key's jobs in order
    (a retry with a backoff is sent again, to the back of its group; each queue's groups are
    its own)."""

    capabilities: ClassVar[Capabilities] = replace(SQSQueue.capabilities, ordering_keys=True)


__all__ = ["SQSFifoQueue", "SQSQueue"]
