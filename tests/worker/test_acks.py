# SPDX-License-Identifier: MIT
"""Jobs that finish together share one acknowledgement round trip."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import timedelta

from typing_extensions import override

from rainier_queue.drivers.memory import MemoryQueue
from rainier_queue.errors import LeaseLost
from rainier_queue.queue import Reservation
from rainier_queue.worker.acks import AckBatcher

from .jobs import PATIENCE, Journal, Meet, Note, Staggered, eventually, push, quick, worker_for


class AckLog(MemoryQueue):
    """A memory queue that records the size of every acknowledgement batch."""

    def __init__(self) -> None:
        super().__init__()
        self.batches: list[int] = []

    @override
    async def acknowledge_many(self, reservations: Sequence[Reservation]) -> list[Exception | None]:
        self.batches.append(len(reservations))
        return await super().acknowledge_many(reservations)


async def test_jobs_that_finish_together_are_acknowledged_in_one_batch() -> None:
    queue = AckLog()
    for _ in range(6):
        await push(queue, Meet(expected=6))
    journal = Journal()

    stats = await worker_for(queue, journal, quick(concurrency=6, stop_when_empty=True)).run()

    assert stats.processed == 6
    assert sum(queue.batches) == 6, "every job acknowledged exactly once"
    assert len(queue.batches) < 6, f"six jobs released at once took {queue.batches} round trips"
    assert await queue.size("default") == 0
    assert queue.reserved_count() == 0


class SlowAcks(MemoryQueue):
    """Acknowledgements wait until the test opens `gate`."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = asyncio.Event()
        self.recorded = 0

    @override
    async def acknowledge_many(self, reservations: Sequence[Reservation]) -> list[Exception | None]:
        await self.gate.wait()
        outcomes = await super().acknowledge_many(reservations)
        self.recorded += len(reservations)
        return outcomes


async def test_the_next_job_starts_while_the_last_ones_acknowledgement_is_on_its_way() -> None:
    queue = SlowAcks()
    for text in ("first", "second", "third"):
        await push(queue, Note(text=text))
    journal = Journal()
    # Nothing held ahead here (test_reserve_ahead.py has the same with a job held).
    options = quick(concurrency=1, stop_when_empty=True, reserve_ahead=0)
    worker = worker_for(queue, journal, options)
    running = asyncio.create_task(worker.run())

    await eventually(lambda: len(journal.ran) == 2, "a second job while the first is unrecorded")
    assert queue.recorded == 0, "no acknowledgement has gone through yet"
    assert queue.reserved_count() == 2, "a concurrency of one holds at most one unrecorded job"
    assert journal.ran == ["first", "second"], "the third waits: only one settle may be pending"
    queue.gate.set()
    stats = await running

    assert stats.processed == 3
    assert journal.ran == ["first", "second", "third"]
    assert queue.reserved_count() == 0


class SlowCombined(MemoryQueue):
    """Says it combines acknowledgements with reserves, and takes a few loop turns to answer."""

    def __init__(self) -> None:
        super().__init__()
        self.in_flight = 0
        self.most_in_flight = 0
        self.carried = 0

    @property
    @override
    def combines_acknowledge_and_reserve(self) -> bool:
        return True

    @override
    async def acknowledge_and_reserve(
        self, reservations: Sequence[Reservation], queue: str, *, limit: int
    ) -> tuple[list[Exception | None], list[Reservation]]:
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            for _ in range(3):
                await asyncio.sleep(0)
            self.carried += len(reservations)
            return await super().acknowledge_and_reserve(reservations, queue, limit=limit)
        finally:
            self.in_flight -= 1


async def test_reserves_on_their_way_together_each_settle_their_own_acknowledgements() -> None:
    queue = SlowCombined()
    for n in range(60):
        await push(queue, Staggered(turns=n % 5))
    journal = Journal()
    options = quick(concurrency=4, stop_when_empty=True, batch_wait=timedelta(0))

    stats = await worker_for(queue, journal, options).run()

    assert stats.processed == 60
    assert len(journal.ran) == 60
    assert queue.most_in_flight == 2, "a second reserve set off while the first was on its way"
    assert queue.carried > 0, "acknowledgements rode along with reserves"
    assert queue.reserved_count() == 0, "every job acknowledged"
    assert await queue.size("default") == 0


class GatedAckLog(AckLog):
    """Records every acknowledgement batch, then holds it until the test opens `gate`."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = asyncio.Event()

    @override
    async def acknowledge_many(self, reservations: Sequence[Reservation]) -> list[Exception | None]:
        self.batches.append(len(reservations))
        await self.gate.wait()
        return await MemoryQueue.acknowledge_many(self, reservations)


async def test_acknowledgements_that_wait_behind_a_batch_are_left_for_the_next_reserve() -> None:
    # Jobs that end while one batch is on its way must not follow it the moment
    # it is back: they wait their delay again, so a reserve can carry them.
    queue = GatedAckLog()
    for _ in range(2):
        await push(queue, Note(text="x"))
    first, second = await queue.reserve("default", limit=2)
    acks = AckBatcher(queue, delay=0.05)

    sent = asyncio.create_task(acks.acknowledge(first))
    await eventually(lambda: queue.batches == [1], "the first acknowledgement is on its way")
    waiting = asyncio.create_task(acks.acknowledge(second))
    await asyncio.sleep(0)  # it joins the batcher while the first batch is out
    queue.gate.set()
    await sent

    taken = acks.take()
    assert taken.reservations == [second], "the later acknowledgement waited to be taken"
    assert queue.batches == [1], "it was not sent on its own behind the first"
    outcomes, _ = await queue.acknowledge_and_reserve(taken.reservations, "default", limit=1)
    taken.settle(outcomes)
    await waiting
    assert queue.reserved_count() == 0


async def test_an_acknowledgement_without_a_wait_hands_each_its_own_outcome() -> None:
    queue = MemoryQueue()
    for _ in range(2):
        await push(queue, Note(text="x"))
    kept, stale = await queue.reserve("default", limit=2)
    await queue.release(stale)  # its token is no longer the job's
    outcomes: dict[str, BaseException | None] = {}
    done = asyncio.Event()

    def told(batch: list[tuple[str, BaseException | None]]) -> None:
        for name, outcome in batch:
            outcomes[name] = outcome
        if len(outcomes) == 2:
            done.set()

    acks = AckBatcher(queue, told=told)
    acks.acknowledge_soon(kept, "kept")
    acks.acknowledge_soon(stale, "stale")
    await asyncio.wait_for(done.wait(), PATIENCE)

    assert outcomes["kept"] is None
    assert isinstance(outcomes["stale"], LeaseLost)
    assert await queue.size("default") == 1, "only the stale one is still queued"
