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

    __slots__ = ("_slice", "expired", "task")

    def __init__(self, task: asyncio.Task[Any], waiting: _Slice) -> None:
        self.task: asyncio.Task[Any] | None = task
        self.expired = False
        self._slice = waiting

    def done(self) -> None:
        """The job's handler returned: nothing to cancel any more.

        The deadline leaves its slice at once, so a finished job's task is
        not kept alive until the slice's timer fires (a minute, with the
        default limit, which under load is a great many tasks); and the
        last one to leave an older slice takes it and its timer with it, so
        a busy worker does not keep a minute's worth of empty slices.
        """
        self._slice.leave(self)
        self.task = None


class _Slice:
    """The deadlines that end within one slice of time, and the timer that ends them."""

    __slots__ = ("_owner", "index", "timer", "waiting")

    def __init__(self, owner: Deadlines, index: int) -> None:
        self._owner = owner
        self.index = index
        self.waiting: set[Deadline] = set()
        self.timer: asyncio.TimerHandle | None = None

    def leave(self, deadline: Deadline) -> None:
        self.waiting.discard(deadline)
        if not self.waiting:
            self._owner.emptied(self)


class Deadlines:
    """Hands out `Deadline`s, with one loop timer per slice that has any."""

    def __init__(self, resolution: float = RESOLUTION) -> None:
        self._resolution = resolution
        self._slices: dict[int, _Slice] = {}
        self._newest = -1
        """The slice made last: new jobs keep joining it, so it stays even when empty
        (dropping it would cost a new timer for nearly every batch of jobs)."""

    def start(self, task: asyncio.Task[Any], seconds: float) -> Deadline:
        """Cancel `task` about `seconds` from now, unless `done()` is called first."""
        loop = asyncio.get_running_loop()
        index = math.ceil((loop.time() + seconds) / self._resolution)
        waiting = self._slices.get(index)
        if waiting is None:
            waiting = self._slices[index] = _Slice(self, index)
            waiting.timer = loop.call_at(index * self._resolution, self._expire, index)
            if index > self._newest:
                previous = self._slices.get(self._newest)
                self._newest = index
                if previous is not None and not previous.waiting:
                    self.emptied(previous)  # no longer the newest: nothing keeps it
        deadline = Deadline(task, waiting)
        waiting.waiting.add(deadline)
        return deadline

    @property
    def pending(self) -> int:
        """Slices with a deadline still in them (each holds one loop timer)."""
        return len(self._slices)

    def emptied(self, piece: _Slice) -> None:
        """`piece` has no deadline left: drop it and its timer, unless jobs still join it."""
        if piece.index != self._newest and self._slices.get(piece.index) is piece:
            del self._slices[piece.index]
            if piece.timer is not None:
                piece.timer.cancel()

    def _expire(self, index: int) -> None:
        ended = self._slices.pop(index, None)
        if ended is None:
            return
        for deadline in ended.waiting:
            task = deadline.task
            if task is not None:
                deadline.task = None
                deadline.expired = True
                task.cancel()


__all__ = ["Deadline", "Deadlines"]
