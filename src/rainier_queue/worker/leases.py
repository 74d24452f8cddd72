# SPDX-License-Identifier: MIT
"""Keeping the leases of running jobs alive.

A reservation hides a job only until its lease lapses; after that any
worker may take it. That is what rescues the jobs of a worker that died,
and it would also steal the job of a worker that is merely slow. So while a
job runs, one background task renews its lease about every third of the
lease length: a worker that is alive keeps its jobs, a dead one stops
renewing and loses them within one lease.

A renew that answers `LeaseLost` means the lease lapsed anyway (the event
loop was blocked, the broker was unreachable for longer than the lease) and
another worker may be running the job now. The job is left to finish here,
because stopping it halfway is no safer than finishing it, but its result
is not settled: the current delivery belongs to the other worker, and a
settle from this one would be refused anyway.

Renewing and settling one reservation never overlap. Each `Lease` carries
a lock that both take, so a renew that was in flight when the job was
acknowledged cannot come back with a `LeaseLost` and be counted as a theft.
A success acknowledged without waiting (`Settler.settle_soon`) does not
hold the lock while its acknowledgement is on its way; it marks the lease
`settling` instead, and a renew that comes due meanwhile is put off briefly
rather than sent.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass

from ..errors import BrokerError, LeaseLost
from ..queue import Queue, Reservation
from .options import WorkerStats

log = logging.getLogger("rainier_queue.worker")

RENEW_FRACTION = 3
"""Renew when a third of the lease has passed, so two renewals can fail before it lapses."""

SETTLING_PAUSE = 10
"""A renew that finds an acknowledgement on its way waits this fraction of its interval."""


@dataclass(eq=False, slots=True)
class Lease:
    """One running reservation, as far as its lease is concerned."""

    reservation: Reservation
    interval: float | None
    """Seconds between renewals; None when the driver never reclaims."""
    next_renewal: float = 0.0
    """Monotonic time of the next renewal."""
    _lock: asyncio.Lock | None = None
    lost: bool = False
    """Another worker may own the job now; do not settle it."""
    closed: bool = False
    """Settled (or lost): nothing more to renew."""
    settling: bool = False
    """An acknowledgement is on its way without the lock held: renew later, not now."""

    @property
    def lock(self) -> asyncio.Lock:
        """Held by a renew and by a settle, so the two never interleave.

        Made when first taken: a plain success is acknowledged without it
        (`Settler.settle_soon`), and its lease is seldom renewed.
        """
        if self._lock is None:
            self._lock = asyncio.Lock()
        return self._lock

    def is_locked(self) -> bool:
        """Whether a renew or a settle holds the lock now."""
        return self._lock is not None and self._lock.locked()


class LeaseKeeper:
    """Renews every tracked reservation about every lease/3, from one task."""

    def __init__(self, queue: Queue, stats: WorkerStats) -> None:
        self._queue = queue
        self._stats = stats
        self._leases: dict[str, Lease] = {}
        self._changed = asyncio.Event()
        self._renews = queue.capabilities.renews_leases
        self._wakes_at = 0.0
        """Monotonic time the keeper's task next wakes by itself (inf: not before told)."""
        self._stopped = False

    def track(self, reservation: Reservation) -> Lease:
        """Start keeping `reservation` alive; returns its `Lease`."""
        length = reservation.lease
        interval: float | None = None
        if self._renews and length is not None and length.total_seconds() > 0:
            interval = length.total_seconds() / RENEW_FRACTION
        lease = Lease(reservation=reservation, interval=interval)
        if interval is not None:
            lease.next_renewal = time.monotonic() + interval
            self._leases[reservation.token] = lease
            # Under load a lease starts with every job; waking the keeper for
            # each would cost a task switch per job for nothing, since the new
            # renewal is almost always later than the one it already waits for.
            if lease.next_renewal < self._wakes_at:
                self._changed.set()
        return lease

    def forget(self, lease: Lease) -> None:
        """Stop renewing `lease` (its job was settled, or abandoned)."""
        lease.closed = True
        self._leases.pop(lease.reservation.token, None)

    def stop(self) -> None:
        """End `run` at its next turn, even if a renew swallowed the task's cancellation."""
        self._stopped = True
        self._changed.set()

    async def run(self) -> None:
        """Renew due leases until cancelled or stopped."""
        while not self._stopped:
            self._changed.clear()
            now = time.monotonic()
            due = [lease for lease in self._leases.values() if lease.next_renewal <= now]
            if due:
                await asyncio.gather(*(self._renew(lease) for lease in due))
                continue
            soonest = min((lease.next_renewal for lease in self._leases.values()), default=None)
            wait = None if soonest is None else max(0.0, soonest - now)
            self._wakes_at = float("inf") if soonest is None else soonest
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), wait)

    async def _renew(self, lease: Lease) -> None:
        job = lease.reservation.job
        interval = lease.interval or 0.0
        async with lease.lock:
            if lease.closed:
                return
            if lease.settling:
                lease.next_renewal = time.monotonic() + interval / SETTLING_PAUSE
                return
            try:
                await self._queue.renew(lease.reservation)
            except LeaseLost as exc:
                lease.lost = True
                self.forget(lease)
                self._stats.lost_leases += 1
                log.warning(
                    "lost the lease on job `%s` %s while it ran (%s); another worker may run it "
                    "now, so its result here will not be recorded",
                    job.name,
                    job.id,
                    exc,
                )
                return
            except BrokerError as exc:
                # Try again sooner: two more misses and the lease lapses.
                lease.next_renewal = time.monotonic() + interval / 2
                log.warning("could not renew the lease on job `%s` %s: %s", job.name, job.id, exc)
                return
            except Exception:
                lease.next_renewal = time.monotonic() + interval / 2
                log.exception("renewing the lease on job `%s` %s failed", job.name, job.id)
                return
        lease.next_renewal = time.monotonic() + interval


__all__ = ["Lease", "LeaseKeeper"]
