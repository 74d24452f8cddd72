# SPDX-License-Identifier: MIT
"""A RabbitMQ prefix of a test's own, for the tests that declare and redeclare an `emails`
queue (provisioning, classic queues), and the queue opened under it."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta

import aio_pika

from rainier_queue.connections import open_queue
from rainier_queue.drivers.rabbitmq import RabbitMQQueue
from rainier_queue.drivers.rabbitmq.names import failed_queue, tier_queue, work_queue

from ..contract.backends import BACKENDS

HOST = "127.0.0.1:5672"


@contextlib.asynccontextmanager
async def emails_prefix(letter: str) -> AsyncIterator[str]:
    """A fresh prefix (`rq` + `letter` + hex, which scripts/rabbitmq_leftovers.sh knows);
    the `emails` queue, its 1 s tier and the failed queue and exchange under it are deleted
    after."""
    backend = BACKENDS["rabbitmq"]
    assert backend.check is not None
    backend.check()
    prefix = "rq" + letter + uuid.uuid4().hex[:10] + "."
    yield prefix
    connection = await aio_pika.connect(f"amqp://guest:guest@{HOST}/")
    try:
        channel = await (await connection.channel()).get_underlay_channel()
        for name in (
            work_queue(prefix, "emails"),
            tier_queue(prefix, "emails", timedelta(seconds=1)),
            failed_queue(prefix),
        ):
            await channel.queue_delete(name)
        await channel.exchange_delete(failed_queue(prefix))
    finally:
        await connection.close()


def opened(prefix: str, **options: str) -> RabbitMQQueue:
    """The queue at the local RabbitMQ under `prefix`, with one 1 s delay tier."""
    query = "&".join(f"{k}={v}" for k, v in {"prefix": prefix, "delays": "1s", **options}.items())
    queue = open_queue(f"amqp://guest:guest@{HOST}/?{query}")
    assert isinstance(queue, RabbitMQQueue)
    return queue
