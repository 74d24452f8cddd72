# SPDX-License-Identifier: MIT
"""Batches kept in this process, for `memory://`, whose workers all live here anyway.

The memory driver's jobs are in this process, so its batches are too: a
dict of counters and done-markers, changed under the queue's own lock, the
lock its pushes take. Recording a batch's last job and queuing its
callbacks happen under one hold of that lock, so no other worker thread
can see the batch finished without its callbacks queued, and a second
record of the same job finds its marker (or the batch finished) and
changes nothing (`batchstate.py` says why that is the whole promise).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from .._clock import utcnow
from ..batchstate import BatchProgress, Callback, Member, Outcome, finished_counts
from ..envelope import QueuedJob


@dataclass(slots=True)
class _Batch:
    total: int
    callbacks: tuple[Callback, ...]
    created_at: datetime
    counted: dict[str, int] = field(default_factory=dict)
    done: set[str] | None = field(default_factory=set)
    """Finished job ids; None once the batch is finished (nothing more is counted)."""
    finished_at: datetime | None = None

    def progress(self, batch_id: str) -> BatchProgress:
        return BatchProgress(
            id=batch_id,
            total=self.total,
            succeeded=self.counted.get("succeeded", 0),
            failed=self.counted.get("failed", 0),
            cancelled=self.counted.get("cancelled", 0),
            created_at=self.created_at,
            finished_at=self.finished_at,
            callbacks=tuple((c.kind, c.name()) for c in self.callbacks),
        )


class LocalBatches:
    """`BatchStore` in this process's memory, under the lock `enqueue` is called with."""

    def __init__(
        self,
        lock: threading.Lock,
        enqueue: Callable[[QueuedJob, datetime], None],
        notify: Callable[[], None],
    ) -> None:
        self._lock = lock
        self._enqueue = enqueue
        """Queue one job; called with `lock` held."""
        self._notify = notify
        self._batches: dict[str, _Batch] = {}

    async def open_batch(self, batch_id: str, total: int, callbacks: Sequence[Callback]) -> None:
        with self._lock:
            if batch_id in self._batches:
                raise ValueError(f"batch {batch_id} exists already")
            self._batches[batch_id] = _Batch(total, tuple(callbacks), utcnow())

    async def record_in_batch(
        self, batch: Member, job_id: str, outcome: Outcome
    ) -> BatchProgress | None:
        queued = False
        with self._lock:
            kept = self._batches.get(batch.batch_id)
            if kept is None:
                return None
            if kept.done is not None and job_id not in kept.done:
                kept.done.add(job_id)
                kept.counted[outcome.value] = kept.counted.get(outcome.value, 0) + 1
                counts = finished_counts(batch.batch_id, kept.total, kept.counted)
                if counts is not None:
                    now = utcnow()
                    for callback in kept.callbacks:
                        if callback.applies(counts):
                            self._enqueue(callback.job(counts), now)
                            queued = True
                    kept.done = None
                    kept.finished_at = now
            progress = kept.progress(batch.batch_id)
        if queued:
            self._notify()
        return progress

    async def batch_progress(self, batch_id: str) -> BatchProgress | None:
        with self._lock:
            kept = self._batches.get(batch_id)
            return None if kept is None else kept.progress(batch_id)


__all__ = ["LocalBatches"]
