# SPDX-License-Identifier: MIT
"""The consumer: jobs pushed by the broker into a window the size of the worker's free slots.

No polling. A queue object holds one consuming channel and, once a worker
reserves or waits for work, a subscription (`basic.consume`) per work
queue. The broker pushes deliveries into a local buffer; a reserve takes
from it first. The subscription's prefetch is the jobs this object holds
plus the ones it asked for (`held + limit`), which for a worker is its free
slots, so the broker never sends more than the worker has room for, and the
jobs it could not take stay on the broker for other workers; while its jobs
are quick, the window is wider (window.py says why and how quick).

A reserve that does not consume (a script, `rainier-queue` commands, a
test) takes what it lacks with `basic.get`, one round trip a job, on the
same channel: it then holds exactly what it was handed and nothing is on
its way to it, so `size` counts exactly.

A window grows when a reserve asks for more than it has room for, and
never shrinks while the worker runs: cancelling a consumer makes RabbitMQ
return what was on its way to it, counting a delivery of each. A stopping
worker cancels its consumers and republishes what it was sent and never
started (queue.py), so no job loses a try to a shutdown.

Every delivery not settled yet is tracked by its tag on this channel, from
its arrival to its acknowledgement, whether buffered, being read, or held
by a reservation: an acknowledgement with `multiple=True` covers only tags
below every one of them, so it never settles a job nobody finished. When the
channel closes (the connection was lost, the broker restarted, or its
`consumer_timeout` passed for one delivery), the broker puts **every**
delivery of the channel back, counting one delivery each; so all of them
become stale here at once, and a late settle of any is `LeaseLost`,
never an acknowledgement sent on a new channel where the tag means
something else.

An acknowledgement has no answer in AMQP 0-9-1, and one written into a
connection that is silently gone is lost. A round trip on the channel after
it, which the broker answers in order, says it arrived. A release, a fail
and the driver's own settles wait for that round trip. A finished job's
acknowledgement (`acknowledge_finished`) does not: it joins the next flush,
one `multiple=True` frame and a round trip for every job that finished
while the last flush was on its way, and the settle returns at once. Until
its flush is answered, the job's id is kept; if the channel closes first,
the ids go to the lost settles (settles.py), so the broker's redelivery of
such a job to this process is acknowledged, not run. Waiting for each
batch's round trip held a worker to its concurrency over about one and a
half round trips (the worker holds at most `concurrency` finished jobs
whose settles are on their way): on a loaded machine, where a round trip
to the broker took 5 to 15 ms, a few hundred jobs a second. Writing each
small batch as it came instead, without the wait, gives the quorum queue a
log entry per batch of one or two jobs, where a flush settles a dozen.

Deliveries taken out of a buffer and not handed out after all (the reserve
reading them was cancelled, or failed part way) are put back in front of
it (`put_back`): dropped, each would sit unsettled on the channel, seen by
nobody, until the channel closed and the broker counted a delivery of it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter, deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import aiormq
from aio_pika.abc import AbstractChannel
from aiormq.abc import DeliveredMessage
from pamqp import commands as spec

from ...errors import BrokerUnavailable, LeaseLost
from .connection import AMQPClient, shielded, translated
from .deliveries import InlineConsumer
from .names import AMQPDelivery
from .settles import LostSettles
from .window import JobPace

log = logging.getLogger("rainier_queue.rabbitmq")

CONFIRM_AT_CLOSE = 5.0
"""Seconds a closing queue waits for its last finished jobs' acknowledgement."""
QUIET = 0.1
"""Seconds without a delivery after which a stopping consumer's window counts as settled:
longer than a quorum queue takes here to apply an acknowledgement and hand the next job out."""
FILL_BOUND = 2.0
"""Seconds a stopping consumer waits at most for its window to fill or go quiet."""


