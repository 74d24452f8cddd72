# SPDX-License-Identifier: MIT
"""Riding out a broker that stopped answering, and knowing when to give up.

A failover or a restart of the broker takes seconds to minutes; a worker
that exits on the first refused connection turns that into an outage of
every queue it served. So broker errors are counted, each one is followed
by a longer (capped, jittered) wait, and any success anywhere (a reserve, a
settle) resets the count. Only an unbroken run of `max_consecutive_errors`
failures ends the worker, with the last error, so a supervisor sees a
non-zero exit and an operator sees why.
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
        self.consecutive = 0
        self.last: BrokerError | None = None

    def succeeded(self) -> None:
        """The broker answered: the outage, if any, is over."""
        self.consecutive = 0

    def failed(self, error: BrokerError) -> timedelta | None:
        """Count `error`; the wait before trying again, or None to give up."""
        self._stats.broker_errors += 1
        self.consecutive += 1
        self.last = error
        if self.consecutive >= self._options.max_consecutive_errors:
            return None
        delay = error_backoff(
            self.consecutive, base=self._options.sleep, cap=self._options.max_error_backoff
        )
        return jittered(delay)


__all__ = ["Outage"]
