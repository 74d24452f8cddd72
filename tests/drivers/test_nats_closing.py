# SPDX-License-Identifier: MIT
"""A NATS queue closes even when one of its background loops swallowed its cancellation.

A queue a worker served runs a delay mover and a sweep per queue, each a
loop that `aclose` ends by cancelling. On Python 3.11, `asyncio.wait_for`
(which nats-py waits for every answer with) returns its inner call's result
instead of raising when the cancellation lands as that call completes; the
loop then went round again, and `aclose`, having cancelled once, awaited it
for ever: a draining CLI worker finished its jobs and never exited. Here a
call of each loop swallows its first cancellation the same way, on purpose.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from rainier_queue.connections import open_queue
from rainier_queue.drivers.nats import NATSQueue
from rainier_queue.drivers.nats.exhausted import ExhaustedMover
from rainier_queue.drivers.nats.fetching import Arrival, Fetcher

from ..contract.backends import BACKENDS  # first: it imports every backend_*.py in turn

# isort: split
from ..contract.backend_nats import SERVER, check, cleanup, prepare

assert "nats" in BACKENDS


@pytest.fixture
async def namespace(tmp_path: Path) -> AsyncIterator[str]:
    check()
    name = "rqc" + uuid.uuid4().hex[:10]
    prepare(tmp_path, name, ["default"])
    yield name
    await cleanup(tmp_path, name)


class Swallower:
    """The first call made while `armed` holds until cancelled, then returns as if answered."""

    def __init__(self) -> None:
        self.armed = False
        self.holding = asyncio.Event()
        self.swallowed = 0

    async def hold(self) -> bool:
        """True once it swallowed a cancellation; False when not armed (call through)."""
        if not self.armed or self.swallowed:
            return False
        self.holding.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            self.swallowed += 1
        return True


async def test_a_queue_closes_when_its_delay_mover_swallowed_a_cancellation(
    namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    queue = open_queue(f"{SERVER}/?prefix={namespace}")
    assert isinstance(queue, NATSQueue)
    swallower = Swallower()
    original = Fetcher.wait
    served = await queue._serve("default")

    async def wait(self: Fetcher, seconds: float, limit: int = 1) -> list[Arrival]:
        if self is served.delays and await swallower.hold():
            return []
        return await original(self, seconds, limit)

    monkeypatch.setattr(Fetcher, "wait", wait)
    swallower.armed = True
    await asyncio.wait_for(swallower.holding.wait(), 20)  # the mover's next wait holds
    closing = asyncio.create_task(queue.aclose())
    # A liveness bound, not a timing: cancelled once, the mover goes round again and
    # waits on the server, and the close never ends.
    done, _ = await asyncio.wait({closing}, timeout=30)
    assert swallower.swallowed == 1
    assert closing in done, "the queue's close waited for ever on its delay mover"
    await closing


async def test_a_queue_closes_when_its_sweep_swallowed_a_cancellation(
    namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    queue = open_queue(f"{SERVER}/?prefix={namespace}&sweep_every=0.05s")
    assert isinstance(queue, NATSQueue)
    swallower = Swallower()
    original = ExhaustedMover.sweep

    async def sweep(self: ExhaustedMover) -> int:
        if await swallower.hold():
            return 0
        return await original(self)

    monkeypatch.setattr(ExhaustedMover, "sweep", sweep)
    await queue._serve("default")
    swallower.armed = True
    await asyncio.wait_for(swallower.holding.wait(), 20)
    closing = asyncio.create_task(queue.aclose())
    done, _ = await asyncio.wait({closing}, timeout=30)
    assert swallower.swallowed == 1
    assert closing in done, "the queue's close waited for ever on its sweep"
    await closing
