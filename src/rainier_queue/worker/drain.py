# SPDX-License-Identifier: MIT
"""When a draining worker (`stop_when_empty`) is done: empty is not the same as finished.

A drain runs from cron or CI, and whoever runs it expects it to finish the
work it found. A reserve that comes back empty says only that nothing is
due *now*: a retry may be backing off for two seconds, and the jobs of a
worker that died are hidden under leases that lapse within the lease
length. Stopping there exits 0 with work undone and nothing saying so.

So when the queues run dry, the worker asks the driver what is left
(`Countable`). Nothing left: it stops. Something that falls due within
`drain_wait` (by default the lease, so a dead worker's jobs always count):
it keeps working, and its idle wait wakes when that time comes. Only work
due later than that is left behind, and it is reported in
`WorkerStats.left` (the CLI exits 5 for it), so the caller knows the run
did not finish. Jobs held by a live worker are waited for too, since their
leases keep being renewed: a team of draining workers stops together.

On Kafka the lag is what waits, and a partition whose record is out with
a worker counts as held, due within the lease: draining workers that find
every partition held by one that was killed wait its leases out and then
run the backlog, instead of calling the queue empty. A driver that cannot
count by state stops at the first empty reserve, as before.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime, timedelta

from .._clock import utcnow
from ..queue import DEFAULT_LEASE, Countable, Queue, QueueCounts
from .options import WorkerOptions, WorkerStats

log = logging.getLogger("rainier_queue.worker")


def horizon(queue: Queue, options: WorkerOptions) -> timedelta:
    """How far ahead a draining worker waits for work to fall due."""
    if options.drain_wait is not None:
        return options.drain_wait
    return queue.lease or DEFAULT_LEASE


def combined(counts: Sequence[QueueCounts]) -> QueueCounts:
    """Several queues' counts as one, with the soonest of their next due times."""
    due = [c.next_due for c in counts if c.next_due is not None]
    return QueueCounts(
        waiting=sum(c.waiting for c in counts),
        delayed=sum(c.delayed for c in counts),
        reserved=sum(c.reserved for c in counts),
        next_due=min(due, default=None),
    )


def keep_going(left: QueueCounts, within: timedelta, now: datetime) -> bool:
    """Whether what is `left` is still this drain's work: due now, or within `within`."""
    if left.waiting:
        return True
    return left.next_due is not None and left.next_due <= now + within


async def finished(
    queue: Queue,
    options: WorkerOptions,
    stats: WorkerStats,
    paused: frozenset[str] = frozenset(),
) -> bool:
    """Called when every queue served came back empty: whether the drain may stop now.

    The jobs of `paused` queues are not this drain's to wait for: they are
    left, and reported as work left like jobs due too late.

    Raises the driver's `BrokerError` when the counting fails, like a reserve.
    """
    if not isinstance(queue, Countable):
        log.info("every queue is empty; stopping")
        return True
    counts = {name: await queue.counts(name) for name in options.queues}
    left = combined(list(counts.values()))
    if left.total == 0:
        log.info("every queue is empty; stopping")
        return True
    within = horizon(queue, options)
    served = combined([c for name, c in counts.items() if name not in paused])
    if keep_going(served, within, utcnow()):
        return False
    stats.left = left
    on_paused = {name: c.total for name, c in counts.items() if name in paused and c.total}
    if on_paused:
        log.warning(
            "stopping with work left on paused queues: %s",
            ", ".join(f"{n} job(s) on `{name}`" for name, n in on_paused.items()),
        )
        if served.total == 0:
            return True
    log.warning(
        "stopping with work left that falls due later than %gs: %d delayed, %d held by "
        "workers (next due %s)",
        within.total_seconds(),
        left.delayed,
        left.reserved,
        "never" if left.next_due is None else left.next_due.isoformat(timespec="seconds"),
    )
    return True


__all__ = ["combined", "finished", "horizon", "keep_going"]
