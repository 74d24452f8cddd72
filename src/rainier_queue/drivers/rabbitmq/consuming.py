# SPDX-License-Identifier: MIT
"""The consumer: jobs pushed by the broker into a window the size of the worker's free slots.

No polling. A queue object holds one consuming channel and, while it waits
for work or has slots to fill, a subscription (`basic.consume`) per work
queue. The broker pushes deliveries into a local buffer; a reserve takes
from it. The subscription's prefetch is the jobs this object holds plus
the ones it asked for (`held + limit`), which for a worker is its
concurrency, so the broker never sends more than the worker has free slots
for, and the jobs it could not take stay on the broker for other workers.

A window grows when a reserve asks for more than it has room for, and
never shrinks while the worker runs: cancelling a consumer makes RabbitMQ
return what was on its way to it, counting a delivery of each. A stopping
worker cancels its consumers and republishes what it was sent and never
started (queue.py), so no job loses a try to a shutdown.

Every unsettled delivery is tracked by its tag on this channel. When the
channel closes (the connection was lost, the broker restarted, or its
`consumer_timeout` passed for one delivery), the broker puts **every**
delivery of the channel back, counting one delivery each; so all of them
become stale here at once, and a late settle of any is `LeaseLost`,
never an acknowledgement sent on a new channel where the tag means
something else.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import aiormq
from aio_pika.abc import AbstractChannel
from aiormq.abc import DeliveredMessage

from ...errors import LeaseLost
from .connection import AMQPClient, translated
from .names import AMQPDelivery

log = logging.getLogger("rainier_queue.rabbitmq")

FILL_WAIT = 0.25
"""Seconds a reserve waits for a delivery the broker says is ready before it looks again."""
RETURN_WAIT = 1.0
"""Seconds a reserve after a reject of the same queue waits for the job to come back."""
FILL_LOOKS = 20
"""How often a reserve looks again before it settles for what it has."""


@dataclass(eq=False)
class Subscription:
    """One work queue's consumer on the channel, and what it delivered that nobody took yet."""

    queue: str
    tags: list[str] = field(default_factory=list)
    prefetch: int = 0
    """The sum of its consumers' prefetch: how many jobs the broker may push here unsettled."""
    buffer: deque[DeliveredMessage] = field(default_factory=deque)


