# SPDX-License-Identifier: MIT
"""The worker's side of rate and concurrency limits: ask before a limited job starts.

A job whose class declares `rate_limit` or `concurrency_limit` carries its
key in the `rq-limit-key` header; just before its handler would start, the
worker asks the shared store (`limits.Limiter`) for a start and a slot. If
the key is over its limit, the job is not run and does not sit in a worker
slot waiting: it goes back to the queue with its attempt given back, due
again when the limiter says a start fits (or, for a key whose slots are all
taken, after a short jittered step aside), and the worker's slot takes the
next job, of another key. So a busy key never blocks the others behind it,
and the worker never spins on one job.

The slot a job took is given back when its result is recorded, whatever it
was (success, retry, failure, cancellation, a lost lease, a hand-back at a
stop): that is the one place every settle ends (`Worker._finished`). Two
exceptions keep it taken until its lease lapses: a worker that dies gives
nothing back, and a plain `def` handler still running in its thread after a
stop (its job left to lapse, `Verdict.ABANDONED`) keeps its slot unrenewed,
so no other job of its key starts beside the thread.

Everything here is skipped for a job without the header: the cost to an
unlimited job is one test of a dict.

Where the store comes from (`limits.store_for`): the one given to the worker
(`Worker(limits=...)`; the CLI opens the cache store at the connection's own
database or Redis URL), else the queue's own (`LimitStore`: Kafka's lock
store), else the worker's `locks`, else this process's memory for a
connection that lives in it (`memory://`). A worker whose registry has a
limited job class and finds none refuses to start, naming what to set.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta

from ..envelope import QueuedJob
from ..job import LIMIT_KEY
from ..limits import Held, Limiter, Limits, Refused, limits_of
from ..locks import Cache
from ..registry import JobRegistry

log = logging.getLogger("rainier_queue.worker")

STORE_TROUBLE = timedelta(seconds=1)
"""How long a limited job steps aside when the limit store could not be asked."""


class LimitGate:
    """Takes a limited job's start and slot before it runs; gives the slot back after."""

    def __init__(self, store: Cache, registry: JobRegistry, *, holder: str) -> None:
        self.limiter = Limiter(store, holder=holder)
        self._registry = registry
        self._limits: dict[str, Limits | None] = {}
        self._giving_back: set[asyncio.Task[None]] = set()

    def limits(self, job: QueuedJob) -> tuple[str, Limits] | None:
        """`job`'s key and its class's limits, or None when it is not limited."""
        key = job.headers.get(LIMIT_KEY)
        if key is None:
            return None
        if job.name in self._limits:
            limits = self._limits[job.name]
        else:
            known = self._registry.knows(job.name)
            limits = self._limits[job.name] = (
                limits_of(self._registry.get(job.name)) if known else None
            )
        if limits is None:
            return None
        return key, limits

    async def take(
        self, job: QueuedJob, key: str, limits: Limits, lease: timedelta | None
    ) -> Held | Refused:
        """A start and a slot for `job` (the slot for the job's `lease`), or why it waits and
        for how long."""
        try:
            return await self.limiter.take(key, limits, job.id, lease=lease)
        except Exception as exc:
            log.warning(
                "could not ask the limit store about key `%s` for job `%s` %s (%s); "
                "setting the job aside for %gs",
                key,
                job.name,
                job.id,
                exc,
                STORE_TROUBLE.total_seconds(),
            )
            return Refused(f"the limit store failed ({exc})", STORE_TROUBLE)

    def give_back(self, held: Held) -> None:
        """Free `held` in the background (the slot's job has settled)."""
        task = asyncio.get_running_loop().create_task(self.limiter.give_back(held))
        self._giving_back.add(task)
        task.add_done_callback(self._giving_back.discard)

    @staticmethod
    def let_lapse(held: Held) -> None:
        """Stop renewing `held` without giving it back: its job's thread still runs after a
        stop, so the slot stays taken until its lease lapses, as the job's own lease does."""
        if held.renewing is not None:
            held.renewing.cancel()
            held.renewing = None

    async def settle_down(self) -> None:
        """Wait for the slots being given back (at a stop)."""
        if self._giving_back:
            await asyncio.gather(*self._giving_back, return_exceptions=True)


__all__ = ["LimitGate"]
