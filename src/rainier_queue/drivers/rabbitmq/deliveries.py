# SPDX-License-Identifier: MIT
"""Deliveries handed to the driver's consumer in the channel's reader, without a task each.

Why: aiormq runs every consumer callback as a task of its own, tracked in
the channel's store of futures with two closures and two done callbacks.
The driver's callback only appends the delivery to a buffer and wakes a
waiting reserve (consuming.py), so the task cost more than the work it ran:
a few microseconds a job, on a worker whose every job is a delivery. An
`InlineConsumer` is called right where the channel's reader has read the
message, in the order the broker sent it.

The frames come to the channel from the connection's reader through an
`asyncio.Queue`, whose put and get are layers of Python (a full check, a
size, an unfinished-task count, a waiter list) for one writer and one
reader: a tenth of a RabbitMQ worker's busy time. `FrameLine` keeps the
part aiormq uses (a bounded line, `put`, `get`, `task_done`) with one
waiting future a side.

How it is put in: aiormq's connection makes its channels by name
(`aiormq.connection.Channel`), so `install` puts `InlineChannel` there, for
every aiormq connection in the process, over the aiormq it was written for
only (aiormq_seams.py). For any other callback (aio-pika's own
consumers, for one) it does what aiormq does: a task per delivery. Where it
is not installed, an `InlineConsumer` is an ordinary async callback, run as
a task, and the driver works as before.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable
from typing import Any

import aiormq.channel
import aiormq.connection
from aiormq.abc import DeliveredMessage
from pamqp import commands as spec
from pamqp.header import ContentHeader

from .aiormq_seams import put_in

log = logging.getLogger("rainier_queue.rabbitmq")

BaseChannel: type[Any] = aiormq.channel.Channel
"""aiormq's own channel, as it was before `install`."""


class InlineConsumer:
    """A consumer callback the channel calls in its reader, with no task (`take` must not
    block, and must not raise: what it raises is logged and the delivery is its to keep)."""

    def __init__(self, take: Callable[[DeliveredMessage], None]) -> None:
        self.take = take

    async def __call__(self, message: DeliveredMessage) -> None:
        """Where `InlineChannel` is not installed, aiormq runs this as a task."""
        self.take(message)


class FrameLine:
    """One channel's incoming frames: what aiormq uses of `asyncio.Queue` (`put` from the
    connection's reader, `get` and `task_done` from the channel's), bounded as aiormq asks.

    Each side is one task (the connection's reader puts, the channel's reader
    gets), so one waiting future a side is enough; a cancelled waiter leaves a
    done future behind, which the other side skips.
    """

    def __init__(self, maxsize: int) -> None:
        self._items: deque[Any] = deque()
        self._bound = maxsize if maxsize > 0 else None
        self._getter: asyncio.Future[None] | None = None
        self._putter: asyncio.Future[None] | None = None

    def qsize(self) -> int:
        return len(self._items)

    async def put(self, item: Any) -> None:
        bound = self._bound
        while bound is not None and len(self._items) >= bound:
            self._putter = asyncio.get_running_loop().create_future()
            await self._putter
        self._items.append(item)
        getter, self._getter = self._getter, None
        if getter is not None and not getter.done():
            getter.set_result(None)

    async def get(self) -> Any:
        while not self._items:
            self._getter = asyncio.get_running_loop().create_future()
            await self._getter
        item = self._items.popleft()
        putter, self._putter = self._putter, None
        if putter is not None and not putter.done():
            putter.set_result(None)
        return item

    def task_done(self) -> None:
        """Nothing here waits for frames to be done with (aiormq calls it after each get)."""


class InlineChannel(BaseChannel):  # type: ignore[misc]
    """aiormq's channel, calling an `InlineConsumer` where its reader reads the message, its
    frames coming through a `FrameLine`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        queue: asyncio.Queue[Any] = getattr(self, "frames")  # noqa: B009 - aiormq's, untyped
        # Before the channel's reader first runs, and before the connection knows it.
        self.frames = FrameLine(queue.maxsize)

    async def _on_deliver_frame(self, frame: spec.Basic.Deliver) -> None:
        header = await self._get_frame()
        if not isinstance(header, ContentHeader):
            raise ValueError(f"Unexpected frame {header!r} instead of ContentHeader", header)
        message = await self._read_content(frame, header)
        tag = frame.consumer_tag
        consumer = None if tag is None else self.consumers.get(tag)
        if consumer is None:  # cancelled meanwhile, as aiormq drops it
            return
        # aiormq keeps a callback wrapped (`awaitable`), the callback under `__wrapped__`.
        target = getattr(consumer, "__wrapped__", consumer)
        if isinstance(target, InlineConsumer):
            try:
                target.take(message)
            except Exception:
                log.exception("a consumer could not take a delivery")
            return
        task = self.create_task(consumer(message))
        task.add_done_callback(self._on_consumer_done)


def install() -> bool:
    """Make aiormq's connections open `InlineChannel`s (aiormq_seams.py)."""
    return put_in("Channel", BaseChannel, InlineChannel)


__all__ = ["InlineChannel", "InlineConsumer", "install"]