@dataclass(eq=False)
class Subscription:
    """One work queue's consumer on the channel, and what it delivered that nobody took yet."""

    queue: str
    tags: dict[str, int] = field(default_factory=dict)
    """Consumer tag -> that consumer's prefetch (a window grows by adding consumers)."""
    prefetch: int = 0
    """The sum of its consumers' prefetch: how many jobs the broker may push here unsettled."""
    buffer: deque[DeliveredMessage] = field(default_factory=deque)


class Consumer:
    """The consuming channel, its subscriptions and every delivery not settled yet."""

    def __init__(self, client: AMQPClient, lost: LostSettles) -> None:
        self._client = client
        self._lost = lost
        """Where the ids of finished jobs go whose acknowledgement a closed channel lost."""
        self._finished: list[tuple[int, str]] = []
        """(tag, job id) of finished jobs on the current channel whose acknowledgement waits
        for the next flush (`acknowledge_finished`)."""
        self._flushing: asyncio.Task[None] | None = None
        self._channel: AbstractChannel | None = None
        self._raw: aiormq.abc.AbstractChannel | None = None
        self.number = 0
        """This process's number for the current channel; a reservation names it."""
        self._subs: dict[str, Subscription] = {}
        self._held: dict[str, AMQPDelivery] = {}
        """Token -> delivery, for every job handed out and not settled."""
        self._messages: dict[str, DeliveredMessage] = {}
        """Token -> the message a held delivery brought, to put it back if it is not handed out."""
        self._subscribing = asyncio.Lock()
        """One subscribe at a time: one a cancelled wait left running, and the next wait's."""
        self._unsettled: dict[int, str | None] = {}
        """The tag of every delivery on the current channel not acknowledged yet, and the
        consumer it came to (None: a `basic.get`), for a stop to tell a full window."""
        self._arrivals = 0
        """Deliveries pushed to this object so far, for a stop to tell a quiet window."""
        self._arrived = asyncio.Event()
        self.lost: BaseException | None = None
        """Why the channel's connection was lost under this object, until a reserve says so
        (`raise_if_lost`); a channel the broker closed for a bad call is no outage."""
        self._opening = asyncio.Lock()
        self._generation = 0
        """The client's connection the channel was opened on."""
        self._prefetch = 1
        """The prefetch last asked on the channel (for consumers started after it)."""
        self._held_from: dict[str, int] = {}
        """Queue -> how many of `_held` came from it (what a window counts)."""
        self.pace = JobPace()
        """How quickly jobs are settled here; quickly, and the window widens (window.py)."""

    # -- the channel --------------------------------------------------------------

    async def _open(self) -> AbstractChannel:
        channel = self._channel
        current = self._generation == self._client.generation
        if channel is not None and not channel.is_closed and current:
            return channel
        async with self._opening:
            if (
                self._channel is not None
                and not self._channel.is_closed
                and self._generation == self._client.generation
            ):
                return self._channel
            if self._channel is not None:  # it closed, or its connection went: all on it is stale
                gone = self._generation != self._client.generation
                self._closed(self.number, None, connection_lost=gone)
            channel = await self._client.channel()
            self._generation = self._client.generation
            self.number += 1
            number = self.number
            channel.close_callbacks.add(lambda _, exc: self._closed(number, exc))
            self._raw = await channel.get_underlay_channel()
            self._channel = channel
            return channel

    def _closed(
        self, number: int, exc: BaseException | None, *, connection_lost: bool = True
    ) -> None:
        """The channel went: the broker has put every delivery on it back."""
        if number != self.number:
            return
        if self._held and exc is not None and "timed out" in str(exc):
            log.error(
                "RabbitMQ closed the consuming channel because a delivery went "
                "unacknowledged for longer than its consumer_timeout (%s); the %d jobs held "
                "on it are handed out again and their settles here will be refused. Keep jobs "
                "shorter than the server's consumer_timeout, or raise it",
                exc,
                len(self._held),
            )
        self._channel = None
        self.number += 1  # every handle naming the old channel is stale from now on
        # A channel error is the broker refusing one call (a missing queue, a consumer
        # timeout, logged above); anything else closing it means its connection went.
        if connection_lost and not isinstance(exc, aiormq.exceptions.AMQPChannelError):
            self.lost = exc if exc is not None else ConnectionError("its connection was lost")
        self._forget_finished()
        self._held.clear()
        self._held_from.clear()
        self._messages.clear()
        self._unsettled.clear()
        self._subs.clear()
        self._arrived.set()

    def raise_if_lost(self) -> None:
        """`BrokerUnavailable`, once, if the channel closed under this object since last asked.

        A worker whose reserves take what the broker pushed may make no call of
        its own while its connection is cut: the heartbeat finds the connection
        dead, the channel closes, and nothing else would tell the worker that
        it lost the broker for a while (its jobs' settles are refused as stale).
        Raised by the next reserve or wait, it is an outage the worker counts,
        says, and rides out; the reserve after it opens a new channel.
        """
        lost, self.lost = self.lost, None
        if lost is not None:
            raise BrokerUnavailable(
                f"RabbitMQ is unreachable: the consuming channel closed ({lost}); the jobs "
                "held on it go back to the queue, and a new channel is opened"
            )

    def _underlay(self) -> aiormq.abc.AbstractChannel:
        channel = self._channel
        if channel is None or channel.is_closed:
            raise LeaseLost("the channel that delivered this job has closed")
        assert self._raw is not None
        return self._raw

    # -- subscriptions ------------------------------------------------------------

    def held_on(self, queue: str) -> int:
        return self._held_from.get(queue, 0)

    def buffered(self, queue: str) -> int:
        sub = self._subs.get(queue)
        return 0 if sub is None else len(sub.buffer)

    async def subscribe(self, queue: str, window: int) -> None:
        """Consume from `queue` with room for `window` more jobs than are held from it.

        A window only grows, by adding a consumer for the difference: prefetch
        applies to consumers started after it, and cancelling one to start a
        bigger one makes RabbitMQ return what was on its way to it, counting
        a delivery of each.
        """
        if not self._covers(queue, window):
            await shielded(self._subscribe(queue, window))

    def _want(self, queue: str, window: int) -> int:
        # Not counting what is buffered: the caller takes it out of its `window`, and
        # counting it again grew the window a little with every wait that found some.
        return max(self.pace.least_window(), self.held_on(queue) + max(1, window))

    def _covers(self, queue: str, window: int) -> bool:
        """Whether the open channel's consumers of `queue` have room for `window` already:
        a busy worker's every reserve, answered without a task or a lock."""
        channel, sub = self._channel, self._subs.get(queue)
        return (
            sub is not None
            and channel is not None
            and not channel.is_closed
            and self._generation == self._client.generation
            and sub.prefetch >= self._want(queue, window)
        )

    async def _subscribe(self, queue: str, window: int) -> None:
        # A subscribe goes on after its caller was cancelled; the next one, started
        # meanwhile, would see no window yet and consume a second time beside it.
        async with self._subscribing:
            await self._widen(queue, window)

    async def _widen(self, queue: str, window: int) -> None:
        channel = await self._open()
        number = self.number
        sub = self._subs.setdefault(queue, Subscription(queue))
        want = self._want(queue, window)
        if sub.prefetch >= want:
            return
        underlay = await channel.get_underlay_channel()
        async with translated(f"consume from queue {queue!r}"):
            self._prefetch = want - sub.prefetch
            await underlay.basic_qos(prefetch_count=self._prefetch)
            take = InlineConsumer(lambda message: self._deliver(number, sub, message))
            ok = await underlay.basic_consume(queue, take, no_ack=False)
        sub.tags[str(ok.consumer_tag)] = self._prefetch
        sub.prefetch = want

    def _deliver(self, number: int, sub: Subscription, message: DeliveredMessage) -> None:
        """A pushed delivery into its buffer, in the channel's reader (deliveries.py)."""
        if number != self.number:
            return
        frame = message.delivery
        tag = frame.consumer_tag if isinstance(frame, spec.Basic.Deliver) else None
        self._unsettled[int(message.delivery_tag or 0)] = tag
        self._arrivals += 1
        sub.buffer.append(message)
        self._arrived.set()

    async def stop(self, queues: Sequence[str]) -> None:
        """Stop the broker sending `queues`' jobs here (a stopping worker), once none can be on
        its way (`_settle_window`); what it sent stays buffered for `leftovers`."""
        await shielded(self._stop(queues))

    async def _stop(self, queues: Sequence[str]) -> None:
        # Under the subscribe lock: a widening still running for a cancelled wait would
        # add a consumer after the cancel, which nothing stopped.
        async with self._subscribing:
            if any(sub.tags for sub in self._subs.values()):
                await self._settle_window()
            for queue in queues:
                await self._unsubscribe(queue)

    async def _settle_window(self) -> None:
        """Wait until no delivery can be on its way to a consumer here: each one's window
        full, or nothing arrived for `QUIET` seconds after the last acknowledgement.

        RabbitMQ 3.10 hands a quorum queue's job to a consumer with room as it
        applies an acknowledgement (or a push); one it hands out while the
        consumer's cancel is under way is dropped by the channel and taken back
        by the queue with a delivery counted, though no client ever saw it (no
        frame of it comes before the cancel-ok or after; measured in
        bench/studies/amqp_cancel_race.py). A full window has no room, so
        nothing is handed out; a quiet one is left open only to a job pushed in
        the moment of the cancel (the page's stop section says so).
        """
        flushing = self._flushing
        if flushing is not None and not flushing.done():
            with contextlib.suppress(Exception):  # its acknowledgements free room: let them
                await asyncio.wait_for(asyncio.shield(flushing), CONFIRM_AT_CLOSE)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + FILL_BOUND
        seen, last = self._arrivals, loop.time()
        while not self._windows_full() and self._channel is not None:
            now = loop.time()
            if self._arrivals != seen:
                seen, last = self._arrivals, now
            elif now - last >= QUIET or now >= deadline:
                return
            await self.arrival(max(0.001, min(QUIET - (now - last), deadline - now)))

    def _windows_full(self) -> bool:
        """Whether every consumer here holds as many unsettled deliveries as its prefetch."""
        counts = Counter(self._unsettled.values())
        return all(
            counts[tag] >= prefetch
            for sub in self._subs.values()
            for tag, prefetch in sub.tags.items()
        )

    async def _unsubscribe(self, queue: str) -> None:
        sub = self._subs.get(queue)
        if sub is None or not sub.tags or self._channel is None or self._channel.is_closed:
            return
        tags, sub.tags, sub.prefetch = list(sub.tags), {}, 0
        async with translated(f"stop consuming from queue {queue!r}"):
            for tag in tags:
                await self._underlay().basic_cancel(tag)
        # What the broker sent before its cancel-ok is in the buffer already, where
        # `leftovers` finds it; where aiormq's own channel is kept (deliveries.py) it is
        # handed to the callback as a task of its own: let those run first.
        await asyncio.sleep(0)

    async def fetch(self, queue: str, limit: int) -> None:
        """Up to `limit` of `queue`'s ready jobs into its buffer, one `basic.get` each, until
        it has none: `take` hands them out, or `leftovers` if the caller was cancelled."""
        await shielded(self._fetch(queue, limit))

    async def _fetch(self, queue: str, limit: int) -> None:
        await self._open()
        number = self.number
        sub = self._subs.setdefault(queue, Subscription(queue))
        async with translated(f"take jobs from queue {queue!r}"):
            for _ in range(limit):
                message = await self._underlay().basic_get(queue, no_ack=False)
                if not isinstance(message.delivery, spec.Basic.GetOk) or number != self.number:
                    break
                self._unsettled[int(message.delivery_tag or 0)] = None
                sub.buffer.append(message)

    def take(self, queue: str, limit: int) -> list[tuple[DeliveredMessage, AMQPDelivery]]:
        """Up to `limit` buffered deliveries of `queue`, each with its handle."""
        sub = self._subs.get(queue)
        out: list[tuple[DeliveredMessage, AMQPDelivery]] = []
        while sub is not None and sub.buffer and len(out) < limit:
            message = sub.buffer.popleft()
            tag = int(message.delivery_tag or 0)
            out.append((message, AMQPDelivery(self.number, tag, queue)))
        return out

    async def wait(self, queues: Sequence[str], timeout: float) -> None:
        """Return once one of `queues` has a delivery buffered, or after `timeout`."""
        if any(self.buffered(q) for q in queues):
            return
        self._arrived.clear()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                while not any(self.buffered(q) for q in queues):
                    await self._arrived.wait()
                    self._arrived.clear()

    async def arrival(self, timeout: float) -> None:
        """Wait for the next delivery (or a closed channel), at most `timeout` seconds."""
        self._arrived.clear()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await self._arrived.wait()

    # -- settling -----------------------------------------------------------------

    def hold(self, token: str, delivery: AMQPDelivery, message: DeliveredMessage) -> None:
        self._held[token] = delivery
        self._messages[token] = message
        self._held_from[delivery.queue] = self._held_from.get(delivery.queue, 0) + 1

    def _unheld(self, delivery: AMQPDelivery | None) -> None:
        if delivery is not None and delivery.channel == self.number:
            left = self._held_from.get(delivery.queue, 0) - 1
            if left > 0:
                self._held_from[delivery.queue] = left
            else:
                self._held_from.pop(delivery.queue, None)

    def unhold(self, tokens: Sequence[str]) -> list[tuple[DeliveredMessage, AMQPDelivery]]:
        """Take back deliveries handed out that their caller never got, in order."""
        out: list[tuple[DeliveredMessage, AMQPDelivery]] = []
        for token in tokens:
            delivery = self._held.pop(token, None)
            message = self._messages.pop(token, None)
            self._unheld(delivery)
            if delivery is not None and message is not None:
                out.append((message, delivery))
        return out

    def put_back(self, taken: Sequence[tuple[DeliveredMessage, AMQPDelivery]]) -> None:
        """Return deliveries taken from the buffers but never handed out, in front, in order.

        A call cancelled (or failed) between taking them and handing them out
        would otherwise drop them: still unsettled on the channel, seen by
        nobody, until the channel closed and the broker handed each out
        again, counted as a delivery no handler ran. Those of a channel
        closed meanwhile are not kept: the broker has put them back already.
        """
        for message, delivery in reversed(taken):
            sub = self._subs.get(delivery.queue)
            if delivery.channel != self.number or sub is None:
                continue
            sub.buffer.appendleft(message)
            self._arrived.set()

    def current(self, token: str, handle: Any, job_id: str) -> AMQPDelivery:
        """The delivery `token` holds, or `LeaseLost` if it was settled or its channel closed."""
        delivery = self._held.get(token)
        channel = self._channel
        if (
            not isinstance(handle, AMQPDelivery)
            or delivery is None
            or delivery != handle
            or handle.channel != self.number
            or channel is None
            or channel.is_closed
        ):
            raise LeaseLost(
                f"job {job_id} is no longer held by this worker: it was settled already, or "
                "the channel that delivered it closed and RabbitMQ handed it out again"
            )
        return delivery

    def open_on(self, number: int) -> bool:
        """Whether the channel numbered `number` here is the current one, and open."""
        channel = self._channel
        return number == self.number and channel is not None and not channel.is_closed

    def release_hold(self, token: str) -> None:
        self._unheld(self._held.pop(token, None))
        self._messages.pop(token, None)

    async def ack(self, tags: Sequence[int]) -> None:
        """Acknowledge `tags` and wait for a round trip on the channel, which says the broker
        has them (the module docs say why)."""
        await shielded(self._ack(tags, confirmed=True))

    def acknowledge_finished(self, tags: Sequence[int], job_ids: Sequence[str]) -> None:
        """Acknowledge finished jobs' `tags` in the next flush, without waiting for it: their
        ids are kept until its round trip has confirmed them (the module docs say why)."""
        self._underlay()  # `LeaseLost` now if the channel has closed
        self._finished.extend(zip(tags, job_ids, strict=True))
        if self._flushing is None or self._flushing.done():
            self._flushing = asyncio.get_running_loop().create_task(self._flush())

    async def _ack(self, tags: Sequence[int], *, confirmed: bool) -> None:
        """`tags` below every other unsettled delivery with one `multiple=True` frame, the
        rest one by one; then, if `confirmed`, a round trip."""
        underlay = self._underlay()
        wanted = sorted(set(tags))
        others = self._unsettled.keys() - wanted
        below = min(others) if others else None
        covered = [t for t in wanted if below is None or t < below]
        rest = wanted[len(covered) :]
        async with translated("acknowledge jobs"):
            # Not waiting for each frame to be written: the round trip after them is what
            # says they arrived, and a channel that closes first loses them either way.
            if len(covered) > 1:
                await underlay.basic_ack(covered[-1], multiple=True, wait=False)
            elif covered:
                await underlay.basic_ack(covered[0], wait=False)
            for tag in rest:
                await underlay.basic_ack(tag, wait=False)
            if confirmed:
                await underlay.basic_qos(prefetch_count=self._prefetch)
        for tag in wanted:
            self._unsettled.pop(tag, None)

    async def _flush(self) -> None:
        """Acknowledge the finished jobs waiting, with a round trip after, until none wait:
        those finishing while one flush is on its way go together in the next."""
        while self._finished:
            number = self.number
            batch, self._finished = self._finished, []
            try:
                # What waits was all delivered on the current channel: a close moves it.
                await self._ack([tag for tag, _ in batch], confirmed=True)
            except Exception as exc:  # the channel or its connection went under it
                log.debug("could not acknowledge %d finished jobs: %s", len(batch), exc)
                self._keep_lost([job_id for _, job_id in batch])
                continue
            if number != self.number:  # closed meanwhile: answered or not, keep them
                self._keep_lost([job_id for _, job_id in batch])

    def _keep_lost(self, job_ids: Sequence[str]) -> None:
        for job_id in job_ids:
            self._lost.keep(job_id)

    def _forget_finished(self) -> None:
        """The channel closed before the finished jobs waiting were acknowledged."""
        finished, self._finished = self._finished, []
        self._keep_lost([job_id for _, job_id in finished])

    def leftovers(self) -> list[DeliveredMessage]:
        """Every delivery buffered and never handed out, taken out of the buffers."""
        out: list[DeliveredMessage] = []
        for sub in self._subs.values():
            out.extend(sub.buffer)
            sub.buffer.clear()
        return out

    async def aclose(self) -> None:
        flushing = self._flushing
        if flushing is not None and not flushing.done():
            # Let the last finished jobs be acknowledged before the channel goes.
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(flushing), CONFIRM_AT_CLOSE)
            flushing.cancel()
            with contextlib.suppress(BaseException):
                await flushing
        channel, self._channel = self._channel, None
        self.number += 1
        self._finished.clear()
        self._held.clear()
        self._held_from.clear()
        self._messages.clear()
        self._unsettled.clear()
        self._subs.clear()
        if channel is not None:
            with contextlib.suppress(Exception):
                await channel.close()


__all__ = ["Consumer", "Subscription"]
