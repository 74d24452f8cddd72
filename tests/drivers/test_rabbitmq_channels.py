# SPDX-License-Identifier: MIT
"""RabbitMQ: what a channel the server closed does to the jobs it delivered.

A delivery tag means something only on the channel that sent it. When the
server closes that channel (a lost connection, a broker restart, a delivery
held past `consumer_timeout`, any channel error), it puts back every job
the channel held, counting a delivery of each. A settle that comes after
must be `LeaseLost`, never an acknowledgement sent on the new channel,
where the same tag names another job; and the job comes back with the
attempt counted. The server is made to close the channel here by a
channel error (a lookup of a queue that does not exist), which puts
deliveries back as a `consumer_timeout` does.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest

from rainier_queue.drivers.rabbitmq import RabbitMQQueue
from rainier_queue.errors import LeaseLost
from rainier_queue.queue import Reservation

from ..contract.backends import BACKENDS
from ..contract.jobs import a_job

BACKEND = BACKENDS["rabbitmq"]

pytestmark = pytest.mark.timeout(60)


async def close_the_consuming_channel(queue: RabbitMQQueue) -> None:
    """Make the server close the channel the jobs came on, with a channel error."""
    channel = getattr(queue, "_consumer")._channel  # noqa: B009 - the driver's own part
    underlay = await channel.get_underlay_channel()
    with pytest.raises(Exception, match="NOT_FOUND"):
        await underlay.queue_declare("rq-no-such-queue-" + uuid.uuid4().hex, passive=True)


async def reserve_all(queue: RabbitMQQueue, count: int) -> list[Reservation]:
    got: list[Reservation] = []
    for _ in range(50):
        got += await queue.reserve("default", limit=count - len(got))
        if len(got) == count:
            break
    return got


async def test_a_settle_after_the_server_closed_its_channel_is_lease_lost_and_the_job_back_counted(
    rabbit: RabbitMQQueue, tmp_path: Path
) -> None:
    await rabbit.push_many([a_job(payload="first"), a_job(payload="second")])
    held = await reserve_all(rabbit, 2)
    assert sorted(r.job.payload for r in held) == ["first", "second"]
    assert [r.job.attempts for r in held] == [1, 1]

    await close_the_consuming_channel(rabbit)

    with pytest.raises(LeaseLost):
        await rabbit.acknowledge(held[0])
    with pytest.raises(LeaseLost):
        await rabbit.fail(held[1], "too late")

    other = BACKEND.open(tmp_path, rabbit.settings.prefix.rstrip("."))  # another worker
    try:
        assert isinstance(other, RabbitMQQueue)
        back = await reserve_all(other, 2)
        assert sorted(r.job.payload for r in back) == ["first", "second"]
        assert [r.job.attempts for r in back] == [2, 2], "the broker counted the lost delivery"
        for reservation in back:
            await other.acknowledge(reservation)
        assert await other.failed_jobs() == [], "a refused fail recorded nothing"
    finally:
        await other.aclose()


async def test_a_job_whose_acknowledgement_was_lost_with_its_channel_is_settled_when_it_returns(
    rabbit: RabbitMQQueue,
) -> None:
    await rabbit.push_many([a_job(payload="finished"), a_job(payload="released")])
    held = {r.job.payload: r for r in await reserve_all(rabbit, 2)}
    await close_the_consuming_channel(rabbit)

    with pytest.raises(LeaseLost):  # it ran to its end; the broker put it back all the same
        await rabbit.acknowledge(held["finished"])
    with pytest.raises(LeaseLost):
        await rabbit.release(held["released"])

    back = await reserve_all(rabbit, 2)
    assert [r.job.payload for r in back] == ["released"], "the finished job is not run again"
    await rabbit.acknowledge(back[0])
    assert await rabbit.size("default") == 0


async def test_a_stale_settle_never_acknowledges_the_job_the_new_channel_gave_the_same_tag(
    rabbit: RabbitMQQueue,
) -> None:
    await rabbit.push(a_job(payload="old"))
    [old] = await reserve_all(rabbit, 1)
    await close_the_consuming_channel(rabbit)

    [again] = await reserve_all(rabbit, 1)  # on a new channel, where tags start again at 1
    assert again.job.payload == "old"
    await rabbit.push(a_job(payload="new"))
    [new] = await reserve_all(rabbit, 1)
    with pytest.raises(LeaseLost):
        await rabbit.acknowledge(old)

    assert await rabbit.size("default") == 0
    await rabbit.release(new)  # still held: the stale settle touched nothing
    await rabbit.acknowledge(again)
    [new_again] = await reserve_all(rabbit, 1)
    assert new_again.job.payload == "new"
    await rabbit.acknowledge(new_again)


async def test_a_finished_job_whose_acknowledgement_the_channel_lost_is_settled_when_it_returns(
    rabbit: RabbitMQQueue,
) -> None:
    """A finished job's settle returns before its acknowledgement is confirmed (it goes with
    the next flush); one the channel loses all the same is remembered, never run again."""
    await rabbit.push(a_job(payload="finished"))
    [held] = await reserve_all(rabbit, 1)
    channel = getattr(rabbit, "_consumer")._channel  # noqa: B009 - the driver's own part
    underlay = await channel.get_underlay_channel()
    # A lookup of no queue: the server closes the channel once it has read it, and drops
    # whatever the channel sends after it, the acknowledgement below among them.
    doomed = asyncio.ensure_future(
        underlay.queue_declare("rq-no-such-queue-" + uuid.uuid4().hex, passive=True)
    )
    await asyncio.sleep(0)  # written
    await rabbit.acknowledge(held)  # the job ran to its end; this returns at once
    with pytest.raises(Exception, match="NOT_FOUND"):
        await doomed

    assert await reserve_all(rabbit, 1) == [], "the finished job is not run again"
    assert await rabbit.size("default") == 0
