# SPDX-License-Identifier: MIT
"""Per-job time limits from one timer per slice of time, not one timer per job.

Every job runs under a limit (its own `timeout`, else the worker's), and
a timer per job costs a heap entry on the way in and a cancelled one on
the way out: for small jobs that was a tenth of the worker's time. Job
limits are seconds long and nobody needs them to the millisecond, so the
jobs whose limits end within the same slice (`RESOLUTION`) share one timer:
it fires at the end of the slice and cancels those still running. A limit
is therefore kept to within one slice, late, never early.
"""

from __future__ import annotations

import asyncio
import math
from typing import Any

RESOLUTION = 0.05
"""Seconds per slice: how late past its limit a job may be stopped."""


class Deadline:
    """One running job's limit: cancel its task if it is still running when the limit passes."""

    __slots__ = ("expired", "running", "task")

    def __init__(self, task: asyncio.Task[Any]) -> None:
        self.task = task
        self.running = True
        self.expired = False

    def done(self) -> None:
        """The job's handler returned: nothing to cancel any more."""
        self.running = False


class Deadlines:
    """Hands out `Deadline`s, with one loop timer per slice that has any."""

    def __init__(self, resolution: float = RESOLUTION) -> None:
        self._resolution = resolution
        self._slices: dict[int, list[Deadline]] = {}

    def start(self, task: asyncio.Task[Any], seconds: float) -> Deadline:
        """Cancel `task` about `seconds` from now, unless `done()` is called first."""
        loop = asyncio.get_running_loop()
        index = math.ceil((loop.time() + seconds) / self._resolution)
        deadline = Deadline(task)
        waiting = self._slices.get(index)
        if waiting is None:
            waiting = self._slices[index] = []
            loop.call_at(index * self._resolution, self._expire, index)
        waiting.append(deadline)
        return deadline

    def _expire(self, index: int) -> None:
        for deadline in self._slices.pop(index, ()):
            if deadline.running:
                deadline.running = False
                deadline.expired = True
                deadline.task.cancel()


__all__ = ["Deadline", "Deadlines"]
