# SPDX-License-Identifier: MIT
"""RabbitMQ: the driver's receive path on the real broker, under aio-pika as any user has it.

The driver puts its frame reader (frames.py) and its channel (deliveries.py)
under aiormq's names for the whole process. So an aio-pika user beside it
must see nothing but speed: their own consumers still run as tasks, each
message whole and in order. The driver's consumer is called in the
channel's reader instead, with no task of its own per delivery.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import aio_pika
import aiormq.connection
import pytest

from rainier_queue.drivers.rabbitmq import deliveries, frames
from rainier_queue.drivers.rabbitmq.deliveries import InlineConsumer

from ..contract.backend_rabbitmq import HOST
from ..contract.backends import BACKENDS

pytestmark = pytest.mark.timeout(60)

BODIES = [f"message {n}".encode() * (n + 1) for n in range(12)] + [b"", b"x" * 300_000]
"""Short ones, an empty one (no body frame), and one longer than a frame (several)."""


class Recorder:
    """What a consumer was handed, and in which task; done once every message came."""

    def __init__(self) -> None:
        self.seen: list[tuple[bytes, Any, str | None, asyncio.Task[Any] | None]] = []
        self.done = asyncio.Event()

    def take(self, message: Any) -> None:
        props = message.header.properties
        self.seen.append(
            (message.body, (props.headers or {}).get("n"), props.message_id, asyncio.current_task())
        )
        if len(self.seen) == len(BODIES):
            self.done.set()


async def received(consumer: Any, recorder: Recorder) -> None:
    """Publish BODIES to a fresh queue and consume them with `consumer` until all came."""
    check = BACKENDS["rabbitmq"].check
    assert check is not None
    check()
    assert frames.install()
    assert deliveries.install()
    connection = await aio_pika.connect(f"amqp://guest:guest@{HOST}/")
    try:
        channel = await connection.channel()
        name = "rq-receiving-" + uuid.uuid4().hex
        queue = await channel.declare_queue(name, exclusive=True)
        for n, body in enumerate(BODIES):
            await channel.default_exchange.publish(
                aio_pika.Message(body, headers={"n": n}, message_id=str(n)), routing_key=name
            )
        underlay = await channel.get_underlay_channel()
        assert isinstance(underlay, deliveries.InlineChannel)
        await underlay.basic_consume(queue.name, consumer, no_ack=True)
        await asyncio.wait_for(recorder.done.wait(), 20)
    finally:
        await connection.close()
    assert aiormq.connection.FrameReceiver is frames.FrameReader


def test_the_drivers_consumer_takes_every_delivery_whole_in_order_without_a_task_each() -> None:
    async def run() -> Recorder:
        recorder = Recorder()
        await received(InlineConsumer(recorder.take), recorder)
        return recorder

    recorder = asyncio.run(run())
    assert [(body, n, mid) for body, n, mid, _ in recorder.seen] == [
        (body, n, str(n)) for n, body in enumerate(BODIES)
    ]
    # All in the channel's reader: one task for every delivery, not one each.
    assert len({id(task) for *_, task in recorder.seen}) == 1


def test_any_other_consumer_still_runs_as_a_task_per_delivery() -> None:
    async def run() -> Recorder:
        recorder = Recorder()

        async def consumer(message: Any) -> None:
            recorder.take(message)

        await received(consumer, recorder)
        return recorder

    recorder = asyncio.run(run())
    assert sorted((n, body) for body, n, _, _ in recorder.seen) == list(enumerate(BODIES))
    assert len({id(task) for *_, task in recorder.seen}) == len(BODIES)
