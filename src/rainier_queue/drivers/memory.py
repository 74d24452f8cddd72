# SPDX-License-Identifier: MIT
"""`MemoryQueue`: the `Queue` port inside one process, for tests and development.

## Read this before choosing it

Everything lives in this process's memory: a restart loses every job, and
a worker in another process sees nothing. It keeps the full lease model
(reservations lapse and are reclaimed, settles are fenced by token, renew
extends), so code tested against it behaves the same on a real backend.
Use `sqlite:///jobs.db` for the same convenience with jobs that survive a
restart.

Jobs that share an ordering key wait in one line per key, across queues: only
the head of its line may be reserved, and it leaves the line when it is
acknowledged, failed, cancelled or cleared, so a retry keeps its key's place.
"""

from __future__ import annotations

import heapq
import itertools
import threading
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, ClassVar, Self

from typing_extensions import override

from .._clock import utcnow
from .._wakeup import Wakeup
from ..envelope import QueuedJob
from ..errors import LeaseLost
from ..job import ORDERING_KEY
from ..jobstate import Found
from ..queue import (
    DEFAULT_LEASE,
    Capabilities,
    FailedJob,
    Queue,
    QueueCounts,
    Reservation,
    Rewrite,
    Rewritten,
    new_token,
)
from .batching import LocalBatches
from .memory_records import MemoryRecords
from .options import Options, check_lease
from .pausing import LocalPauses

if TYPE_CHECKING:
    from . import DriverContext


@dataclass
class _Lane:
    """One named queue: jobs due now in arrival order, and delayed ones by due time."""

    ready: deque[QueuedJob] = field(default_factory=deque)
    delayed: list[tuple[datetime, int, QueuedJob]] = field(default_factory=list)


@dataclass
class _Held:
    job: QueuedJob
    token: str
    lease_until: datetime


