# SPDX-License-Identifier: MIT
"""Messages the server stopped delivering (`max_deliver`), moved to the failed store.

When a message reaches its consumer's `max_deliver`, NATS 2.9 leaves it in
the work-queue stream, never delivered again, and says so once, in an
advisory (`$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.<stream>.<consumer>`)
that nobody may be listening to (brokers.md §2, fact 6). Left there, it
would rot: not waiting, not failed, invisible to `rainier-queue failed`.
So every worker serving a queue moves such messages, two ways:

- it listens to the advisory and moves the message it names at once;
- every `sweep_every` it sweeps: on a work-queue stream an acknowledged
  message is deleted, so a message still on the queue's subject at or below
  the consumer's ack floor is one the server gave up on; and when no
  delivery is in flight, so is any at or below the last delivered.

Moving is: read the message, record it in the failed store (written and
acknowledged first; its message id makes a second mover's copy a no-op),
then delete it from the work stream. Two workers moving one message at once
leave one failed record.
"""

from __future__ import annotations

import asyncio
import json
import logging

import nats.js.errors as jx
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription

from ...envelope.reading import Malformed, read_envelope
from .connection import NATSConnection, translated
from .failed import FailedStore

log = logging.getLogger("rainier_queue.nats")


class ExhaustedMover:
    """Moves one queue's undeliverable messages to the failed store."""

    def __init__(
        self,
        connection: NATSConnection,
        failed: FailedStore,
        *,
        stream: str,
        consumer: str,
        subject: str,
        queue: str,
        every: float,
    ) -> None:
        self._connection = connection
        self._failed = failed
        self._stream = stream
        self._consumer = consumer
        self._subject = subject
        self._queue = queue
        self._every = every
        self._sub: Subscription | None = None
        self._moving: set[asyncio.Task[None]] = set()

    async def listen(self) -> None:
        """Subscribe to the advisory that names a message the server gave up on."""
        client = await self._connection.client()
        subject = f"$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.{self._stream}.{self._consumer}"
        async with translated("subscribe to the max-deliveries advisory"):
            self._sub = await client.subscribe(subject, cb=self._advised)

    async def _advised(self, msg: Msg) -> None:
        try:
            data = json.loads(msg.data)
            seq, deliveries = int(data["stream_seq"]), int(data.get("deliveries", 0))
        except (ValueError, KeyError, TypeError):
            return
        task = asyncio.ensure_future(self._safely(seq, deliveries))
        self._moving.add(task)
        task.add_done_callback(self._moving.discard)

    async def _safely(self, seq: int, deliveries: int) -> None:
        try:
            await self.move(seq, deliveries)
        except Exception as exc:  # the sweep finds it later
            log.warning(
                "could not move message %d of %r to the failed store: %s", seq, self._stream, exc
            )

    async def run(self) -> None:
        """Sweep every `every` seconds, for as long as the worker runs."""
        while True:
            await asyncio.sleep(self._every)
            try:
                await self.sweep()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("could not sweep %r for undeliverable jobs: %s", self._subject, exc)

    async def sweep(self) -> int:
        """Move every message at or below the consumer's ack floor; how many were moved."""
        js = await self._connection.jetstream()
        try:
            async with translated(f"read consumer {self._consumer!r}"):
                info = await js.consumer_info(self._stream, self._consumer)
        except jx.NotFoundError:
            return 0
        floor = info.ack_floor.stream_seq if info.ack_floor else 0
        if not info.num_ack_pending and info.delivered is not None:
            # Nothing is out with a worker, so everything delivered so far that is still
            # there was given up on, not only what lies below the ack floor.
            floor = max(floor, info.delivered.stream_seq or 0)
        moved, seq = 0, 1
        while seq <= floor:
            try:
                async with translated("look for undeliverable jobs"):
                    msg = await js.get_msg(self._stream, seq, subject=self._subject, next=True)
            except jx.NotFoundError:
                break
            if msg.seq is None or msg.seq > floor:
                break
            await self.move(msg.seq, info.config.max_deliver or 0)
            moved += 1
            seq = msg.seq + 1
        return moved

    async def move(self, seq: int, deliveries: int) -> None:
        js = await self._connection.jetstream()
        try:
            async with translated(f"read message {seq} of stream {self._stream!r}"):
                msg = await js.get_msg(self._stream, seq)
        except jx.NotFoundError:
            return  # moved by another worker, or acknowledged meanwhile
        source = f"{self._stream}:{seq}"
        found = read_envelope(
            msg.data or b"", field="data", queue=self._queue, delivered=deliveries
        )
        if isinstance(found, Malformed):
            await self._failed.record_malformed(found, queue=self._queue, source=source)
        else:
            error = (
                f"delivered {deliveries} times without being settled (the consumer's "
                "max_deliver): its workers died or lost their leases each time"
            )
            await self._failed.record(found, error, source=source)
        try:
            async with translated(f"delete message {seq} of stream {self._stream!r}"):
                await js.delete_msg(self._stream, seq)
        except jx.NotFoundError:
            pass
        log.error(
            "job in message %d of %r was undeliverable; moved to the failed store",
            seq,
            self._stream,
        )

    async def aclose(self) -> None:
        sub, self._sub = self._sub, None
        for task in list(self._moving):
            task.cancel()
        if sub is not None:
            try:
                await sub.unsubscribe()
            except Exception:
                return


__all__ = ["ExhaustedMover"]
