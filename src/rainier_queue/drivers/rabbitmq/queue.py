# SPDX-License-Identifier: MIT
"""`RabbitMQQueue`: the Queue port over quorum queues (see the package docstring for the costs)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import replace
from datetime import timedelta
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Self

from aiormq.abc import DeliveredMessage
from typing_extensions import override

from ..._clock import utcnow
from ...envelope import QueuedJob
from ...envelope.reading import Malformed, read_envelope
from ...errors import BrokerRejected, BrokerUnavailable, LeaseLost, NotProvisioned
from ...locks import Cache
from ...queue import (
    Capabilities,
    FailedJob,
    Finding,
    Queue,
    Reservation,
    new_token,
)
from .. import malformed, tls
from ..lock_store_batches import keeping_batches, lock_store_batches, open_lock_store
from ..unordered import refuse_ordering_keys
from .connection import AMQPClient, Missing, Unroutable, shielded
from .consuming import Consumer
from .failed import FailedStore
from .handing_back import give_back
from .messages import DUE_SLACK, deliveries, due_in, properties
from .names import AMQPDelivery, tier_queue, too_long, work_queue
from .settings import OPTIONS, RabbitMQSettings
from .settles import LostSettles
from .topology import CLASSIC_COSTS, Topology

if TYPE_CHECKING:
    from .. import DriverContext

log = logging.getLogger("rainier_queue.rabbitmq")

Fill = Literal["up to limit", "if none", "never"]
"""How many jobs a reserve takes with `basic.get` beyond what the broker pushed here."""
UP_TO_LIMIT: Fill = "up to limit"
"""As many as it asked for: a reserve that does not consume."""
IF_NONE: Fill = "if none"
"""One when nothing was pushed: a worker's reserve, which learns whether the queue is empty."""
NEVER: Fill = "never"
"""None: a wait that the broker's push ended."""


UNORDERED = (
    "a queue delivers to every consumer at once, and a retry with a backoff goes round "
    "through a delay queue behind the rest, so nothing holds a key's later jobs behind an "
    "earlier one"
)
"""Why RabbitMQ cannot keep an ordering key's order (`Capabilities.ordering_keys`)."""


