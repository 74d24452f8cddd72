# SPDX-License-Identifier: MIT
"""RabbitMQ: a batch of publishes written as one block (publishing.py), on the real broker.

Each message of a batch must come out as if it had been published alone:
confirmed, returned as unroutable, or not confirmed in time, each on its
own, with its body whole however long, and the channel's delivery tags
and returns kept as aiormq keeps them, so a later publish on the same
channel is confirmed as its own.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import aio_pika
import aiormq
import pytest
from aiormq.exceptions import PublishError
from pamqp import commands as spec

from rainier_queue.drivers.rabbitmq import aiormq_seams
from rainier_queue.drivers.rabbitmq.publishing import publish_batch

from ..contract.backend_rabbitmq import HOST
from ..contract.backends import BACKENDS

pytestmark = pytest.mark.timeout(60)


def props(n: int) -> spec.Basic.Properties:
    return spec.Basic.Properties(delivery_mode=2, message_id=f"m{n}-{uuid.uuid4().hex}")


Opened = tuple[aio_pika.abc.AbstractChannel, str, aiormq.Channel]


@pytest.fixture
async def channel() -> AsyncIterator[Opened]:
    """A confirming channel on the broker, a fresh queue on it (exclusive: it goes with the
    connection), and the aiormq channel under it (what `publish_batch` writes to)."""
    check = BACKENDS["rabbitmq"].check
    assert check is not None
    check()
    connection = await aio_pika.connect(f"amqp://guest:guest@{HOST}/")
    try:
        chan = await connection.channel(publisher_confirms=True, on_return_raises=True)
        queue = await chan.declare_queue("rq-publishing-" + uuid.uuid4().hex, exclusive=True)
        underlay = await chan.get_underlay_channel()
        assert isinstance(underlay, aiormq.Channel)
        yield chan, queue.name, underlay
    finally:
        await connection.close()


async def drain(chan: aio_pika.abc.AbstractChannel, name: str, count: int) -> list[bytes]:
    queue = await chan.get_queue(name)
    bodies: list[bytes] = []
    async with asyncio.timeout(20):
        while len(bodies) < count:
            message = await queue.get(fail=False, no_ack=True)
            if message is None:
                await asyncio.sleep(0.01)
            else:
                bodies.append(message.body)
    return bodies


async def test_each_message_of_a_batch_is_confirmed_or_returned_on_its_own(
    channel: Opened,
) -> None:
    chan, name, underlay = channel
    frame_max = underlay.max_content_size
    long_body = bytes(range(256)) * (frame_max // 256 * 3)  # three frames and more
    nowhere = "rq-no-such-queue-" + uuid.uuid4().hex
    messages = [
        (name, b"first", props(0)),
        (nowhere, b"lost", props(1)),
        (name, long_body, props(2)),
        (name, b"", props(3)),
    ]
    outcomes = await publish_batch(underlay, messages, timeout=10)
    assert outcomes[0] is None
    assert isinstance(outcomes[1], PublishError)
    assert outcomes[2] is None
    assert outcomes[3] is None
    assert await drain(chan, name, 3) == [b"first", long_body, b""]
    # The channel's bookkeeping is as aiormq leaves it: a later publish is its own.
    assert not underlay.message_id_delivery_tag
    assert await publish_batch(underlay, [(name, b"after", props(4))], timeout=10) == [None]
    assert await drain(chan, name, 1) == [b"after"]


async def test_a_message_without_an_id_is_still_told_apart_when_it_comes_back(
    channel: Opened,
) -> None:
    """A returned message is matched to its publish by its id: one published without an id
    is given one (as aiormq's own publish does), so its return is not read as a confirm."""
    _chan, name, underlay = channel
    nowhere = "rq-no-such-queue-" + uuid.uuid4().hex
    bare = spec.Basic.Properties(delivery_mode=2)
    outcomes = await publish_batch(underlay, [(nowhere, b"x", bare), (name, b"y", props(0))], 10)
    assert isinstance(outcomes[0], PublishError)
    assert outcomes[1] is None


async def test_a_batch_without_its_confirms_in_time_is_told_so_message_by_message(
    channel: Opened,
) -> None:
    chan, name, underlay = channel
    outcomes = await publish_batch(
        underlay, [(name, b"a", props(0)), (name, b"b", props(1))], timeout=0
    )
    assert [type(o) for o in outcomes] == [TimeoutError, TimeoutError]
    # Written all the same (the outcome was unknown, not a refusal), and the late confirms
    # leave the channel working.
    assert sorted(await drain(chan, name, 2)) == [b"a", b"b"]
    assert await publish_batch(underlay, [(name, b"c", props(2))], timeout=10) == [None]


async def test_a_batch_on_a_closed_channel_fails_every_message_and_writes_none(
    channel: Opened,
) -> None:
    _chan, name, underlay = channel
    await underlay.close()
    outcomes = await publish_batch(underlay, [(name, b"a", props(0)), (name, b"b", props(1))], 5)
    assert all(isinstance(o, Exception) for o in outcomes)
    assert len(outcomes) == 2


def test_this_aiormq_is_the_one_batches_are_written_for() -> None:
    """Else every push goes one by one and this file tests aiormq's own publish."""
    assert aiormq_seams.fits()
