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
to `QUICK_WINDOW` only while the jobs it hands out are settled quickly: when
`QUICK_WINDOW` of them one after another take at most `HOLD_BOUND` on average
(from hand-out to the settle), so a job held beyond the slots waits about
that long at most. Measured as the worker runs, as a moving average; until
it has measured, the window is the slots. A window never shrinks (consuming.py
says why), so a worker whose jobs turn slow keeps the wider window.
"""

from __future__ import annotations

import time

QUICK_WINDOW = 64
"""The least window of a worker whose jobs are quick."""
HOLD_BOUND = 0.2
"""Seconds: the longest `QUICK_WINDOW` jobs may take, one after another, to count as quick."""
WEIGHT = 0.1
"""How much each settled job moves the average."""


class JobPace:
    """The moving average of how long a handed-out job is held before it is settled."""

    __slots__ = ("_since", "seconds")

    def __init__(self) -> None:
        self._since: dict[str, float] = {}
        self.seconds: float | None = None

    def handed_out(self, token: str) -> None:
        self._since[token] = time.monotonic()

    def forget(self, token: str) -> None:
        """A hand-out taken back unrun: not a job's time."""
        self._since.pop(token, None)

    def settled(self, token: str) -> None:
        began = self._since.pop(token, None)
        if began is None:
            return
        took = time.monotonic() - began
        self.seconds = (
            took if self.seconds is None else self.seconds + WEIGHT * (took - self.seconds)
        )

    def clear(self) -> None:
        self._since.clear()

    def least_window(self) -> int:
        """`QUICK_WINDOW` while the jobs are quick, else 0 (the slots decide)."""
        quick = self.seconds is not None and self.seconds * QUICK_WINDOW <= HOLD_BOUND
        return QUICK_WINDOW if quick else 0


__all__ = ["HOLD_BOUND", "QUICK_WINDOW", "JobPace"]
