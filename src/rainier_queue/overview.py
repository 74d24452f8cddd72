# SPDX-License-Identifier: MIT
"""The system-wide view for `doctor`: queues with jobs and no live worker, dead workers' jobs,
and failed jobs no job class knows.

Why: `explain` answers for one job, but an operator's first look is at the
whole connection: is there a queue whose jobs nobody will take, and did a
worker die holding jobs that now wait out their leases? Both come from what
the connection already keeps (job counts, heartbeats, the lookup by id),
and only read it. On a driver that keeps no heartbeats neither can be told,
and `overview` says so by returning None.

A job whose name no class of the application knows (a typo in another
service's dispatch, a class removed while its jobs were queued) is failed
by the first worker that takes it, so it shows in the failed store, not in
the queue: `unknown_names` groups the newest failed records by such names.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime

from ._clock import utcnow
from .envelope.reading import NOT_A_JOB
from .jobstate import WorkerBeat
from .lookup import lookup_of, records_of, workers
from .queue import Countable, FailedJobListing, Queue

FAILED_READ = 1000
"""How many of the newest failed records `unknown_names` reads: one bounded read."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Unserved:
    """A queue with jobs waiting (due or delayed) that no live worker serves."""

    queue: str
    jobs: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Stranded:
    """A job a gone worker's last heartbeat lists as running."""

    job_id: str
    name: str
    queue: str
    worker: WorkerBeat
    started_at: datetime
    lease_until: datetime | None
    """When the job comes back, where the driver can look the job up."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Overview:
    """What `doctor` reports of the connection as a whole."""

    beats: tuple[WorkerBeat, ...]
    """Every heartbeat kept, gone workers' included."""
    live: tuple[WorkerBeat, ...]
    unserved: tuple[Unserved, ...]
    stranded: tuple[Stranded, ...]
    looked_up: bool
    """Whether each stranded job was confirmed still reserved (a driver with `job_lookup`);
    without it, they are the jobs the dead worker last said it ran."""

    @property
    def served(self) -> list[str]:
        """The queues live workers serve."""
        return sorted({q for beat in self.live for q in beat.queues})


async def overview(queue: Queue, queues: Sequence[str]) -> Overview | None:
    """The connection's unserved queues (of `queues` and those workers named) and the
    jobs gone workers hold; None on a driver that keeps no heartbeats."""
    if records_of(queue) is None:
        return None
    now = utcnow()
    beats = await workers(queue)
    live = tuple(b for b in beats if not b.is_gone(now) and not b.stopping)
    served = {q for beat in live for q in beat.queues}
    named = dict.fromkeys([*queues, *(q for beat in beats for q in beat.queues)])
    unserved = []
    for name in named:
        if name in served:
            continue
        jobs = await _waiting(queue, name)
        if jobs:
            unserved.append(Unserved(queue=name, jobs=jobs))
    stranded = await _stranded(queue, beats, live, now)
    return Overview(
        beats=tuple(beats),
        live=live,
        unserved=tuple(unserved),
        stranded=tuple(stranded),
        looked_up=lookup_of(queue) is not None,
    )


async def _waiting(queue: Queue, name: str) -> int:
    if isinstance(queue, Countable):
        counts = await queue.counts(name)
        return counts.waiting + counts.delayed
    return await queue.size(name)


async def _stranded(
    queue: Queue, beats: list[WorkerBeat], live: tuple[WorkerBeat, ...], now: datetime
) -> list[Stranded]:
    taken_again = {r.job_id for beat in live for r in beat.running}
    lookup = lookup_of(queue)
    found = []
    for beat in beats:
        if not beat.is_gone(now):
            continue
        for running in beat.running:
            if running.job_id in taken_again:
                continue
            lease_until = None
            if lookup is not None:
                stored = await lookup.find_job(running.job_id)
                if stored is None or stored.where != "reserved":
                    continue  # done, failed, or back in its queue: no longer held
                lease_until = stored.lease_until
            found.append(
                Stranded(
                    job_id=running.job_id,
                    name=running.name,
                    queue=running.queue,
                    worker=beat,
                    started_at=running.started_at,
                    lease_until=lease_until,
                )
            )
    return found


@dataclass(frozen=True, slots=True, kw_only=True)
class UnknownName:
    """Failed jobs under a name no job class of the application knows."""

    name: str
    failed: int
    """How many of the newest `FAILED_READ` failed records have it."""
    newest: datetime
    queues: tuple[str, ...]


async def unknown_names(queue: Queue, known: Collection[str]) -> list[UnknownName] | None:
    """Failed jobs (of the newest `FAILED_READ`) whose name is not in `known`, most first;
    entries that were never jobs are left out. None where failed jobs cannot be listed."""
    if not isinstance(queue, FailedJobListing):
        return None
    found: dict[str, list[tuple[datetime, str]]] = {}
    for record in await queue.failed_jobs(limit=FAILED_READ):
        name = record.job.name
        if name != NOT_A_JOB and name not in known:
            found.setdefault(name, []).append((record.failed_at, record.job.queue))
    return sorted(
        (
            UnknownName(
                name=name,
                failed=len(seen),
                newest=max(at for at, _ in seen),
                queues=tuple(sorted({q for _, q in seen})),
            )
            for name, seen in found.items()
        ),
        key=lambda unknown: (-unknown.failed, unknown.name),
    )


__all__ = [
    "FAILED_READ",
    "Overview",
    "Stranded",
    "UnknownName",
    "Unserved",
    "overview",
    "unknown_names",
]
