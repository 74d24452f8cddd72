# SPDX-License-Identifier: MIT
"""The worker's heartbeat: who it is, what it serves and runs, written on a cadence.

Why: an operator asking "which workers are up, and what are they doing?"
had only process lists on each machine. A worker on a driver that keeps
records (`Capabilities.records`) now writes one small record every
`HEARTBEAT_EVERY` (not per job: the hot path pays nothing) with its host,
pid, queues, concurrency, start, running jobs with their start times, and
its totals. A clean stop deletes it; a worker that dies stops beating and
is shown as gone once its last beat is `GONE_AFTER` old, then its record
expires (`GONE_KEPT_FOR` later), so no one has to clean up after it.

A failing write is logged and tried again at the next beat: the heartbeat
never stops a worker.
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import socket
import time
from collections.abc import Callable
from datetime import datetime, timedelta

from .._clock import utcnow
from ..jobstate import (
    GONE_AFTER,
    GONE_KEPT_FOR,
    RecordStore,
    RunningJob,
    WorkerBeat,
    worker_key,
)
from .options import WorkerOptions, WorkerStats
from .slots import Slots

log = logging.getLogger("rainier_queue.worker")


def new_worker_id() -> str:
    """host:pid:random, so two workers in one process (or a reused pid) differ."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"


class Heartbeat:
    """Writes this worker's `WorkerBeat` every `every` until stopped, and deletes it after."""

    def __init__(
        self,
        store: RecordStore,
        options: WorkerOptions,
        slots: Slots,
        stats: WorkerStats,
        *,
        every: timedelta,
        worker_id: str,
        is_stopping: Callable[[], bool],
    ) -> None:
        self._store = store
        self._options = options
        self._slots = slots
        self._stats = stats
        self.every = every
        self.worker_id = worker_id
        self._is_stopping = is_stopping
        self._started_at = utcnow()
        self._key = worker_key(worker_id)
        self._failing = False
        self._stopped = False
        self._wall_starts: dict[tuple[str, float], datetime] = {}
        """Each running job's start on the wall clock, worked out once from its slot's
        monotonic start, so every beat reports the same time for it."""

    def snapshot(self) -> WorkerBeat:
        """This worker now, as its heartbeat says it."""
        now = utcnow()
        mono = time.monotonic()
        starts: dict[tuple[str, float], datetime] = {}
        for slot in list(self._slots.running.values()):
            if slot.started:
                key = (slot.reservation.job.id, slot.started)
                starts[key] = self._wall_starts.get(key) or _wall(now, mono, slot.started)
        self._wall_starts = starts
        running = tuple(
            RunningJob(
                job_id=slot.reservation.job.id,
                name=slot.reservation.job.name,
                queue=slot.reservation.job.queue,
                attempt=slot.reservation.job.attempts,
                started_at=starts[(slot.reservation.job.id, slot.started)],
            )
            for slot in list(self._slots.running.values())
            if (slot.reservation.job.id, slot.started) in starts
        )
        return WorkerBeat(
            worker_id=self.worker_id,
            host=socket.gethostname(),
            pid=os.getpid(),
            queues=tuple(self._options.queues),
            concurrency=self._options.concurrency,
            started_at=self._started_at,
            last_beat=now,
            every=self.every,
            running=running,
            processed=self._stats.processed,
            retried=self._stats.released,
            failed=self._stats.failed,
            stopping=self._is_stopping(),
        )

    async def beat(self) -> None:
        """Write the heartbeat once; a failure is logged (once per outage), never raised."""
        ttl = max(GONE_AFTER, 6 * self.every) + GONE_KEPT_FOR
        try:
            await self._store.put_record(self._key, self.snapshot().to_json(), ttl)
        except Exception as exc:
            if not self._failing:
                log.warning("could not write this worker's heartbeat (tried again): %s", exc)
            self._failing = True
        else:
            self._failing = False

    def stop(self) -> None:
        """End `run` after its current beat, even if that write swallows the cancellation."""
        self._stopped = True

    async def run(self) -> None:
        """Beat now, then every `every`, until cancelled or stopped."""
        while not self._stopped:
            await self.beat()
            if not self._stopped:
                await asyncio.sleep(self.every.total_seconds())

    async def remove(self) -> None:
        """A clean stop: the record goes, so the worker is not shown as gone."""
        try:
            await self._store.forget_record(self._key)
        except Exception as exc:
            log.warning("could not remove this worker's heartbeat (it expires): %s", exc)


def _wall(now: datetime, mono: float, started: float) -> datetime:
    return now - timedelta(seconds=max(mono - started, 0.0))


__all__ = ["Heartbeat", "new_worker_id"]
