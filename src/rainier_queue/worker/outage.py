# SPDX-License-Identifier: MIT
"""Riding out a broker that stopped answering, and knowing when to give up.

A failover or a restart of the broker takes seconds to minutes; a worker
that exits on the first refused connection turns that into an outage of
every queue it served. So broker errors are counted, each one is followed
by a longer (capped, jittered) wait, and a success resets the count.
Only an unbroken run of `max_consecutive_errors` failures ends the worker,
with the last error, so a supervisor sees a non-zero exit and an operator
sees why.

Reserving and settling are counted apart: a broker that hands out work but
never records a result is broken for the worker's purposes, and the
reserves it keeps answering must not hide that the settles never land.

One outage is one error, however many operations it catches. A restart
that fails the acknowledgements of 24 jobs finishing in the same second
once counted 24 errors in a row: the 24th gave the worker up (at the
default limit of 20) and the 8th waited half a minute for a blip of 0.2 s.
So a failure that comes in the first half of an earlier one's wait is part
of that failure: it is not counted again, and it waits only until the same
moment, when all of them try again together. (A retry comes at the end of
its wait, so a broker that stays down is still counted once per round.)
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import timedelta

from ..backoff import error_backoff, jittered
from ..errors import BrokerError
from .options import WorkerOptions, WorkerStats


class Outage:
    """Consecutive broker failures, shared by the reserve loop and every settle."""

    def __init__(
        self,
        options: WorkerOptions,
        stats: WorkerStats,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._options = options
        self._stats = stats
        self._clock = clock
        self._runs: dict[str, int] = {}
        self._window: dict[str, tuple[float, float]] = {}
        """Per kind, the last counted failure's (time, time it said to try again)."""
        self.last: BrokerError | None = None
        self.gave_up_after = 0
        """The run of failures that ended the worker (0 while it has not given up)."""

    @property
    def consecutive(self) -> int:
        """The longest unbroken run of failures, over reserving and settling."""
        return max(self._runs.values(), default=0)

    def succeeded(self, kind: str = "reserve") -> None:
        """The broker did a `kind` of operation: that kind's outage, if any, is over."""
        self._runs[kind] = 0
        self._window.pop(kind, None)

    def failed(self, error: BrokerError, kind: str = "reserve") -> timedelta | None:
        """Count `error`; the wait before trying again, or None to give up.

        A failure soon after the last counted one (in the first half of its
        wait) is the same outage: it waits for the same moment and is not
        counted again.
        """
        self._stats.broker_errors += 1
        self.last = error
        now = self._clock()
        if (window := self._window.get(kind)) is not None:
            failed_at, retry_at = window
            # Within the first half of the wait: caught by the same outage. (A retry
            # comes at the end of the wait, never this early, so it is counted.)
            if now < failed_at + (retry_at - failed_at) / 2:
                return jittered(timedelta(seconds=retry_at - now), spread=0.05)
        run = self._runs[kind] = self._runs.get(kind, 0) + 1
        if run >= self._options.max_consecutive_errors:
            self.gave_up_after = run
            return None
        delay = jittered(
            error_backoff(run, base=self._options.sleep, cap=self._options.max_error_backoff)
        )
        self._window[kind] = (now, now + delay.total_seconds())
        return delay


__all__ = ["Outage"]
