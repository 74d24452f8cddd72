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
"""

from __future__ import annotations

from datetime import timedelta

from ..backoff import error_backoff, jittered
from ..errors import BrokerError
from .options import WorkerOptions, WorkerStats


class Outage:
    """Consecutive broker failures, shared by the reserve loop and every settle."""

    def __init__(self, options: WorkerOptions, stats: WorkerStats) -> None:
        self._options = options
        self._stats = stats
        self._runs: dict[str, int] = {}
        self.last: BrokerError | None = None

    @property
    def consecutive(self) -> int:
        """The longest unbroken run of failures, over reserving and settling."""
        return max(self._runs.values(), default=0)

    def succeeded(self, kind: str = "reserve") -> None:
        """The broker did a `kind` of operation: that kind's outage, if any, is over."""
        self._runs[kind] = 0

    def failed(self, error: BrokerError, kind: str = "reserve") -> timedelta | None:
        """Count `error`; the wait before trying again, or None to give up."""
        self._stats.broker_errors += 1
        run = self._runs[kind] = self._runs.get(kind, 0) + 1
        self.last = error
        if run >= self._options.max_consecutive_errors:
            return None
        delay = error_backoff(run, base=self._options.sleep, cap=self._options.max_error_backoff)
        return jittered(delay)


__all__ = ["Outage"]
