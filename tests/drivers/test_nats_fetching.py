# SPDX-License-Identifier: MIT
"""A NATS worker's idle wait cancelled after its message came loses no delivery.

`wait_and_reserve` waits on the server for one message, then takes the rest
of its limit at once. A worker cancels that wait whenever it stops waiting
(a slot freed, a stop). Cancelled during the second step, the message the
wait had already brought was dropped: the server held it as delivered,
nobody ran it, and after the ack wait it came back counted as an attempt
no handler had made (seen in the thread-overrun fault test: a job's
attempts went 1, then 3).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pytest

from rainier_queue.connections import open_queue
from rainier_queue.drivers.nats import NATSQueue
from rainier_queue.drivers.nats.fetching import Arrival, Fetcher
from rainier_queue.envelope import QueuedJob

from ..contract.backends import BACKENDS  # first: it imports every backend_*.py in turn

# isort: split
from ..contract.backend_nats import SERVER, check, cleanup, prepare

assert "nats" in BACKENDS


@pytest.fixture
async def namespace(tmp_path: Path) -> AsyncIterator[str]:
    check()
    name = "rqw" + uuid.uuid4().hex[:10]
    prepare(tmp_path, name, ["default"])
    yield name
    await cleanup(tmp_path, name)


async def test_a_wait_cancelled_while_taking_more_keeps_the_message_it_brought(
    namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    queue = open_queue(f"{SERVER}/?prefix={namespace}")
    assert isinstance(queue, NATSQueue)
    try:
        job = QueuedJob.create("noop", {})
        await queue.push(job)

        taking = asyncio.Event()
        original = Fetcher.take
        jobs = (await queue._serve("default")).fetcher  # not the delay movers' fetchers

        async def take_that_hangs(self: Fetcher, limit: int) -> list[Arrival]:
            if self is jobs:
                taking.set()  # the wait's message is in hand: hold the call here
                await asyncio.Event().wait()
            return await original(self, limit)

        monkeypatch.setattr(Fetcher, "take", take_that_hangs)
        waiting = asyncio.create_task(
            queue.wait_and_reserve("default", timedelta(seconds=5), limit=2)
        )
        await asyncio.wait_for(taking.wait(), 10)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        monkeypatch.setattr(Fetcher, "take", original)

        got = await queue.reserve("default")
        assert [r.job.id for r in got] == [job.id], "the delivery the wait brought was dropped"
        assert got[0].job.attempts == 1, "a delivery nobody ran was counted as an attempt"
        await queue.acknowledge(got[0])
    finally:
        await queue.aclose()
