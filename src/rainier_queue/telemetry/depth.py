# SPDX-License-Identifier: MIT
"""Queue depth, read when Prometheus scrapes rather than counted per job.

Why at scrape time: a depth kept up to date per job would cost every push
and every settle a round trip (or be wrong across processes); read when a
scrape asks, it costs one `size` per queue per scrape, and what it shows
is what the broker holds, whoever pushed it. The scrape runs on the HTTP
server's thread, and a queue belongs to its event loop, so the reads are
sent to that loop and waited for, a few seconds at most.

Three metrics:

- `rainier_queue_queue_depth{queue}`: `Queue.size`, the jobs waiting,
  delayed ones included, reserved ones not; every driver answers it;
- `rainier_queue_queue_jobs{queue,state}`: waiting, delayed and reserved
  apart, from drivers that can count by state (`Countable`);
- `rainier_queue_queue_oldest_job_age_seconds{queue}`: how long the job
  due longest ago and not yet reserved has been due, 0 when none is, from
  drivers that can tell (`OldestWaiting`).

Where a driver cannot tell one, it is absent for that queue rather than
guessed: a missing series says "unknown", where a made-up 0 would say
"fine".

A read that fails or takes too long is logged and leaves the queue's
samples out of that scrape (a gap, not a zero that looks like an empty
queue), and counts in `rainier_queue_depth_read_errors_total`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import timedelta

from ..queue import Countable, OldestWaiting, Queue, QueueCounts
from .extras import MissingExtra

try:
    from prometheus_client import Counter
    from prometheus_client.core import GaugeMetricFamily
    from prometheus_client.registry import Collector, CollectorRegistry
except ImportError as exc:  # pragma: no cover - the extra's absence is tested in a clean venv
    raise MissingExtra("Prometheus metrics", "prometheus", "prometheus-client") from exc

log = logging.getLogger("rainier_queue.metrics")

READ_TIMEOUT = 5.0
"""Seconds a scrape waits for the queue to answer before leaving its depth out."""


@dataclass(frozen=True, slots=True)
class Depth:
    """What one queue holds, as read for one scrape."""

    size: int
    counts: QueueCounts | None
    """By state, from a `Countable` driver; None from the others."""
    oldest: timedelta | None
    """How long the oldest due job has waited (0 when none is due), from an
    `OldestWaiting` driver; None from the others."""


async def read_depth(queue: Queue, name: str) -> Depth:
    """`name`'s size, and its counts by state and oldest wait where the driver can tell."""
    counts = await queue.counts(name) if isinstance(queue, Countable) else None
    oldest = None
    if isinstance(queue, OldestWaiting):
        oldest = await queue.oldest_wait(name) or timedelta(0)
    return Depth(size=await queue.size(name), counts=counts, oldest=oldest)


class DepthCollector(Collector):
    """A custom collector reading each queue's depth on `loop` at every scrape."""

    def __init__(
        self,
        queue: Queue,
        queues: Sequence[str],
        loop: asyncio.AbstractEventLoop,
        registry: CollectorRegistry,
        *,
        timeout: float = READ_TIMEOUT,
    ) -> None:
        self._queue = queue
        self._queues = tuple(queues)
        self._loop = loop
        self._timeout = timeout
        self._errors = Counter(
            "rainier_queue_depth_read_errors",
            "Scrapes that could not read a queue's depth (failed or too slow).",
            ("queue",),
            registry=registry,
        )
        registry.register(self)

    def describe(self) -> Iterator[GaugeMetricFamily]:
        yield from self._families()

    def collect(self) -> Iterator[GaugeMetricFamily]:
        depth, jobs, oldest = self._families()
        for name in self._queues:
            found = self._read(name)
            if found is None:
                continue
            depth.add_metric([name], found.size)
            if found.counts is not None:
                jobs.add_metric([name, "waiting"], found.counts.waiting)
                jobs.add_metric([name, "delayed"], found.counts.delayed)
                jobs.add_metric([name, "reserved"], found.counts.reserved)
            if found.oldest is not None:
                oldest.add_metric([name], found.oldest.total_seconds())
        yield depth
        yield jobs
        yield oldest

    def _families(self) -> tuple[GaugeMetricFamily, GaugeMetricFamily, GaugeMetricFamily]:
        return (
            GaugeMetricFamily(
                "rainier_queue_queue_depth",
                "Jobs waiting on the queue, delayed ones included, reserved ones not.",
                labels=["queue"],
            ),
            GaugeMetricFamily(
                "rainier_queue_queue_jobs",
                "The queue's jobs by state (waiting, delayed, reserved), where the driver "
                "can count them.",
                labels=["queue", "state"],
            ),
            GaugeMetricFamily(
                "rainier_queue_queue_oldest_job_age_seconds",
                "How long the job due longest ago and not yet reserved has been due; 0 when "
                "none is. Absent where the driver cannot tell.",
                labels=["queue"],
            ),
        )

    def _read(self, name: str) -> Depth | None:
        future = asyncio.run_coroutine_threadsafe(read_depth(self._queue, name), self._loop)
        try:
            return future.result(self._timeout)
        except Exception as exc:
            future.cancel()
            self._errors.labels(name).inc()
            log.warning("could not read the depth of queue `%s` for a scrape: %s", name, exc)
            return None


__all__ = ["READ_TIMEOUT", "Depth", "DepthCollector", "read_depth"]
