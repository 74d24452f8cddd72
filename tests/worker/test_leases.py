# SPDX-License-Identifier: MIT
"""Leases: a running job keeps its lease; a job whose lease was lost is not settled."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import timedelta

from typing_extensions import override

from rainier_queue.drivers.memory import MemoryQueue
from rainier_queue.queue import Reservation

from .faults import RenewOutage
from .jobs import Held, Journal, Note, eventually, eventually_async, push, quick, worker_for

LEASE = timedelta(milliseconds=400)
"""Long beside a renewal's round trip, so a test process sharing two cores with two others
(scripts/pytest.sh) is not late to renew by a whole lease; 40 ms was, now and then."""


async def test_renewing_keeps_a_long_job_from_being_taken_by_a_second_worker() -> None:
    queue = RenewOutage(lease=LEASE)
    await push(queue, Held())
    journal = Journal()
    worker = worker_for(queue, journal, quick(stop_when_empty=True, timeout=None))
    running = asyncio.create_task(worker.run())
    await journal.started.wait()

    # Play a second worker for five lease lengths while the job runs.
    for _ in range(10):
        assert await queue.reserve("default") == [], "the running job was handed out again"
        await asyncio.sleep(LEASE.total_seconds() / 2)
    journal.gate.set()
    stats = await running

    assert queue.renewals >= 3
    assert (stats.processed, stats.lost_leases) == (1, 0)
    assert journal.attempts == [("held", 1, 3)]


async def test_a_lease_lost_on_renewal_is_counted_and_the_job_is_not_settled() -> None:
    queue = RenewOutage(lease=LEASE)
    await push(queue, Held())
    journal = Journal()
    worker = worker_for(queue, journal, quick(stop_when_empty=True, timeout=None))
    running = asyncio.create_task(worker.run())
    await journal.started.wait()

    queue.down = True  # renewals fail, so the lease lapses
    await eventually_async(lambda: queue.reserve("default"), "the lapsed job to be taken")
    queue.down = False  # the next renewal learns that the job is someone else's now
    await eventually(lambda: worker.stats.lost_leases == 1, "the lost lease to be noticed")
    journal.gate.set()
    stats = await running

    assert (stats.processed, stats.failed, stats.lost_leases) == (0, 0, 1)
    assert queue.reserved_count() == 1, "the second worker's reservation is untouched"


async def test_a_lease_lost_before_the_acknowledgement_is_counted_and_the_worker_carries_on() -> (
    None
):
    queue = RenewOutage(lease=LEASE)
    await push(queue, Held())
    journal = Journal()
    worker = worker_for(queue, journal, quick(stop_when_empty=True, timeout=None))
    running = asyncio.create_task(worker.run())
    await journal.started.wait()

    queue.down = True  # every renewal fails from here on
    [stolen] = await _taken_by_another_worker(queue)
    journal.gate.set()
    stats = await running

    assert (stats.processed, stats.lost_leases) == (0, 1)
    await queue.acknowledge(stolen)  # the other worker's settle still stands


async def _taken_by_another_worker(queue: MemoryQueue) -> list[Reservation]:
    got: list[Reservation] = []

    async def take() -> list[Reservation]:
        got.extend(await queue.reserve("default"))
        return got

    await eventually_async(take, "the lapsed job to be taken")
    return got


class SlowAnswer(RenewOutage):
    """Acknowledgements are recorded at once, but their answer waits for `answer`."""

    def __init__(self) -> None:
        super().__init__(lease=LEASE)
        self.answer = asyncio.Event()
        self.recorded = asyncio.Event()

    @override
    async def acknowledge_many(self, reservations: Sequence[Reservation]) -> list[Exception | None]:
        outcomes = await super().acknowledge_many(reservations)
        self.recorded.set()
        await self.answer.wait()
        return outcomes


async def test_no_renew_is_sent_while_a_successs_acknowledgement_is_on_its_way() -> None:
    # Once the acknowledgement is recorded, a renew would be refused as stale
    # and counted as a lost lease: the keeper must hold off until the answer is back.
    queue = SlowAnswer()
    await push(queue, Note(text="quick"))
    journal = Journal()
    worker = worker_for(queue, journal, quick(stop_when_empty=True, timeout=None))
    running = asyncio.create_task(worker.run())
    await queue.recorded.wait()
    renewals = queue.renewals

    await asyncio.sleep(3 * LEASE.total_seconds())  # several renewals' worth
    assert queue.renewals == renewals, "a renew went out while the acknowledgement was"
    queue.answer.set()
    stats = await running

    assert (stats.processed, stats.lost_leases) == (1, 0)
    assert queue.reserved_count() == 0
