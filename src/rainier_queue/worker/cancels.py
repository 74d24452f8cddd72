# SPDX-License-Identifier: MIT
"""Which jobs someone cancelled, read on a cadence, and carrying a cancellation out.

`QueueManager.cancel` removes a waiting job where the driver can; a job
that is running (or that the driver cannot remove) gets a mark instead, a
record `cancel:<id>` in the connection's record store, which every worker
of the connection can read wherever it runs. Reading the marks for each
job would put a round trip on every job; so a worker reads them all, one
call, every `pause_check` (a second by default), in a task of its own, and
keeps the ids in a set. That makes the bound: within `pause_check` of a
cancel (plus the read itself), a worker running the job asks its handler
to stop, and a worker that reserves a marked job after that read settles
it as cancelled without running it.

With no marks the read returns nothing and nothing else happens; a job
pays one membership test of an empty set when it starts.

Carrying one out: the job is acknowledged (neither failed nor retried),
a `cancelled:<id>` record is written for `status`, the mark is taken off,
and a warning names the job. A read that fails keeps the last answer and
says so once, like the pause watch.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from datetime import timedelta

from .._clock import utcnow
from ..jobstate import (
    CANCEL_KEY,
    CANCELLED_KEPT,
    CancelledJob,
    RecordStore,
    cancel_key,
    cancelled_key,
)
from .slots import Slot
from .verdicts import Attempt

log = logging.getLogger("rainier_queue.worker")


class CancelWatch:
    """Reads the cancellation marks every `every`; asks the running jobs they name to stop."""

    def __init__(
        self,
        store: RecordStore,
        every: timedelta,
        running: Callable[[], Iterable[Slot]],
        *,
        worker_id: str,
    ) -> None:
        self._store = store
        self._every = every.total_seconds()
        self._running = running
        self._worker_id = worker_id
        self.marked: frozenset[str] = frozenset()
        """The ids of the jobs cancelled, as last read."""
        self._failing = False
        self._stopped = False

    def stop(self) -> None:
        """End `run` after its current read, even if that read swallows the task's
        cancellation (the NATS client's key-value watch, which a read uses, can, and
        redis-py's cluster client was seen to)."""
        self._stopped = True

    async def run(self) -> None:
        """Read the marks every `every`, until cancelled or stopped."""
        while not self._stopped:
            await asyncio.sleep(self._every)
            if not self._stopped:
                await self.check()

    async def check(self) -> None:
        """Read the marks once, and ask each running job they name to stop."""
        try:
            raw = await self._store.records(CANCEL_KEY)
        except Exception as exc:
            if not self._failing:
                self._failing = True
                log.warning("could not read which jobs are cancelled (%s); trying again", exc)
            return
        self._failing = False
        self.marked = frozenset(value.decode() for value in raw)
        if not self.marked:
            return
        for slot in list(self._running()):
            if slot.reservation.job.id in self.marked and not slot.control.stop_asked:
                job = slot.reservation.job
                log.warning(
                    "job `%s` %s was cancelled; asking its handler to stop", job.name, job.id
                )
                slot.control.cancel_job()

    async def carried_out(self, attempt: Attempt, *, while_running: bool) -> None:
        """The job was acknowledged as cancelled: record it for `status`, take the mark off."""
        queued = attempt.reservation.job
        record = CancelledJob(
            job_id=queued.id,
            name=queued.name,
            queue=queued.queue,
            at=utcnow(),
            how="while it ran" if while_running else "before it ran",
            worker=self._worker_id,
        )
        try:
            await self._store.put_record(cancelled_key(queued.id), record.to_json(), CANCELLED_KEPT)
            await self._store.forget_record(cancel_key(queued.id))
        except Exception as exc:
            log.warning(
                "job `%s` %s was cancelled, but its record could not be written: %s",
                queued.name,
                queued.id,
                exc,
            )
        self.marked = self.marked - {queued.id}


__all__ = ["CancelWatch"]
