# SPDX-License-Identifier: MIT
"""`WorkerOptions` and `WorkerStats`: how a worker runs, and what it did.

Only knobs that mean the same on every driver belong here. A setting that
matters to one backend (a poll interval, a prefetch count) lives in that
driver's options, so the worker never grows a parameter that serves one
driver.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta

from ..jobstate import HEARTBEAT_EVERY
from ..queue import QueueCounts


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkerOptions:
    """How a worker runs. Every field has a default that is safe in production."""

    queues: tuple[str, ...] = ("default",)
    """Queues to serve, in priority order: an earlier queue is drained first."""
    concurrency: int = 1
    """Jobs run at once in this process. Plain `def` handlers run in a thread pool
    of this size; `async def` ones as tasks."""
    sleep: timedelta = timedelta(seconds=1)
    """Longest wait for new work when idle (drivers that can hear about new work
    wake sooner), and the base of the broker-error backoff."""
    timeout: timedelta | None = timedelta(seconds=60)
    """Fallback per-job run limit; a job's own `timeout` wins. None: no limit."""
    tries: int | None = None
    """Attempts floor: a job gets max(its own tries, this). Never lowers a job's tries."""
    max_jobs: int | None = None
    """Stop after this many jobs finished (processed or failed; retries do not count)."""
    max_time: timedelta | None = None
    """Stop taking new work once the run has lasted this long."""
    stop_when_empty: bool = False
    """Stop once every queue is empty, nothing is running, and nothing left on the
    queues falls due within `drain_wait` (see `worker/drain.py`)."""
    drain_wait: timedelta | None = None
    """With `stop_when_empty`: how far ahead a delayed job (a retry's backoff) or a held
    lease (a dead worker's job) may fall due and still be waited for. None: the
    connection's lease, so the jobs of a worker that died are always waited for."""
    grace: timedelta = timedelta(seconds=30)
    """On a stop signal, how long running jobs may take to finish before they are
    interrupted and handed back."""
    max_consecutive_errors: int = 20
    """Back-to-back broker failures to ride out before the run ends with an error.

    Consecutive, so one success resets it. With the default `sleep` and a
    30-second backoff ceiling this is about eight minutes: long enough to sit
    through a failover, short enough that a worker pointed at a broker that is
    never coming back exits and says so."""
    max_error_backoff: timedelta = timedelta(seconds=30)
    """Ceiling of the wait between retries of a failing broker."""
    prefetch: int | None = None
    """Jobs reserved per round trip; defaults to the free concurrency slots."""
    reserve_ahead: int | None = None
    """Jobs a busy worker may hold reserved beyond those it runs, so the next batch is
    already here when slots free. Only while work is waiting and the worker's jobs
    take no more than a few reserve round trips or 50 ms (see `worker/pace.py`); a job held ahead
    and not started by a stop is handed back with its attempt refunded. None: as
    many as `concurrency`; 0: never."""
    batch_wait: timedelta = timedelta(milliseconds=2)
    """While the queue has a backlog and jobs are running, how long the worker may
    wait for half its slots to free before it reserves again, so that it fetches
    (and acknowledges) jobs in batches instead of one round trip per finished job.
    An idle worker never waits. Zero turns it off."""
    heartbeat: timedelta | None = HEARTBEAT_EVERY
    """How often the worker writes its heartbeat (docs/operations.md), on a driver that
    keeps records. None: no heartbeat, and the worker is not listed."""
    keep_succeeded: timedelta | None = None
    """Record every job that succeeds, for this long, so `status` says `succeeded` after
    the job is deleted. None (the default): only jobs that ask (`keep_result`, the
    scheduler's) are recorded, since a record is one more write per job."""

    pause_check: timedelta = timedelta(seconds=1)
    """How often the worker reads which of its queues are paused, on a driver that can
    pause (`Capabilities.pausable`): the bound on how long a worker goes on taking jobs
    from a queue after `rainier-queue pause`, or leaves them after `resume`. The same
    cadence reads which jobs were cancelled (`Capabilities.cancellable`): the bound on how
    long a running job goes on after `rainier-queue cancel`. Read on this
    cadence, never per job. Jobs already running finish; jobs held ahead and not started
    are handed back when the pause is seen."""

    def __post_init__(self) -> None:
        if not self.queues or any(not q or not q.strip() for q in self.queues):
            raise ValueError("a worker needs at least one non-empty queue name")
        if self.concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        if self.max_consecutive_errors < 1:
            raise ValueError("max_consecutive_errors must be at least 1")
        if self.tries is not None and self.tries < 1:
            raise ValueError("tries must be at least 1")
        if self.reserve_ahead is not None and self.reserve_ahead < 0:
            raise ValueError("reserve_ahead cannot be negative (0 turns it off)")
        if self.batch_wait < timedelta(0):
            raise ValueError("batch_wait cannot be negative")
        if self.pause_check <= timedelta(0):
            raise ValueError("pause_check must be longer than zero")
        if self.drain_wait is not None and self.drain_wait < timedelta(0):
            raise ValueError("drain_wait cannot be negative")
        if self.heartbeat is not None and self.heartbeat <= timedelta(0):
            raise ValueError("heartbeat must be positive (None turns it off)")
        if self.keep_succeeded is not None and self.keep_succeeded <= timedelta(0):
            raise ValueError("keep_succeeded must be positive (None turns it off)")

    def attempts_for(self, max_attempts: int) -> int:
        """The attempts a job really gets: its own, raised to the `tries` floor."""
        return max(max_attempts, self.tries or 0, 1)


@dataclass(slots=True)
class WorkerStats:
    """What a worker run did. `total` is what `max_jobs` counts."""

    processed: int = 0
    released: int = 0
    failed: int = 0
    idles: int = 0
    broker_errors: int = 0
    lost_leases: int = 0
    """Settles refused because another worker had taken the job (its lease lapsed)."""
    interrupted: int = 0
    """Jobs whose handler was running when a stop (a second signal, or the grace running
    out) cut it short: handed back unfinished, their attempt refunded."""
    returned_unstarted: int = 0
    """Jobs reserved ahead and handed back before their handler started, at a stop or when
    their queue was paused, their attempt refunded. Nothing was cut short: a graceful stop
    that hands back only these is a clean one."""
    cancelled: int = 0
    """Jobs cancelled (`QueueManager.cancel`) before or while they ran, and acknowledged."""
    limited: int = 0
    """Times a job was set aside unrun, its attempt given back, because its key was over its
    rate or concurrency limit."""
    abandoned: int = 0
    """Jobs left reserved at a stop because their plain `def` handler still ran in its
    thread after being interrupted: not handed back, so no other worker starts them
    beside that thread; their leases lapse and they are delivered again."""
    threads_left_running: int = 0
    """Plain `def` handlers (or hooks) whose threads still ran when the worker stopped:
    interrupted or timed out, their results are not recorded, but Python cannot stop them."""
    by_name: dict[str, int] = field(default_factory=dict)
    left: QueueCounts | None = None
    """What a `stop_when_empty` run left on its queues because it falls due later than
    `drain_wait`; None when it left nothing (or did not drain)."""

    @property
    def total(self) -> int:
        """Jobs that reached an end: processed or failed."""
        return self.processed + self.failed
