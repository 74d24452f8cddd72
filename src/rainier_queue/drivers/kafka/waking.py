# SPDX-License-Identifier: MIT
"""Waking an idle worker when a record lands on a partition it could serve.

Without this, an idle worker on Kafka sleeps its whole `sleep` between two
reserves, so a job pushed to an idle queue waits up to a second to start.
A log sends no notice of new records, and the worker's reading consumer
reads only the partitions it holds, so the wait asks the broker for the
end offsets of the queue's partitions (one ListOffsets request) a few times
a second, and returns once one of them grew.

Growth alone is not enough. A partition another worker holds grows every
time something is pushed to it, and that worker serves it; a wait that woke
for it would reserve nothing and wait again, once per push: a worker that
spins beside a busy one. So a partition that grew is looked up in the lock
store, and a wait ends only for one that no live worker holds, this one
included (its own job on the partition must end first, which wakes the
worker anyway). The end offsets seen are kept from one wait to the next, so
each new record is looked at once, never again by the next wait.

A partition whose next job is delayed ends the wait when the job comes due,
if this worker knows of it; a due time already past does not (another worker
holds that partition, or the reserve that follows will look at it anyway).

The first look of a wait comes one poll after it starts (unless this is the
first wait, which needs the end offsets to compare with): most waits of a
busy worker are cut short by one of its jobs ending, and need not cost the
broker a request each.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from datetime import timedelta

from aiokafka import TopicPartition

from ..._clock import utcnow
from .connection import KafkaClients, translated
from .partitions import Partitions

POLL = timedelta(milliseconds=100)
"""How often an idle worker asks the broker whether its queues' partitions grew."""


class Waker:
    """`wait_for_work` for one `KafkaQueue`: end offsets polled, held partitions skipped."""

    def __init__(self, clients: KafkaClients, partitions: Partitions) -> None:
        self._clients = clients
        self._partitions = partitions
        self._seen: dict[TopicPartition, int] = {}
        """The end offset of each partition as the last look found it."""

    async def wait(self, topics: Mapping[str, Sequence[int]], timeout: timedelta) -> None:
        """Return once a record lands on a partition of `topics` nobody holds, or at `timeout`."""
        loop = asyncio.get_running_loop()
        ends_at = loop.time() + timeout.total_seconds()
        tps = [TopicPartition(topic, n) for topic, numbers in topics.items() for n in numbers]
        # The first look waits a poll, unless there is nothing yet to compare with.
        look = any(tp not in self._seen for tp in tps)
        while True:
            if look and tps and await self._arrived(tps):
                return
            look = True
            left = ends_at - loop.time()
            if left <= 0:
                return
            pause = min(left, POLL.total_seconds())
            due = self._due_in(tps)
            if due is not None and due <= pause:
                await asyncio.sleep(due)
                return
            await asyncio.sleep(pause)

    async def _arrived(self, tps: list[TopicPartition]) -> bool:
        """Whether a partition grew since the last look and no live worker holds it."""
        lookups = await self._clients.lookups()
        async with translated("read the end offsets of the queue's partitions"):
            ends = await self._clients.finished(lookups.end_offsets(tps))
        grown = [tp for tp, end in ends.items() if tp in self._seen and end > self._seen[tp]]
        free = False
        for tp in grown:
            state = self._partitions.get(tp.topic, tp.partition)
            if state is not None and state.lock is not None:
                continue  # this worker's own job runs there; its end wakes the worker
            name = self._partitions.lease_name(tp.topic, tp.partition)
            if not await self._partitions.locks.is_held(name):
                free = True
                break
        # Each record is looked at by one wait, not by every one after; but only once
        # that look has ended: a wait cancelled while it asked the lock store (a worker
        # cancels its idle wait whenever a slot frees) left the growth marked as seen,
        # and the next wait slept through a record nobody served.
        self._seen.update(ends)
        return free

    def _due_in(self, tps: list[TopicPartition]) -> float | None:
        """Seconds until the soonest delayed job this worker knows of comes due, if one will."""
        now = utcnow()
        soonest: float | None = None
        for tp in tps:
            state = self._partitions.get(tp.topic, tp.partition)
            if state is None or state.not_before is None or state.not_before <= now:
                continue
            seconds = (state.not_before - now).total_seconds()
            soonest = seconds if soonest is None else min(soonest, seconds)
        return soonest


__all__ = ["POLL", "Waker"]
