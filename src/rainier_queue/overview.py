# SPDX-License-Identifier: MIT
"""The system-wide view for `doctor`: queues with jobs and no live worker, and dead workers' jobs.

Why: `explain` answers for one job, but an operator's first look is at the
whole connection: is there a queue whose jobs nobody will take, and did a
worker die holding jobs that now wait out their leases? Both come from what
the connection already keeps (job counts, heartbeats, the lookup by id),
and only read it. On a driver that keeps no heartbeats neither can be told,
and `overview` says so by returning None.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from ._clock import utcnow
from .jobstate import WorkerBeat
from .lookup import lookup_of, records_of, workers
from .queue import Countable, Queue


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


__all__ = ["Overview", "Stranded", "Unserved", "overview"]
