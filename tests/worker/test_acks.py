# SPDX-License-Identifier: MIT
"""Jobs that finish together share one acknowledgement round trip."""

from __future__ import annotations

from collections.abc import Sequence

from typing_extensions import override

from rainier_queue.drivers.memory import MemoryQueue
from rainier_queue.queue import Reservation

from .jobs import Journal, Meet, push, quick, worker_for


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
