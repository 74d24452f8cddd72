# SPDX-License-Identifier: MIT
"""RabbitMQ's `size` and `clear` read several queues, one after another, while jobs move.

A delayed job waits in a delay tier, which dead-letters it into the work queue
when its time is up. `size` declares each queue in turn, and no read covers
them all at once; so it reads them in the order a job travels (tiers, then the
work queue, then what the broker pushed to this object). A job that moves on
between two reads is then counted again downstream, never missed. Reading the
work queue first missed such a job once in the contract suite (a 250 ms tier).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import aio_pika
import pytest

from rainier_queue.drivers.rabbitmq import RabbitMQQueue
from rainier_queue.drivers.rabbitmq.names import tier_queue, work_queue

from .conftest import a_job
from .rabbitmq_emails import HOST, emails_prefix, opened

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
async def prefix() -> AsyncIterator[str]:
    async with emails_prefix("n") as prefix:
        yield prefix


async def ready_in(name: str) -> int:
    connection = await aio_pika.connect(f"amqp://guest:guest@{HOST}/")
    try:
        channel = await (await connection.channel()).get_underlay_channel()
        return int((await channel.queue_declare(name, passive=True)).message_count or 0)
    finally:
        await connection.close()


async def until_ready(name: str, count: int) -> None:
    """Wait until queue `name` holds `count` ready messages: the job has moved."""
    for _ in range(200):
        if await ready_in(name) == count:
            return
        await asyncio.sleep(0.05)
    pytest.fail(f"the job never left its 1 s delay tier ({name} never held {count})")


def moved_between_reads(queue: RabbitMQQueue, work: str) -> list[str]:
    """Make `queue`'s second read of a count wait until the delayed job is in the work queue;
    returns the names read, in order."""
    client = getattr(queue, "_client")  # noqa: B009 - the driver's own connection
    declare = client.declare
    read: list[str] = []

    async def declared(name: str, **kwargs: Any) -> int:
        read.append(name)
        if len(read) == 2:
            await until_ready(work, 1)
        count: int = await declare(name, **kwargs)
        return count

    client.declare = declared
    return read


async def test_a_job_leaving_its_delay_tier_while_it_is_counted_is_not_missed(prefix: str) -> None:
    queue = opened(prefix)
    try:
        await queue.provision(["emails"])
        # Ten minutes to wait, in the 1 s tier: it comes out with the rest still to go
        # and stays in the work queue, since nobody here takes from it.
        await queue.push(a_job("emails", delay=timedelta(minutes=10)))
        work = work_queue(prefix, "emails")
        read = moved_between_reads(queue, work)

        counted = await queue.size("emails")

        assert counted >= 1, f"a job moving from its tier to the work queue was missed ({read})"
        assert read[-1] == work, f"the work queue was read before a tier: {read}"
        assert await queue.size("emails") == 1
    finally:
        await queue.aclose()


async def test_a_job_leaving_its_delay_tier_while_the_queue_is_cleared_is_cleared(
    prefix: str,
) -> None:
    queue = opened(prefix)
    try:
        await queue.provision(["emails"])
        await queue.push(a_job("emails", delay=timedelta(minutes=10)))
        work = work_queue(prefix, "emails")
        client = getattr(queue, "_client")  # noqa: B009 - the driver's own connection
        purge = client.purge
        purged: list[str] = []

        tier = tier_queue(prefix, "emails", timedelta(seconds=1))

        async def purging(name: str) -> int:
            purged.append(name)
            if len(purged) == 2:  # the job has left its tier before the second purge
                await until_ready(tier, 0)
            count: int = await purge(name)
            return count

        client.purge = purging

        cleared = await queue.clear("emails")

        assert await queue.size("emails") == 0, f"a job leaving its tier outlived {purged}"
        assert cleared == 1
        assert purged[-1] == work, f"the work queue was purged before a tier: {purged}"
    finally:
        await queue.aclose()