class RabbitMQQueue(Queue):
    """Jobs on a quorum queue delays on TTL tiers, failures on a dead letter queue."""

    name: ClassVar[str] = "rabbitmq"
    idle_wait: ClassVar[str] = "a consumer the server delivers each job to as it arrives"
    capabilities: ClassVar[Capabilities] = Capabilities(
        survives_restart=True,
        shared_between_processes=True,
        renews_leases=False,
        reclaims_lapsed_leases=False,
        raw_push=True,
        push_creates_resources=False,
        due_on_server_clock=True,
    )
    """Without a lock store: a connection given `locks` keeps batches too (`__init__`)."""

    OPTIONS: ClassVar[frozenset[str]] = OPTIONS

    @classmethod
    def from_config(cls, url: str, options: Mapping[str, Any], context: DriverContext) -> Self:
        """`amqp://user:password@host:5672/vhost?prefix=...&delays=...&delivery_limit=...`."""
        settings, _ = RabbitMQSettings.read(url, options, who="the `rabbitmq` driver")
        locks = open_lock_store(settings.locks, context, "rabbitmq") if settings.locks else None
        return cls(settings, locks, owns_cache=locks is not None)

    def __init__(
        self, settings: RabbitMQSettings, locks: Cache | None = None, *, owns_cache: bool = False
    ) -> None:
        self.settings = settings
        self._client = AMQPClient(settings)
        self._lost = LostSettles()
        self._consumer = Consumer(self._client, self._lost)
        self._failed = FailedStore(self._client, settings.prefix)
        self._topology = Topology(self._client, settings)
        self._known: set[str] = set()
        """Work queues seen to exist, so a reserve looks each up once."""
        self._serving = False
        """Whether a worker reserves from this object again and again (`on_worker_start`)."""
        self._locks, self._owns_locks = locks, owns_cache
        prefix = f"rabbitmq-batch:{settings.vhost}:{settings.prefix}:"
        self.batch_store = lock_store_batches(locks, prefix, self.push_many)
        """Batches (`HoldsBatchStore`), counted in the `locks` store; None without one."""
        if locks is not None:
            self.capabilities = keeping_batches(self.capabilities)  # type: ignore[misc]
        if settings.classic:  # a delayed job crosses to its work queue at most once
            self.capabilities = replace(self.capabilities, may_lose_accepted_job=True)  # type: ignore[misc]

    @property
    @override
    def lease(self) -> timedelta | None:
        """The server's `consumer_timeout` as the connection's `lease` says it is: the longest a
        job may be held. It cannot be renewed, and what the server does when it passes takes
        the whole channel (see the package docstring on leases)."""
        return self.settings.lease

    @override
    def describe(self) -> str:
        return self.settings.describe()

    @property
    @override
    def reserves_behind_wait(self) -> bool:
        """The broker pushes jobs in; a wait ends with them already here."""
        return True

    # -- names ----------------------------------------------------------------------

    def work_queue_for(self, queue: str) -> str:
        """The broker's name for `queue`'s work queue (`provision` declares it)."""
        name = work_queue(self.settings.prefix, queue)
        if too_long(tier_queue(self.settings.prefix, queue, max(self.settings.delays))):
            raise BrokerRejected(
                f"the queue name {queue[:40]!r}... is too long for RabbitMQ once the prefix "
                "and a delay tier are added (255 bytes at most); use a shorter name"
            )
        return name

    def _not_provisioned(self, queue: str, name: str) -> NotProvisioned:
        return NotProvisioned(
            f"the RabbitMQ queue {name!r} (queue {queue!r}) does not exist, and this driver "
            "never declares one on a push, because a queue's type, delivery limit and "
            f"dead-letter target cannot change later: run `rainier-queue provision --queue "
            f"{queue}` (it declares the work queue, its delay tiers and the failed queue)",
            queue=queue,
        )

    async def _existing(self, queue: str) -> str:
        """`queue`'s work queue, looked up on the broker the first time only."""
        name = self.work_queue_for(queue)
        if name not in self._known:
            # Finished and remembered even when the caller is cancelled meanwhile (a
            # worker's first idle wait often is), so the next call does not ask again.
            await shielded(self._look_up(queue, name))
        return name

    async def _look_up(self, queue: str, name: str) -> None:
        try:
            await self._client.declare(name)
        except Missing:
            raise self._not_provisioned(queue, name) from None
        self._known.add(name)

    # -- provisioning (Provisionable) -----------------------------------------------

    async def provision(self, queues: Sequence[str]) -> list[str]:
        """Declare each queue's work queue and delay tiers, and the failed queue."""
        for queue in queues:
            self.work_queue_for(queue)
        return await self._topology.provision(queues)

    async def check_provisioned(self, queues: Sequence[str]) -> list[Finding]:
        """Queues missing, or declared with another type, delivery limit or TTL."""
        return await self._topology.check(queues)

    # -- pushing ---------------------------------------------------------------------

    def _route(self, queue: str, left: timedelta) -> tuple[str, int | None]:
        """Where a job with `left` of its delay to go goes now, and what it has left after.

        Due: its work queue. Otherwise the longest tier not past the time
        left, and the rest in the `x-rq-due-in` header for the next round, so
        a job is never early, and late by at most the shortest tier; one due
        sooner than the shortest tier waits that long.
        """
        if left <= DUE_SLACK:
            return self.work_queue_for(queue), None
        tiers = self.settings.delays
        fitting = [tier for tier in tiers if tier <= left]
        tier = fitting[-1] if fitting else tiers[0]
        rest = max(0, round((left - tier).total_seconds() * 1000))
        return tier_queue(self.settings.prefix, queue, tier), rest

    async def _publish(
        self, job: QueuedJob, body: bytes | None = None, *, left: timedelta | None = None
    ) -> None:
        """Publish `job` (as `body`, when given) due in `left`, or when its `available_at` says
        by this process's clock: the one moment a producer's clock is read."""
        route, rest = self._route(job.queue, job.available_at - utcnow() if left is None else left)
        if rest is not None:
            await self._existing(job.queue)  # a tier takes anything; is the queue there?
        try:
            await self._client.publish(
                route, body or job.to_json().encode(), properties(job.id, rest)
            )
        except Unroutable:
            raise self._not_provisioned(job.queue, route) from None

    @override
    async def push(self, job: QueuedJob) -> str:
        refuse_ordering_keys(self, UNORDERED, (job,))
        await self._publish(job)
        return job.id

    @override
    async def push_many(self, jobs: Sequence[QueuedJob]) -> list[str]:
        """Every publish sent before any confirm is awaited: one round trip for the batch."""
        refuse_ordering_keys(self, UNORDERED, jobs)
        now = utcnow()
        routes = [self._route(job.queue, job.available_at - now) for job in jobs]
        delayed = zip(jobs, routes, strict=True)
        for queue in {job.queue for job, (_, rest) in delayed if rest is not None}:
            await self._existing(queue)  # a tier takes anything; is the queue there?
        outcomes = await self._client.publish_many(
            [
                (route, job.to_json().encode(), properties(job.id, rest))
                for job, (route, rest) in zip(jobs, routes, strict=True)
            ]
        )
        for job, (route, _), outcome in zip(jobs, routes, outcomes, strict=True):
            if isinstance(outcome, Unroutable):
                raise self._not_provisioned(job.queue, route) from None
            if outcome is not None:
                raise outcome
        return [job.id for job in jobs]

    @override
    async def push_raw(self, queue: str, body: str) -> None:
        """Publish `body` as it is; this library's workers fail it as not a job."""
        name = self.work_queue_for(queue)
        try:
            await self._client.publish(name, body.encode(), properties(new_token()))
        except Unroutable:
            raise self._not_provisioned(queue, name) from None

    # -- reserving -------------------------------------------------------------------

    @override
    def on_worker_start(self) -> None:
        """A worker consumes: its reserves take what the broker pushed (see `reserve`)."""
        self._serving = True

    @override
    async def reserve(self, queue: str, *, limit: int = 1) -> list[Reservation]:
        """What the broker pushed here already; the rest with `basic.get` (consuming.py).

        A worker's reserve (after `on_worker_start`) consumes instead, its window
        the jobs it holds plus the `limit` it asks for, and takes what was pushed:
        one `basic.get` only when nothing was, so an empty answer means the queue
        had nothing ready. Asking the broker for each job, one round trip a job,
        held a busy worker to a few hundred jobs a second.
        """
        if limit < 1:
            return []
        self._consumer.raise_if_lost()
        name = await self._existing(queue)
        if self._serving:
            await self._consumer.subscribe(name, limit)
            return await self._take_all(queue, name, limit, fill=IF_NONE)
        return await self._take_all(queue, name, limit, fill=UP_TO_LIMIT)

    @override
    async def wait_and_reserve(
        self, queue: str, timeout: timedelta, *, limit: int
    ) -> list[Reservation]:
        """Subscribe with room for `limit` jobs, wait for the broker to push one, take them.

        Cancelled once the jobs are being taken, the taking finishes (reading
        a job may republish it to its delay tier, which must not be cut in
        two) and what it took goes back in front of the buffer, unsettled and
        uncounted, for the next call.
        """
        self._consumer.raise_if_lost()
        name = await self._existing(queue)
        await self._consumer.subscribe(name, limit)
        await self._consumer.wait([name], timeout.total_seconds())
        taking = asyncio.ensure_future(self._take_all(queue, name, limit, fill=NEVER))
        try:
            return await asyncio.shield(taking)
        except asyncio.CancelledError:
            got = await _taken(taking)
            self._consumer.put_back(self._consumer.unhold([r.token for r in got]))
            raise

    @override
    async def wait_for_work(self, queues: Sequence[str], timeout: timedelta) -> None:
        self._consumer.raise_if_lost()
        names = [await self._existing(queue) for queue in queues]
        for name in names:
            await self._consumer.subscribe(name, 1)
        await self._consumer.wait(names, timeout.total_seconds())

    async def _take_all(
        self, queue: str, name: str, limit: int, *, fill: Fill
    ) -> list[Reservation]:
        """Up to `limit` jobs, more taken for the places messages that are not jobs took.

        A failure (or a cancel) part way puts back what was taken, so no
        delivery is left unsettled here with nobody holding it.
        """
        taken: list[Reservation] = []

        async def take(places: int) -> tuple[list[Reservation], int]:
            got = await self._take(queue, name, places, fill=fill)
            taken.extend(got[0])
            return got

        try:
            return await malformed.top_up(await take(limit), limit, take)
        except BaseException:
            self._consumer.put_back(self._consumer.unhold([r.token for r in taken]))
            raise

    async def _take(
        self, queue: str, name: str, limit: int, *, fill: Fill
    ) -> tuple[list[Reservation], int]:
        got = self._consumer.take(name, limit)
        out: list[Reservation] = []
        skipped = read = 0
        try:
            wanted = limit - len(got) if fill == UP_TO_LIMIT else 0 if got or fill == NEVER else 1
            if wanted > 0:
                await self._consumer.fetch(name, wanted)
                got += self._consumer.take(name, wanted)
            for message, delivery in got:
                reservation = await self._read(queue, message, delivery)
                read += 1
                if reservation is None:
                    skipped += 1
                else:
                    out.append(reservation)
        except BaseException:
            # What was read into reservations, and what was not read yet, goes back.
            self._consumer.put_back(self._consumer.unhold([r.token for r in out]) + got[read:])
            raise
        return out, skipped

    async def _read(
        self, queue: str, message: DeliveredMessage, delivery: AMQPDelivery
    ) -> Reservation | None:
        """The delivery as a reservation; None for one that is not a job or not due yet."""
        before = deliveries(message, classic=self.settings.classic)
        read = read_envelope(message.body, queue=queue, delivered=before + 1)
        if isinstance(read, Malformed):
            where = f"queue {queue!r}: message {delivery.tag}"
            job_id = read.id or new_token()
            await malformed.quarantine(
                log,
                where,
                read,
                "the failed queue",
                self._failed.record(read.as_job(queue=queue, job_id=job_id), read.error),
            )
            await self._consumer.ack([delivery.tag])
            return None
        if self._lost.claim(read.id):
            # Finished here while its channel was down: settle it now, never run it twice.
            log.info("job %s came back after it finished here; acknowledged, not run", read.id)
            await self._consumer.ack([delivery.tag])
            return None
        left = due_in(message)
        if left > DUE_SLACK or (self.settings.classic and before):
            # Out of a tier with more of its delay to go, or back from a classic queue that
            # counts nothing: round again, with the deliveries it had folded in, since the
            # copy starts from none (a crash-looping job so reaches its last attempt).
            again = read.with_changes(attempts=read.attempts - 1)
            await self._publish(again, message.body if before == 0 else None, left=left)
            await self._consumer.ack([delivery.tag])
            return None
        token = new_token()
        self._consumer.hold(token, delivery, message)
        return Reservation(job=read, token=token, lease_until=None, lease=None, handle=delivery)

    # -- settling --------------------------------------------------------------------

    def _current(self, reservation: Reservation) -> AMQPDelivery:
        return self._consumer.current(reservation.token, reservation.handle, reservation.job.id)

    def _orphaned(self, reservation: Reservation) -> bool:
        """Whether the channel that delivered `reservation` has closed since."""
        handle = reservation.handle
        return isinstance(handle, AMQPDelivery) and not self._consumer.open_on(handle.channel)

    async def _settled(
        self, reservations: Sequence[Reservation], tags: list[int], *, finished: bool = False
    ) -> None:
        """Acknowledge `tags`; a channel that closed meanwhile makes it `LeaseLost`, and each
        job is remembered, to be settled when the broker hands it back (settles.py).

        `finished` jobs (`acknowledge`) do not wait: their acknowledgement goes with the
        next flush, and a channel that closes before it remembers them all the same
        (consuming.py).
        """
        self._consumer.pace.settled(len(reservations))
        try:
            if finished:
                self._consumer.acknowledge_finished(tags, [r.job.id for r in reservations])
            else:
                await self._consumer.ack(tags)
        except (BrokerUnavailable, LeaseLost) as exc:
            for reservation in reservations:
                self._lost.keep(reservation.job.id)
            raise LeaseLost(
                "the channel that delivered these jobs closed before they were acknowledged; "
                "RabbitMQ hands them out again, and this worker acknowledges any it gets back"
            ) from exc
        finally:
            for reservation in reservations:
                self._consumer.release_hold(reservation.token)

    def _lost_with_channel(self, reservation: Reservation, exc: LeaseLost) -> LeaseLost:
        if self._orphaned(reservation):
            self._lost.keep(reservation.job.id)
        return exc

    @override
    async def acknowledge(self, reservation: Reservation) -> None:
        try:
            delivery = self._current(reservation)
        except LeaseLost as exc:
            raise self._lost_with_channel(reservation, exc) from None
        await self._settled([reservation], [delivery.tag], finished=True)

    @override
    async def acknowledge_many(self, reservations: Sequence[Reservation]) -> list[Exception | None]:
        """One frame for the longest run of tags nothing else sits between (`multiple=True`)."""
        results: list[Exception | None] = [None] * len(reservations)
        live: list[tuple[int, Reservation, AMQPDelivery]] = []
        for at, reservation in enumerate(reservations):
            try:
                live.append((at, reservation, self._current(reservation)))
            except LeaseLost as exc:
                results[at] = self._lost_with_channel(reservation, exc)
        if live:
            try:
                await self._settled(
                    [r for _, r, _ in live], [d.tag for _, _, d in live], finished=True
                )
            except LeaseLost as exc:
                for at, _, _ in live:
                    results[at] = exc
        return results

    @override
    async def release(
        self,
        reservation: Reservation,
        *,
        delay: timedelta = timedelta(0),
        count_attempt: bool = True,
    ) -> None:
        """A copy to the back of the work queue (or to its delay tier), confirmed, carrying the
        attempts so far (this one given back when it does not count), then the delivery
        acknowledged: a crash between the two leaves the job twice, never nowhere.

        Not a requeue (`basic.reject`): with a delivery limit RabbitMQ puts a
        requeued job back at the head, to be handed out again at once, and
        says nothing when it has done so, so a count right after would miss it.
        """
        delivery = self._current(reservation)
        job = reservation.job
        attempts = job.attempts if count_attempt else max(0, job.attempts - 1)
        await self._publish(
            job.with_changes(attempts=attempts, available_at=utcnow() + delay), left=delay
        )
        await self._settled([reservation], [delivery.tag])

    @override
    async def renew(self, reservation: Reservation) -> None:
        """Nothing to extend (AMQP 0-9-1 has no such thing); `LeaseLost` if no longer held."""
        self._current(reservation)

    @override
    async def fail(self, reservation: Reservation, error: str) -> None:
        """Publish the job to the failed queue with `error`, confirmed, then acknowledge it."""
        delivery = self._current(reservation)
        await self._failed.record(reservation.job, error)
        await self._settled([reservation], [delivery.tag])

    # -- the failed store (FailedJobStore) ------------------------------------------------

    async def failed_jobs(self, *, queue: str | None = None, limit: int = 100) -> list[FailedJob]:
        """Failed jobs of `queue` (or of every queue), newest first (failed.py says how)."""
        return await self._failed.newest(queue, limit)

    async def retry_failed(self, job_id: str) -> bool:
        """Put a failed job back on its queue, due now, attempts at zero, its unique key dropped."""
        job = await self._failed.take_out(job_id)
        if job is None:
            return False
        await self._publish(job.with_changes(attempts=0, available_at=utcnow(), unique_key=None))
        return True

    async def forget_failed(self, job_id: str) -> bool:
        return await self._failed.take_out(job_id) is not None

    async def flush_failed(self, *, queue: str | None = None) -> int:
        return await self._failed.flush(queue)

    # -- size and clear --------------------------------------------------------------
    # Both go in the order a job travels (a tier dead-letters into the work queue, which
    # pushes to this object): a job that moves on meanwhile is met again downstream, not
    # missed, but for the server's own hand-over (docs/drivers/rabbitmq.md, "Size").

    async def _on_tiers(self, queue: str, call: Callable[[str], Awaitable[int]]) -> int:
        """The sum of `call` on each of `queue`'s delay tiers that exists."""
        total = 0
        for tier in self.settings.delays:
            with contextlib.suppress(Missing):
                total += await call(tier_queue(self.settings.prefix, queue, tier))
        return total

    @override
    async def size(self, queue: str) -> int:
        """Ready jobs in the delay tiers and the work queue, and those pushed here, not taken."""
        name = await self._existing(queue)
        tiers = await self._on_tiers(queue, self._client.declare)
        return tiers + await self._client.declare(name) + self._consumer.buffered(name)

    @override
    async def clear(self, queue: str) -> int:
        """Purge the delay tiers and the work queue, and drop what was pushed here, not taken."""
        name = await self._existing(queue)
        cleared = await self._on_tiers(queue, self._client.purge) + await self._client.purge(name)
        dropped = self._consumer.take(name, 1 << 30)
        if dropped:
            await self._consumer.ack([delivery.tag for _, delivery in dropped])
        return cleared + len(dropped)

    # -- doctor ----------------------------------------------------------------------

    async def health_warnings(self) -> list[str]:
        """How jobs travel to the broker, for `rainier-queue doctor`: in the clear to another
        machine, or over TLS whose certificate is not checked."""
        s = self.settings
        lossy = [f"RabbitMQ at {s.host}:{s.port}: {CLASSIC_COSTS}"] if s.classic else []
        return lossy + tls.transport_warnings(
            f"RabbitMQ at {s.host}:{s.port}",
            encrypted=s.tls,
            verified=s.verify,
            remote=tls.is_remote(s.host),
            fix="give the broker a TLS listener and use an `amqps://` URL, with `ssl_ca_certs` "
            "if your own authority signed its certificate",
        )

    # -- stopping --------------------------------------------------------------------

    async def _give_back(self) -> None:
        """Republish what was pushed here and never started, uncounted (handing_back.py)."""
        publish = lambda job, body, left: self._publish(job, body, left=left)  # noqa: E731
        await give_back(self._consumer, publish, classic=self.settings.classic)

    @override
    async def on_worker_stop(self) -> None:
        self._serving = False
        await self._consumer.stop(list(self._known))
        await self._give_back()

    @override
    async def aclose(self) -> None:
        try:
            await self._consumer.stop(list(self._known))
            await self._give_back()
        except Exception as exc:  # closing must not fail because the broker went away
            log.warning("could not give back the jobs pushed to this worker: %s", exc)
        finally:
            await self._consumer.aclose()
            await self._client.aclose()
            if self._locks is not None and self._owns_locks:
                await self._locks.aclose()


async def _taken(taking: asyncio.Future[list[Reservation]]) -> list[Reservation]:
    """What a take the caller stopped waiting for handed out, once it is done ([] if it failed:
    a failed take has put back what it held itself)."""
    try:
        return await taking
    except Exception:
        return []


__all__ = ["RabbitMQQueue"]
