# SPDX-License-Identifier: MIT
"""How many jobs a worker's consumer may hold: its free slots, or more while its jobs are quick.

Why: a quorum queue counts a slot of a consumer's window free again only once
the acknowledgement has gone through the queue's Raft log, so every slot
waits about a commit per job, however quick the job. Measured here
(`bench.studies.amqp_window`, one bare consumer, RabbitMQ 3.10): a window of 8
drained 2,100 jobs/s, 24 drained 4,000 and 64 drained 4,700, where a classic
queue gave 4,100, 5,300 and 6,700. A window the size of a worker's slots (what
the consumer asks for, consuming.py) held a worker at concurrency 8 to about
half of Dramatiq's drain on classic queues.

A window wider than the slots is a cost when jobs are long: the jobs in it
wait for this worker while another may stand idle. So the window is widened
to `QUICK_WINDOW` only while this worker settles jobs quickly enough that a
window that full empties within `HOLD_BOUND`: at least `QUICK_WINDOW /
HOLD_BOUND` (320) jobs a second, measured as a moving average of the time
between its settles. A job held beyond the slots then waits about that long
at most. Until it has measured, the window is the slots. A window never
shrinks (consuming.py says why), so a worker whose jobs turn slow keeps the
wider window.

Measured between settles rather than from hand-out to settle: in a full
window each job's own hold includes its wait behind the others, so the
window it is measured for would decide the measure.
"""

from __future__ import annotations

import time

QUICK_WINDOW = 64
"""The least window of a worker whose jobs are quick."""
HOLD_BOUND = 0.2
"""Seconds: the longest a full `QUICK_WINDOW` may take to empty, at the rate jobs are settled."""
WEIGHT = 0.1
"""How much each settle moves the average."""


class JobPace:
    """The moving average of the seconds between one settled job and the next."""

    __slots__ = ("_last", "seconds")

    def __init__(self) -> None:
        self._last: float | None = None
        self.seconds: float | None = None

    def settled(self, jobs: int) -> None:
        """`jobs` were settled together just now."""
        now = time.monotonic()
        last, self._last = self._last, now
        if last is None or jobs < 1:
            return
        each = (now - last) / jobs
        average = self.seconds
        self.seconds = each if average is None else average + WEIGHT * (each - average)

    def least_window(self) -> int:
        """`QUICK_WINDOW` while jobs are settled quickly, else 0 (the slots decide)."""
        quick = self.seconds is not None and self.seconds * QUICK_WINDOW <= HOLD_BOUND
        return QUICK_WINDOW if quick else 0


__all__ = ["HOLD_BOUND", "QUICK_WINDOW", "JobPace"]
