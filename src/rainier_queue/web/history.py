# SPDX-License-Identifier: MIT
"""The last hour of each queue's depth, kept in the dashboard's own memory.

Why here: no driver keeps a history of its queues' depth (a store holds
jobs, not how many it held a minute ago), and asking every driver to keep
one would cost every push. So the dashboard samples depth itself while its
overview is open, and keeps an hour of samples per queue in this process.
The cost is stated on the page: the line starts when the dashboard does (or
when the queue was first shown), and each dashboard process has its own.

A sample is taken per poll of the overview (every 5 s by default), at most
one per `every` whatever number of tabs are open, so the line is as fine as
the page's own updates; an hour of them is 720 small tuples a queue.

The samples also give each queue's trend (jobs added or drained a minute),
the one rate every driver can be asked for.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

KEPT = timedelta(hours=1)
EVERY = timedelta(seconds=10)
"""Between samples when the page does not poll (each view samples, no more often)."""
FINEST = timedelta(seconds=1)


def sampled_every(poll_seconds: float) -> timedelta:
    """The interval between samples for a page polled every `poll_seconds` (0: never)."""
    if poll_seconds <= 0:
        return EVERY
    return max(timedelta(seconds=poll_seconds), FINEST)


@dataclass(frozen=True, slots=True)
class Sample:
    at: datetime
    depth: int


@dataclass(slots=True)
class History:
    """Depth samples per queue, the last `kept` of them, at most one per `every`."""

    kept: timedelta = KEPT
    every: timedelta = EVERY
    _samples: dict[str, deque[Sample]] = field(default_factory=dict)

    def due(self, queue: str, now: datetime) -> bool:
        """Whether a new sample of `queue` is wanted at `now`."""
        samples = self._samples.get(queue)
        return not samples or now - samples[-1].at >= self.every

    def add(self, queue: str, depth: int, now: datetime) -> None:
        samples = self._samples.setdefault(queue, deque())
        samples.append(Sample(now, depth))
        while samples and now - samples[0].at > self.kept:
            samples.popleft()

    def of(self, queue: str) -> Sequence[Sample]:
        return tuple(self._samples.get(queue, ()))

    def per_minute(self, queue: str, *, over: timedelta = timedelta(minutes=5)) -> float | None:
        """How fast `queue`'s depth changed over the last `over`, in jobs a minute (growing
        is positive); None until two samples at least a sampling interval apart exist."""
        samples = self.of(queue)
        if len(samples) < 2:
            return None
        last = samples[-1]
        first = next((s for s in samples if last.at - s.at <= over), samples[0])
        seconds = (last.at - first.at).total_seconds()
        if seconds < self.every.total_seconds():
            return None
        return (last.depth - first.depth) * 60.0 / seconds


def sparkline(samples: Sequence[Sample], *, width: int = 120, height: int = 24) -> str:
    """The SVG polyline points for `samples` ("" with fewer than two), from the first kept
    sample at the left (an hour ago at most) to the last at the right, the highest depth at
    the top."""
    if len(samples) < 2:
        return ""
    start, end = samples[0].at, samples[-1].at
    span = max((end - start).total_seconds(), 1.0)
    top = max(max(s.depth for s in samples), 1)
    points = []
    for sample in samples:
        x = (sample.at - start).total_seconds() / span * width
        y = height - sample.depth / top * (height - 2) - 1
        points.append(f"{x:.1f},{y:.1f}")
    return " ".join(points)


__all__ = ["EVERY", "FINEST", "KEPT", "History", "Sample", "sampled_every", "sparkline"]
