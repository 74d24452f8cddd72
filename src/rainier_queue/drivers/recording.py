# SPDX-License-Identifier: MIT
"""`RecordingQueue`: a queue that keeps what is pushed to it and never delivers it.

A test of application code asks "did signing up dispatch a welcome email?",
not "did a worker run it?". Recording behind the same `Queue` port as every
other driver answers that without the manager knowing it is being tested:
`QueueManager.fake()` is an ordinary manager whose connections are
recording queues, so a fake dispatch walks the real dispatch path (payload
checks, connection names, uniqueness locks) and only the last step, the
push, is kept instead of sent.

## Read this before choosing it

Nothing pushed here ever runs: `reserve` finds nothing, so a worker on a
recording queue idles for ever. It is for asserting on dispatches
(`rainier_queue.testing`), never for running jobs; `MemoryQueue` runs them
in-process.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import ClassVar

from typing_extensions import override

from ..envelope import QueuedJob
from ..errors import LeaseLost
from ..queue import Capabilities, Queue, Reservation
from .batching import LocalBatches
from .pausing import LocalPauses


class RecordingQueue(Queue):
    """Keeps every pushed envelope, in push order, in `pushed`."""

    name: ClassVar[str] = "recording"
    capabilities: ClassVar[Capabilities] = Capabilities(
        survives_restart=False,
        shared_between_processes=False,
        failed_store=False,
        pausable=True,
        batches=True,
        ordering_keys=True,  # it runs nothing, so it breaks no order: a keyed job is recorded
    )

    def __init__(self, record: list[QueuedJob] | None = None) -> None:
        self.pushed: list[QueuedJob] = record if record is not None else []
        """What was pushed, oldest first. Queues built on one list share one record."""
        self.pauses = LocalPauses()
        """Queues paused through the fake (`manager.pause`), for a test to read."""
        self.batch_store = LocalBatches(threading.Lock(), self._keep, lambda: None)
        """Batches dispatched to the fake: `run_all` records their jobs' ends, and the
        callbacks that apply are recorded as pushed when the last one ends."""

    def _keep(self, job: QueuedJob, now: datetime) -> None:
        self.pushed.append(job)

    @override
    async def push(self, job: QueuedJob) -> str:
        self.pushed.append(job)
        return job.id

    @override
    async def push_many(self, jobs: Sequence[QueuedJob]) -> list[str]:
        self.pushed.extend(jobs)
        return [job.id for job in jobs]

    @override
    async def reserve(self, queue: str, *, limit: int = 1) -> list[Reservation]:
        return []

    async def pause(self, queue: str) -> bool:
        return await self.pauses.pause(queue)

    async def resume(self, queue: str) -> bool:
        return await self.pauses.resume(queue)

    async def paused(self, queues: Sequence[str]) -> frozenset[str]:
        return await self.pauses.paused(queues)

    @override
    async def acknowledge(self, reservation: Reservation) -> None:
        raise _never_reserved(reservation)

    @override
    async def release(
        self,
        reservation: Reservation,
        *,
        delay: timedelta = timedelta(0),
        count_attempt: bool = True,
    ) -> None:
        raise _never_reserved(reservation)

    @override
    async def fail(self, reservation: Reservation, error: str) -> None:
        raise _never_reserved(reservation)

    @override
    async def size(self, queue: str) -> int:
        """How many recorded jobs were pushed to `queue`."""
        return sum(1 for job in self.pushed if job.queue == queue)

    @override
    async def clear(self, queue: str) -> int:
        """Forget the recorded jobs of `queue`; how many there were."""
        kept = [job for job in self.pushed if job.queue != queue]
        cleared = len(self.pushed) - len(kept)
        self.pushed[:] = kept
        return cleared

    @override
    def describe(self) -> str:
        return "recording (jobs are kept, never run)"


def _never_reserved(reservation: Reservation) -> LeaseLost:
    return LeaseLost(
        f"job `{reservation.job.name}` {reservation.job.id} was never reserved from a "
        "recording queue, which delivers nothing"
    )


__all__ = ["RecordingQueue"]