class Consumer:
    """The consuming channel, its subscriptions and every delivery not settled yet."""

    def __init__(self, client: AMQPClient) -> None:
        self._client = client
        self._channel: AbstractChannel | None = None
        self._raw: aiormq.abc.AbstractChannel | None = None
        self.number = 0
        """This process's number for the current channel; a reservation names it."""
        self._subs: dict[str, Subscription] = {}
        self._held: dict[str, AMQPDelivery] = {}
        """Token -> delivery, for every job handed out and not settled."""
        self._arrived = asyncio.Event()
        self._opening = asyncio.Lock()
        self._returning: dict[str, float] = {}
        """Queue -> until when a job this object put back may still be on its way back."""

    # -- the channel --------------------------------------------------------------

    async def _open(self) -> AbstractChannel:
        channel = self._channel
        if channel is not None and not channel.is_closed:
            return channel
        async with self._opening:
            if self._channel is not None and not self._channel.is_closed:
                return self._channel
            channel = await self._client.channel()
            self.number += 1
            number = self.number
            channel.close_callbacks.add(lambda _, exc: self._closed(number, exc))
            self._raw = await channel.get_underlay_channel()
            self._channel = channel
            return channel

    def _closed(self, number: int, exc: BaseException | None) -> None:
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
        self._held.clear()
        self._subs.clear()
        self._arrived.set()

    def _underlay(self) -> aiormq.abc.AbstractChannel:
        channel = self._channel
        if channel is None or channel.is_closed:
            raise LeaseLost("the channel that delivered this job has closed")
        assert self._raw is not None
        return self._raw

    # -- subscriptions ------------------------------------------------------------

    def held_on(self, queue: str) -> int:
        return sum(1 for d in self._held.values() if d.queue == queue)

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
        channel = await self._open()
        number = self.number
        sub = self._subs.setdefault(queue, Subscription(queue))
        want = self.held_on(queue) + len(sub.buffer) + max(1, window)
        if sub.prefetch >= want:
            return
        underlay = await channel.get_underlay_channel()
        async with translated(f"consume from queue {queue!r}"):
            await underlay.basic_qos(prefetch_count=want - sub.prefetch)
            ok = await underlay.basic_consume(
                queue, lambda message: self._deliver(number, sub, message), no_ack=False
            )
        sub.tags.append(str(ok.consumer_tag))
        sub.prefetch = want

    async def _deliver(self, number: int, sub: Subscription, message: DeliveredMessage) -> None:
        if number != self.number:
            return
        if (message.header.properties.headers or {}).get("x-delivery-count"):
            self._returning.pop(sub.queue, None)
        sub.buffer.append(message)
        self._arrived.set()

    async def unsubscribe(self, queue: str) -> None:
        """Stop the broker sending `queue`'s jobs here (a stopping worker); what it sent stays."""
        sub = self._subs.get(queue)
        if sub is None or not sub.tags or self._channel is None or self._channel.is_closed:
            return
        tags, sub.tags, sub.prefetch = sub.tags, [], 0
        async with translated(f"stop consuming from queue {queue!r}"):
            for tag in tags:
                await self._underlay().basic_cancel(tag)

    async def ready(self, queue: str) -> int:
        """How many of `queue`'s jobs wait on the broker, asked on the consuming channel.

        Asked there on purpose: the broker answers on a channel in order, so
        every delivery it sent this channel before counting has arrived by the
        time the answer does, and a count of 0 means nothing is on its way.
        """
        underlay = self._underlay()
        async with translated(f"count the jobs of queue {queue!r}"):
            answer = await underlay.queue_declare(queue, passive=True)
        return int(answer.message_count or 0)

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

    def hold(self, token: str, delivery: AMQPDelivery) -> None:
        self._held[token] = delivery

    def current(self, token: str, handle: Any, job_id: str) -> AMQPDelivery:
        """The delivery `token` holds, or `LeaseLost` if it was settled or its channel closed."""
        delivery = self._held.get(token)
        if (
            not isinstance(handle, AMQPDelivery)
            or delivery is None
            or delivery != handle
            or handle.channel != self.number
        ):
            raise LeaseLost(
                f"job {job_id} is no longer held by this worker: it was settled already, or "
                "the channel that delivered it closed and RabbitMQ handed it out again"
            )
        return delivery

    def release_hold(self, token: str) -> None:
        self._held.pop(token, None)

    def _outstanding(self) -> set[int]:
        tags = {d.tag for d in self._held.values() if d.channel == self.number}
        for sub in self._subs.values():
            tags.update(int(m.delivery_tag or 0) for m in sub.buffer)
        return tags

    async def ack(self, tags: Sequence[int]) -> None:
        """Acknowledge `tags`, the longest run of them that nothing else precedes with one
        `multiple=True` frame, the rest one by one."""
        underlay = self._underlay()
        wanted = sorted(set(tags))
        others = sorted(self._outstanding() - set(wanted))
        below = others[0] if others else None
        covered = [t for t in wanted if below is None or t < below]
        rest = wanted[len(covered) :]
        async with translated("acknowledge jobs"):
            if len(covered) > 1:
                await underlay.basic_ack(covered[-1], multiple=True)
            elif covered:
                await underlay.basic_ack(covered[0])
            for tag in rest:
                await underlay.basic_ack(tag)

    async def reject(self, tag: int, *, requeue: bool) -> None:
        """`basic.reject` (never `nack`: from RabbitMQ 4.3 only a reject counts a delivery)."""
        underlay = self._underlay()
        async with translated("put a job back"):
            await underlay.basic_reject(tag, requeue=requeue)
        if requeue:
            queue = next((d.queue for d in self._held.values() if d.tag == tag), None)
            if queue is not None:
                self._returning[queue] = time.monotonic() + RETURN_WAIT

    def returning(self, queue: str) -> bool:
        """Whether a job put back from here may not have come back yet.

        A reject has no answer, and the broker may count a queue before it has
        put the job back, so a reserve right after one looks a little longer.
        """
        until = self._returning.get(queue)
        return until is not None and time.monotonic() < until

    def leftovers(self) -> list[DeliveredMessage]:
        """Every delivery buffered and never handed out, taken out of the buffers."""
        out: list[DeliveredMessage] = []
        for sub in self._subs.values():
            out.extend(sub.buffer)
            sub.buffer.clear()
        return out

    async def aclose(self) -> None:
        channel, self._channel = self._channel, None
        self.number += 1
        self._held.clear()
        self._subs.clear()
        if channel is not None:
            with contextlib.suppress(Exception):
                await channel.close()


__all__ = ["FILL_LOOKS", "FILL_WAIT", "Consumer", "Subscription"]
