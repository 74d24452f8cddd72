# SPDX-License-Identifier: MIT
"""Which of its queues a worker serves now: those not paused, read on a cadence.

A pause (`rainier-queue pause QUEUE`) is a mark in the connection's store
(`Pausable`), so every worker on every machine sees the same one. Reading
it before each reserve would put a round trip on every batch of every
worker, paused or not; so a worker reads it every `pause_check` (a second
by default) in a task of its own, and the reserving half serves the queues
the last read left running. That makes the promise: within `pause_check`
of a pause (plus a reserve already on its way), a worker reserves nothing
more from the queue, and the jobs it held ahead unstarted go back with
their attempts refunded; jobs already running finish. On a driver that
cannot pause, nothing here runs at all.

Each change is a warning in the worker's log, naming the queue, so whoever
paused a queue can see every worker let go of it. (Not a worker event:
`events.py`'s listeners are written for jobs, and read `event.job`.)

A read that fails (the store is down) keeps the last answer and says so
once; the reserves that follow fail too, and the worker's outage handling
(`outage.py`) takes over from there.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import timedelta

from ..queue import Pausable

log = logging.getLogger("rainier_queue.worker")

Changed = Callable[[tuple[str, ...], frozenset[str]], None]
"""Told the queues to serve now, and those paused since the last read."""


class PauseWatch:
    """Reads the paused queues every `every`; tells `changed` when the answer changes."""

    def __init__(
        self,
        store: Pausable,
        queues: tuple[str, ...],
        every: timedelta,
        changed: Changed,
    ) -> None:
        self._store = store
        self._queues = queues
        self._every = every.total_seconds()
        self._changed = changed
        self.paused: frozenset[str] = frozenset()
        self._failing = False
        self._stopped = False

    @property
    def serving(self) -> tuple[str, ...]:
        """The worker's queues that are not paused, in priority order."""
        return tuple(q for q in self._queues if q not in self.paused)

    def stop(self) -> None:
        """End `run` after its current read, even if that read swallows the task's
        cancellation (a client that catches it mid-call, as redis-py's can)."""
        self._stopped = True

    async def run(self) -> None:
        """Read the marks every `every`, until cancelled or stopped."""
        while not self._stopped:
            await asyncio.sleep(self._every)
            if not self._stopped:
                await self.check()

    async def check(self) -> None:
        """Read the marks once; on a change, say so and tell the worker."""
        try:
            now = await self._store.paused(self._queues)
        except Exception as exc:
            if not self._failing:
                self._failing = True
                log.warning(
                    "could not read which queues are paused (%s); serving %s as before",
                    exc,
                    ", ".join(self.serving) or "nothing",
                )
            return
        self._failing = False
        if now == self.paused:
            return
        newly, resumed = now - self.paused, self.paused - now
        self.paused = now
        for queue in self._in_order(newly):
            log.warning("queue `%s` is paused; taking none of its jobs until it is resumed", queue)
        for queue in self._in_order(resumed):
            log.warning("queue `%s` is resumed; taking its jobs again", queue)
        self._changed(self.serving, newly)

    def _in_order(self, queues: frozenset[str]) -> list[str]:
        return [q for q in self._queues if q in queues]


__all__ = ["PauseWatch"]
