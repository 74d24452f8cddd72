# SPDX-License-Identifier: MIT
"""When a busy worker should reserve ahead: only when its jobs are short next to a reserve.

A worker whose jobs all finish before the next batch can come back sits idle
for a round trip per batch: with jobs of a few microseconds and a broker a
fraction of a millisecond away, that idle time is most of its time. Holding
one batch more than it runs, reserved and waiting, hides the round trip.
But a job held that way is a job no other worker can start, which is a
bad trade when jobs take seconds: a second worker left idle while this
one holds work it will not reach for a long time.

So the worker holds jobs ahead only while a reserve is a sizeable part of
a job's time: while its jobs, on average, take less than `RATIO` reserves.
Then a slot that frees waits a good share of a job's time for its next job
without one held, and a held job waits at most about one job's time for
its slot. Both are measured as the worker runs (moving averages, so a
change of workload moves the answer within a few dozen jobs); a worker
that has not measured both yet does not reserve ahead.
"""

from __future__ import annotations

WEIGHT = 0.1
"""How much each new measure moves its average."""

RATIO = 4.0
"""Jobs taking less than this many reserve round trips are held ahead."""


class Pace:
    """Moving averages of handler time and reserve time, and what they say about holding ahead."""

    __slots__ = ("job_seconds", "reserve_seconds")

    def __init__(self) -> None:
        self.job_seconds: float | None = None
        self.reserve_seconds: float | None = None

    def job_took(self, seconds: float) -> None:
        """One handler ran for `seconds` (a job that was never run is not counted)."""
        self.job_seconds = _moved(self.job_seconds, seconds)

    def reserve_took(self, seconds: float) -> None:
        """One reserve round trip that brought jobs took `seconds`."""
        self.reserve_seconds = _moved(self.reserve_seconds, seconds)

    @property
    def jobs_outrun_reserves(self) -> bool:
        """Whether a reserve is a sizeable part of a job's time, so holding ahead pays."""
        job, reserve = self.job_seconds, self.reserve_seconds
        return job is not None and reserve is not None and job < RATIO * reserve


def _moved(average: float | None, sample: float) -> float:
    sample = max(0.0, sample)
    return sample if average is None else average + WEIGHT * (sample - average)


__all__ = ["Pace"]