class MemoryQueue(Queue):
    """In-process FIFO queues with leases, delayed jobs that step aside, and a failed list."""

    name: ClassVar[str] = "memory"
    idle_wait: ClassVar[str] = "an in-process signal that each push sets"
    capabilities: ClassVar[Capabilities] = Capabilities(
        survives_restart=False,
        shared_between_processes=False,
        pausable=True,
        limits=True,
        job_lookup=True,
        records=True,
        cancellable=True,
        batches=True,
        ordering_keys=True,
    )

    OPTIONS: ClassVar[frozenset[str]] = frozenset({"lease"})

    @classmethod
    def from_config(cls, url: str, options: Mapping[str, Any], context: DriverContext) -> Self:
        """`memory://`, with an optional `lease` such as `30s`, in the URL's query or `options`."""
        given = Options.from_url(url, cls.OPTIONS, "the `memory` driver", options)
        return cls(lease=given.lease(DEFAULT_LEASE))

    def __init__(self, *, lease: timedelta = DEFAULT_LEASE) -> None:
        self._lease = check_lease(lease)
        self._lock = threading.Lock()
        self._lanes: dict[str, _Lane] = {}
        self._held: dict[str, _Held] = {}
        self._failed: list[FailedJob] = []
        self._seq = itertools.count()
        self._wakeup = Wakeup()
        self._pauses = LocalPauses()
        self._records = MemoryRecords()
        self.batch_store = LocalBatches(self._lock, self._enqueue, self._wakeup.notify)
        self._lines: dict[str, deque[str]] = {}
        """Each ordering key's jobs by id, in dispatch order; the first may run."""

    @property
    @override
    def lease(self) -> timedelta:
        return self._lease

    def _lane(self, queue: str) -> _Lane:
        lane = self._lanes.get(queue)
        if lane is None:
            lane = self._lanes[queue] = _Lane()
        return lane

    def _blocked(self, job: QueuedJob) -> bool:
        """True when an earlier job of `job`'s ordering key is still queued or running."""
        key = job.headers.get(ORDERING_KEY)
        return key is not None and self._lines[key][0] != job.id

    def _leave_line(self, job: QueuedJob) -> None:
        """`job` is done (settled, removed): the next of its ordering key may run."""
        key = job.headers.get(ORDERING_KEY)
        if key is None:
            return
        line = self._lines.get(key)
        if line is not None and job.id in line:
            line.remove(job.id)
            if not line:
                del self._lines[key]

    def _enqueue(self, job: QueuedJob, now: datetime, *, new: bool = True) -> None:
        if new and (key := job.headers.get(ORDERING_KEY)) is not None:
            self._lines.setdefault(key, deque()).append(job.id)
        lane = self._lane(job.queue)
        if job.available_at <= now:
            lane.ready.append(job)
        else:
            heapq.heappush(lane.delayed, (job.available_at, next(self._seq), job))

    @override
    async def push(self, job: QueuedJob) -> str:
        with self._lock:
            self._enqueue(job, utcnow())
        self._wakeup.notify()
        return job.id

    @override
    async def push_many(self, jobs: Sequence[QueuedJob]) -> list[str]:
        now = utcnow()
        with self._lock:
            for job in jobs:
                self._enqueue(job, now)
        self._wakeup.notify()
        return [job.id for job in jobs]

    @override
    async def reserve(self, queue: str, *, limit: int = 1) -> list[Reservation]:
        now = utcnow()
        out: list[Reservation] = []
        with self._lock:
            self._reclaim_lapsed(now)
            lane = self._lanes.get(queue)
            if lane is None:
                return out
            # Delayed jobs that came due join the ready line in due order; a job
            # that is not due never blocks the ones behind it.
            while lane.delayed and lane.delayed[0][0] <= now:
                lane.ready.append(heapq.heappop(lane.delayed)[2])
            passed: list[QueuedJob] = []  # behind an earlier job of their ordering key
            while lane.ready and len(out) < limit:
                job = lane.ready.popleft()
                if self._blocked(job):
                    passed.append(job)
                else:
                    out.append(self._hold(job, now))
            lane.ready.extendleft(reversed(passed))
        return out

    def _hold(self, waiting: QueuedJob, now: datetime) -> Reservation:
        job = waiting.with_changes(attempts=waiting.attempts + 1)
        token = new_token()
        until = now + self._lease
        self._held[job.id] = _Held(job, token, until)
        return Reservation(job=job, token=token, lease_until=until, lease=self._lease)

    def _reclaim_lapsed(self, now: datetime) -> None:
        lapsed = [h for h in self._held.values() if h.lease_until <= now]
        for held in lapsed:
            del self._held[held.job.id]
            self._lane(held.job.queue).ready.appendleft(held.job)

    def _take(self, reservation: Reservation) -> _Held:
        held = self._held.get(reservation.job.id)
        if held is None or held.token != reservation.token:
            raise LeaseLost(
                f"job {reservation.job.id} is no longer reserved by this worker "
                "(its lease lapsed or it was settled already)"
            )
        return held

    @override
    async def wait_for_work(self, queues: Sequence[str], timeout: timedelta) -> None:
        with self._lock:
            now = utcnow()
            soonest: datetime | None = None
            for name in queues:
                lane = self._lanes.get(name)
                if lane is None:
                    continue
                if any(not self._blocked(job) for job in lane.ready):
                    return
                if lane.delayed:
                    due = lane.delayed[0][0]
                    soonest = due if soonest is None else min(soonest, due)
            for held in self._held.values():
                soonest = held.lease_until if soonest is None else min(soonest, held.lease_until)
        if soonest is not None:
            timeout = max(timedelta(0), min(timeout, soonest - now))
        await self._wakeup.wait(timeout)

    @override
    async def acknowledge(self, reservation: Reservation) -> None:
        with self._lock:
            held = self._take(reservation)
            del self._held[reservation.job.id]
            self._leave_line(held.job)
        if held.job.headers.get(ORDERING_KEY) is not None:
            self._wakeup.notify()  # the next job of its key may run now

    @override
    async def release(
        self,
        reservation: Reservation,
        *,
        delay: timedelta = timedelta(0),
        count_attempt: bool = True,
    ) -> None:
        now = utcnow()
        with self._lock:
            held = self._take(reservation)
            del self._held[reservation.job.id]
            attempts = held.job.attempts if count_attempt else max(0, held.job.attempts - 1)
            retry = held.job.with_changes(attempts=attempts, available_at=now + delay)
            self._enqueue(retry, now, new=False)  # keeps its place in its key's line
        self._wakeup.notify()

    @override
    async def renew(self, reservation: Reservation) -> None:
        with self._lock:
            held = self._take(reservation)
            held.lease_until = utcnow() + self._lease

    @override
    async def fail(self, reservation: Reservation, error: str) -> None:
        with self._lock:
            held = self._take(reservation)
            del self._held[reservation.job.id]
            self._leave_line(held.job)
            self._failed.append(FailedJob(job=held.job, error=error, failed_at=utcnow()))
        if held.job.headers.get(ORDERING_KEY) is not None:
            self._wakeup.notify()

    @override
    async def size(self, queue: str) -> int:
        with self._lock:
            lane = self._lanes.get(queue)
            return 0 if lane is None else len(lane.ready) + len(lane.delayed)

    async def counts(self, queue: str) -> QueueCounts:
        """`Countable`: the lane's jobs by state, and the soonest delayed or lease end."""
        now = utcnow()
        with self._lock:
            lane = self._lanes.get(queue)
            due = [at for at, _, _ in lane.delayed] if lane is not None else []
            waiting = len(lane.ready) if lane is not None else 0
            held = [h.lease_until for h in self._held.values() if h.job.queue == queue]
        later = [at for at in due if at > now]
        return QueueCounts(
            waiting=waiting + len(due) - len(later),
            delayed=len(later),
            reserved=len(held),
            next_due=min([*later, *held], default=None),
        )

    async def oldest_wait(self, queue: str) -> timedelta | None:
        """`OldestWaiting`: since when the lane's earliest due job has been due."""
        now = utcnow()
        with self._lock:
            lane = self._lanes.get(queue)
            due = [job.available_at for job in lane.ready] if lane is not None else []
            due += [at for at, _, _ in lane.delayed if at <= now] if lane is not None else []
        return None if not due else max(timedelta(0), now - min(due))

    @override
    async def clear(self, queue: str) -> int:
        with self._lock:
            lane = self._lanes.pop(queue, None)
            if lane is None:
                return 0
            for job in [*lane.ready, *(job for _, _, job in lane.delayed)]:
                self._leave_line(job)
            return len(lane.ready) + len(lane.delayed)

    # -- OrderingLookup: the head of a job's line holds it back --

    async def ahead_of(self, job_id: str) -> str | None:
        with self._lock:
            for line in self._lines.values():
                if job_id in line:
                    return None if line[0] == job_id else line[0]
        return None

    # -- JobRemover: cancelling a waiting job takes it out of its lane --

    async def remove_job(self, job_id: str) -> QueuedJob | None:
        with self._lock:
            for lane in self._lanes.values():
                for job in lane.ready:
                    if job.id == job_id:
                        lane.ready.remove(job)
                        self._leave_line(job)
                        return job
                for i, (_, _, job) in enumerate(lane.delayed):
                    if job.id == job_id:
                        del lane.delayed[i]
                        heapq.heapify(lane.delayed)
                        self._leave_line(job)
                        return job
        return None

    # -- Pausable: a set in this process, which is where every worker of it runs --

    async def pause(self, queue: str) -> bool:
        return await self._pauses.pause(queue)

    async def resume(self, queue: str) -> bool:
        return await self._pauses.resume(queue)

    async def paused(self, queues: Sequence[str]) -> frozenset[str]:
        return await self._pauses.paused(queues)

    # -- FailedJobStore --------------------------------------------------------

    async def failed_jobs(self, *, queue: str | None = None, limit: int = 100) -> list[FailedJob]:
        with self._lock:
            rows = [f for f in reversed(self._failed) if queue is None or f.job.queue == queue]
        return rows[:limit]

    async def retry_failed(self, job_id: str) -> bool:
        now = utcnow()
        with self._lock:
            for i, failed in enumerate(self._failed):
                if failed.job.id == job_id:
                    del self._failed[i]
                    # Not its uniqueness key: that lock was given back when the job
                    # failed, and a fresh dispatch may hold it now.
                    restored = failed.job.with_changes(
                        attempts=0, available_at=now, unique_key=None
                    )
                    self._enqueue(restored, now)
                    break
            else:
                return False
        self._wakeup.notify()
        return True

    async def forget_failed(self, job_id: str) -> bool:
        with self._lock:
            for i, failed in enumerate(self._failed):
                if failed.job.id == job_id:
                    del self._failed[i]
                    return True
        return False

    async def flush_failed(self, *, queue: str | None = None) -> int:
        with self._lock:
            keep = [f for f in self._failed if queue is not None and f.job.queue != queue]
            flushed = len(self._failed) - len(keep)
            self._failed = keep
        return flushed

    # -- RewritesStoredJobs ----------------------------------------------------

    async def rewrite_payloads(self, rewrite: Rewrite) -> Rewritten:
        """Every job held here, waiting, delayed, reserved or failed, offered to `rewrite`."""
        count = 0

        def changed(job: QueuedJob) -> QueuedJob:
            nonlocal count
            new = rewrite(job)
            if new is None:
                return job
            count += 1
            return job.with_changes(payload=new.payload)

        with self._lock:
            for lane in self._lanes.values():
                lane.ready = deque(changed(job) for job in lane.ready)
                lane.delayed = [(at, seq, changed(job)) for at, seq, job in lane.delayed]
            for held in self._held.values():
                held.job = changed(held.job)
            self._failed = [
                FailedJob(job=changed(f.job), error=f.error, failed_at=f.failed_at)
                for f in self._failed
            ]
        return Rewritten(count)

    # -- JobLookup and RecordStore (jobstate.py) -------------------------------

    async def find_job(self, job_id: str) -> Found | None:
        """The job held, waiting or delayed, or its newest failed record; None if none."""
        now = utcnow()
        with self._lock:
            held = self._held.get(job_id)
            if held is not None:
                return Found(job=held.job, where="reserved", lease_until=held.lease_until)
            for lane in self._lanes.values():
                for job in lane.ready:
                    if job.id == job_id:
                        return Found(job=job, where="queued")
                for due, _, job in lane.delayed:
                    if job.id == job_id:
                        if due <= now:
                            return Found(job=job, where="queued")
                        return Found(job=job, where="delayed", due_at=due)
            for failed in reversed(self._failed):
                if failed.job.id == job_id:
                    return Found(
                        job=failed.job,
                        where="failed",
                        error=failed.error,
                        failed_at=failed.failed_at,
                    )
        return None

    async def put_record(self, key: str, value: bytes, ttl: timedelta) -> None:
        self._records.put(key, value, ttl)

    async def get_record(self, key: str) -> bytes | None:
        return self._records.get(key)

    async def forget_record(self, key: str) -> bool:
        return self._records.forget(key)

    async def records(self, prefix: str) -> list[bytes]:
        return self._records.matching(prefix)

    # -- inspection, for tests and the dashboard -------------------------------

    def reserved_count(self) -> int:
        """How many jobs are reserved right now."""
        with self._lock:
            return len(self._held)
