# SPDX-License-Identifier: MIT
"""How `RedisQueue` pushes: one script per queue, or two plain commands for a lone job.

Why a part of its own: a push is where the driver's cost per job starts,
and where it differs most between a single server and a cluster, a job due
now and a delayed one, a keyless job and one with an ordering key; the
queue's port methods hand the work here. Every push goes through
`replication.HeldWrites` (a connection held for the answer, so a lost
answer is `OutcomeUnknown`, never resent; in the durable mode, a `WAIT`).

A batch whose jobs for one queue carry no ordering key runs
`scripts.PUSH`; one with a keyed job runs `ordered_scripts.PUSH`, which
also writes each keyed job into its key's line (`ordering.py`).
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from ..._clock import utcnow
from ...envelope import QueuedJob
from . import ordered_scripts, scripts
from .connection import Calls, Client
from .keys import Keys
from .ordering import ordering_key
from .replication import HeldWrites, raise_first
from .wakeups import WAKE_TOKENS, wake_apart, wake_commands


def _ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


def _delay_ms(job: QueuedJob, now: datetime) -> int:
    """A delay, not a moment (the push script adds it to the server's clock); 0: due now."""
    return max(1, _ms(job.available_at) - _ms(now)) if job.available_at > now else 0


class RedisPusher:
    """The push side of one `RedisQueue`."""

    def __init__(
        self,
        calls: Calls,
        keys: Keys,
        client: Client,
        pushes: HeldWrites,
        *,
        cluster: bool,
        replicated: bool,
    ) -> None:
        self._calls = calls
        self.keys = keys
        self._client = client
        self._pushes = pushes
        self._cluster = cluster
        self._replicated = replicated

    async def push(self, job: QueuedJob) -> str:
        """One job, off-cluster.

        Due now and keyless, it is an `XADD` and the wake-up, sent as plain
        commands in one round trip, not as the push script: on a server that
        was idle (a lone job pushed to an idle worker, whose wait for it this
        is) the script took about 45 µs of Redis's time and the three
        commands take about 20 (`INFO commandstats`, 50 pushes a second). The
        entry is written before the wake-up, so a woken worker finds it.
        Another client's command may now come between the two; at worst a
        worker takes the job first and the wake-up then wakes one that finds
        nothing, as a stale wake-up token does. Delayed, or with an ordering
        key, it is `push_many`'s script, which reads the server's clock and
        keeps the key's line.
        """
        if self._cluster or ordering_key(job) is not None:
            await self.push_many([job])
            return job.id
        keys = self.keys.queue(job.queue)
        delay = _delay_ms(job, utcnow())
        if not delay:
            sent = [
                ("XADD", keys.stream, "*", "body", job.to_json()),
                *wake_commands(self.keys.wake, 1),
            ]
            await self._pushes.commands(sent, what="push jobs", job_ids=[job.id])
            return job.id
        args = [1, WAKE_TOKENS, delay, job.to_json()]
        names = [keys.stream, keys.delayed, self.keys.wake]
        script = self._calls.script(scripts.PUSH)
        await self._pushes.script(script, names, args, what="push jobs", job_ids=[job.id])
        return job.id

    async def push_many(self, jobs: Sequence[QueuedJob]) -> list[str]:
        """One script per queue (each one slot); off-cluster the wake-up rides along."""
        if not jobs:
            return []
        await self._calls.ready()
        now = utcnow()
        by_queue: dict[str, list[QueuedJob]] = defaultdict(list)
        for job in jobs:
            by_queue[job.queue].append(job)
        tokens = min(len(jobs), WAKE_TOKENS)

        async def push_to(queue: str, batch: list[QueuedJob]) -> None:
            keys = self.keys.queue(queue)
            wake = [] if self._cluster else [self.keys.wake]
            args: list[Any] = [tokens, WAKE_TOKENS]
            ordered = [ordering_key(job) for job in batch]
            if any(key is not None for key in ordered):
                for job, key in zip(batch, ordered, strict=True):
                    args += [_delay_ms(job, now), key or "", job.id, job.to_json()]
                names = [keys.stream, keys.delayed, *keys.ordered_keys, *wake]
                script = self._calls.script(ordered_scripts.PUSH)
            else:
                for job in batch:
                    args += [_delay_ms(job, now), job.to_json()]
                names = [keys.stream, keys.delayed, *wake]
                script = self._calls.script(scripts.PUSH)
            ids = [job.id for job in batch]
            await self._pushes.script(script, names, args, what="push jobs", job_ids=ids)

        if len(by_queue) == 1:
            # The usual case, one queue: awaited here rather than as a task of its own,
            # which would send it a loop turn later (latency) for a task's cost (CPU).
            [(queue, batch)] = by_queue.items()
            await push_to(queue, batch)
        else:
            pushes = [push_to(q, batch) for q, batch in by_queue.items()]
            if not self._replicated:
                await asyncio.gather(*pushes)
            else:
                raise_first(await asyncio.gather(*pushes, return_exceptions=True))
        if self._cluster:
            await wake_apart(self._client, self.keys.wake, tokens)
        return [job.id for job in jobs]

    async def push_raw(self, queue: str, body: str) -> None:
        """Append `body` as-is (field `body`) to the queue's stream, for a foreign consumer."""
        stream = self.keys.queue(queue).stream
        await self._calls.ready()
        xadd = ("XADD", stream, "*", "body", body)
        # On a cluster the wake-up list is on another slot, so it is a command of its own.
        sent = [xadd] if self._cluster else [xadd, *wake_commands(self.keys.wake, 1)]
        await self._pushes.commands(sent, what="push a raw body", job_ids=[])
        if self._cluster:
            await wake_apart(self._client, self.keys.wake, 1)


__all__ = ["RedisPusher"]
