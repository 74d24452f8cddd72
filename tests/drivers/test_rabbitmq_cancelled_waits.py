# SPDX-License-Identifier: MIT
"""RabbitMQ: a worker's idle wait cancelled at the worst moment stays a cancel and loses nothing.

A worker cancels its idle `wait_and_reserve` whenever it stops waiting (a
slot freed, a stop). Two moments did harm:

- inside an AMQP call (the first wait's lookup of its work queue): aiormq
  closes a channel whose call is cancelled, and refuses every later call on
  it until the broker has answered the close, so the next wait failed with
  `BrokerUnavailable("... Channel closed by RPC timeout")`, an outage that
  was none;
- while the jobs the broker pushed were read into reservations: the
  messages taken out of the buffer were dropped, unsettled on the channel
  and seen by nobody until the channel closed and the broker handed them out
  again, counted as attempts no handler made.

Each test holds the wait at that exact await of a real connection.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import aiormq
import pytest
from aiormq.abc import DeliveredMessage

from rainier_queue.drivers.rabbitmq import RabbitMQQueue
from rainier_queue.drivers.rabbitmq.names import AMQPDelivery
from rainier_queue.queue import Reservation

from ..contract.jobs import a_job

pytestmark = pytest.mark.timeout(60)

LONG = timedelta(seconds=30)


async def under_way(channel: aiormq.abc.AbstractChannel) -> None:
    """Return once a call on `channel` was sent and waits for its answer.

    aiormq holds the channel's lock from sending a call to reading its
    answer; a cancel that lands before it is sent closes nothing. The lock
    is private to aiormq: a version without it fails here, loudly.
    """
    lock = getattr(channel, "_Channel__lock")  # noqa: B009 - aiormq's private, untyped
    assert isinstance(lock, asyncio.Lock)
    while not lock.locked():  # noqa: ASYNC110 - aiormq offers no event to wait for
        await asyncio.sleep(0)


async def reserve_all(queue: RabbitMQQueue, count: int) -> list[Reservation]:
    got: list[Reservation] = []
    for _ in range(50):
        got += await queue.reserve("default", limit=count - len(got))
        if len(got) == count:
            break
    return got


async def test_a_wait_cancelled_during_its_lookup_is_a_cancel_and_the_next_wait_works(
    rabbit: RabbitMQQueue, monkeypatch: pytest.MonkeyPatch
) -> None:
    job = a_job(payload="waiting")
    await rabbit.push(job)
    original = aiormq.Channel.queue_declare
    waits: list[asyncio.Task[list[Reservation]]] = []
    declares: list[str] = []

    async def declare_cancelled_midway(self: aiormq.Channel, *args: Any, **kwargs: Any) -> Any:
        declares.append(str(args[0] if args else kwargs.get("queue")))
        call = asyncio.ensure_future(original(self, *args, **kwargs))
        await under_way(self)
        waits[0].cancel()  # the worker stops waiting right now
        return await call

    monkeypatch.setattr(aiormq.Channel, "queue_declare", declare_cancelled_midway)
    waits.append(asyncio.create_task(rabbit.wait_and_reserve("default", LONG, limit=1)))
    with pytest.raises(asyncio.CancelledError):
        await waits[0]
    monkeypatch.setattr(aiormq.Channel, "queue_declare", original)

    got = await rabbit.wait_and_reserve("default", LONG, limit=1)  # no outage, no lost channel
    if not got:
        got = await reserve_all(rabbit, 1)
    assert [r.job.id for r in got] == [job.id]
    assert got[0].job.attempts == 1
    assert len(declares) == 1, "the lookup the cancelled wait made was kept, not made again"
    await rabbit.acknowledge(got[0])
    assert await rabbit.size("default") == 0


async def test_an_inspecting_channel_closed_by_a_cancelled_call_is_replaced_not_an_outage(
    rabbit: RabbitMQQueue,
) -> None:
    await rabbit.push(a_job())
    assert await rabbit.size("default") == 1
    client = getattr(rabbit, "_client")  # noqa: B009 - the driver's own part
    underlay = await (await client.inspecting()).get_underlay_channel()
    name = rabbit.work_queue_for("default")
    call = asyncio.ensure_future(underlay.queue_declare(name, passive=True))
    await under_way(underlay)
    call.cancel()  # aiormq closes the channel, and refuses calls until the broker agrees
    with pytest.raises(asyncio.CancelledError):
        await call

    assert await rabbit.size("default") == 1
    [got] = await reserve_all(rabbit, 1)
    await rabbit.acknowledge(got)
    assert await rabbit.size("default") == 0


async def test_a_wait_cancelled_while_reading_its_jobs_puts_them_back_uncounted(
    rabbit: RabbitMQQueue, monkeypatch: pytest.MonkeyPatch
) -> None:
    jobs = [a_job(payload=n) for n in range(2)]
    await rabbit.push_many(jobs)
    original = RabbitMQQueue._read
    reading = asyncio.Event()
    go_on = asyncio.Event()

    async def read_that_waits(
        self: RabbitMQQueue, queue: str, message: DeliveredMessage, delivery: AMQPDelivery
    ) -> Reservation | None:
        reading.set()  # the pushed jobs are out of the buffer and in hand
        await go_on.wait()
        return await original(self, queue, message, delivery)

    monkeypatch.setattr(RabbitMQQueue, "_read", read_that_waits)
    waiting = asyncio.create_task(rabbit.wait_and_reserve("default", LONG, limit=2))
    await asyncio.wait_for(reading.wait(), 10)
    waiting.cancel()
    go_on.set()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    monkeypatch.setattr(RabbitMQQueue, "_read", original)

    got = await reserve_all(rabbit, 2)
    assert sorted(r.job.id for r in got) == sorted(j.id for j in jobs), "a taken job was dropped"
    assert [r.job.attempts for r in got] == [1, 1], "a job nobody ran was counted"
    await rabbit.acknowledge_many(got)
    assert await rabbit.size("default") == 0
