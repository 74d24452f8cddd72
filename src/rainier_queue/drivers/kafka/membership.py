# SPDX-License-Identifier: MIT
"""Which workers serve a topic, kept in the lock store, so each can take its fair share.

Partitions are leased first come, first served. A worker that does not know
how many others there are takes every partition it has slots for, and with
a concurrency at or above the partition count the first worker to start
takes them all: the next one finds none free and sits idle. Knowing the
number of live workers, each takes at most ceil(partitions / workers).

The lock store can only get, set and compare single keys (a database store
cannot list keys by pattern), so membership is a row of seats: one lock per
partition, `kafka-member:{group}:{topic}:{i}`. A worker serving the topic
holds one seat, with the partition lease's TTL; it renews the seat whenever
it looks at the count and whenever it renews a running job's lease, and
gives it back when it stops cleanly. A worker that dies stops renewing, and
its seat lapses with its partition leases. Counting the held seats counts
the live workers. There are only as many seats as partitions, because that
is all the count is for: with at least as many workers as partitions, every
worker's share is one; a worker that finds every seat taken counts itself
on top.

A worker below its share that finds the partitions it wants held by others
says so with a short-lived key (`kafka-wanting:{group}:{topic}`); a worker
above its share gives partitions back, between jobs, only while somebody is
asking. So no worker gives up a partition for nothing, and one that took
partitions nobody else was serving keeps them until somebody wants them.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from datetime import timedelta

from ...locks import Lock, LockManager
from .names import member_name, wanting_key

log = logging.getLogger("rainier_queue.kafka")

LOOK_EVERY = 0.25
"""Seconds a count of the workers is trusted before the seats are read again.

It is also how long a worker that joins a busy one waits, at most, before the
busy one sees it asking and gives partitions back: at a second, a second
worker started beside a first sat idle for that second while the first
served every partition, and the drain of a short backlog (5,000 jobs, about
two seconds) ran at 2,053 jobs/s end to end against 2,327 at a quarter second
(medians of 8 interleaved rounds). A look is a handful of
lock-store reads (one per seat, side by side, and the request key), a few
dozen a second per busy worker: nothing beside the two writes per job."""

WANT_FOR = 2.0
"""Seconds a worker's request for partitions stands unless it is made again.

Longer than a look by far, so the holders see it at their next one; and
longer than an idle worker waits between two reserves (a second by default),
so a worker still below its share keeps asking through its idle waits."""

ASK_EVERY = WANT_FOR / 4
"""Seconds between two writes of one worker's standing request."""


def fair_share(partitions: int, members: int) -> int:
    """The most partitions one of `members` workers takes of `partitions`: at least one."""
    return max(1, -(-partitions // max(1, members)))


@dataclass(frozen=True, slots=True)
class Roster:
    """What a worker knows of the others serving a topic."""

    members: int
    """Live workers serving the topic, this one included."""
    wanted: bool
    """A worker below its share is waiting for a partition."""


@dataclass(eq=False, slots=True)
class _Seat:
    """This worker's place among the workers of one topic."""

    seats: int = 0
    """How many seats the topic has: its partition count when last looked at."""
    index: int = -1
    lock: Lock | None = None
    extended_at: float = 0.0
    roster: Roster = Roster(members=1, wanted=False)
    looked_at: float = float("-inf")
    asked_at: float = float("-inf")


class Membership:
    """This worker's seats, one per topic it reserves from."""

    def __init__(self, locks: LockManager, *, group: str, lease: timedelta) -> None:
        self.locks = locks
        self.group = group
        self.lease = lease
        self._seats: dict[str, _Seat] = {}

    async def look(self, topic: str, partitions: int) -> Roster:
        """The workers of `topic` as of at most `LOOK_EVERY` ago; takes or renews a seat."""
        seat = self._seats.setdefault(topic, _Seat())
        now = time.monotonic()
        if seat.seats == partitions and now - seat.looked_at < LOOK_EVERY:
            return seat.roster
        seat.seats = partitions
        await self._renew(topic, seat, now)
        names = [member_name(self.group, topic, i) for i in range(partitions)]
        held = await asyncio.gather(*(self.locks.is_held(name) for name in names))
        taken = sum(held)
        if seat.lock is None:
            for index in (i for i, busy in enumerate(held) if not busy):
                lock = await self.locks.acquire(names[index], self.lease)
                if lock is not None:
                    seat.index, seat.lock, seat.extended_at = index, lock, now
                    taken += 1
                    break
        wanted = await self.locks.cache.get(wanting_key(self.group, topic)) is not None
        members = taken if seat.lock is not None else taken + 1
        seat.roster, seat.looked_at = Roster(members=members, wanted=wanted), now
        return seat.roster

    async def keep(self, topic: str) -> None:
        """Renew this worker's seat at `topic` if due: a running job's renewal calls this."""
        seat = self._seats.get(topic)
        if seat is not None and seat.lock is not None:
            await self._renew(topic, seat, time.monotonic())

    async def want(self, topic: str) -> None:
        """Say that this worker, below its share, waits for a partition of `topic`."""
        seat = self._seats.get(topic)
        now = time.monotonic()
        if seat is None or now - seat.asked_at < ASK_EVERY:
            return
        seat.asked_at = now
        await self.locks.cache.put(
            wanting_key(self.group, topic), b"1", timedelta(seconds=WANT_FOR)
        )

    async def leave(self) -> None:
        """Give back every seat, so the others count one worker fewer at once."""
        for seat in self._seats.values():
            lock, seat.lock, seat.looked_at = seat.lock, None, float("-inf")
            if lock is not None:
                await self.locks.release(lock)

    @property
    def seated(self) -> bool:
        """Whether this worker holds a seat at any topic."""
        return any(seat.lock is not None for seat in self._seats.values())

    async def _renew(self, topic: str, seat: _Seat, now: float) -> None:
        """Extend the seat once a quarter of its TTL has passed; drop it if it lapsed."""
        lock = seat.lock
        if lock is None:
            return
        if seat.index >= seat.seats:  # the topic lost partitions: sit lower down
            seat.lock = None
            await self.locks.release(lock)
            return
        if now - seat.extended_at < self.lease.total_seconds() / 4:
            return
        if await self.locks.extend(lock, self.lease):
            seat.extended_at = now
            return
        log.warning(
            "this worker's seat among the workers of topic %r lapsed (it was not renewed in "
            "time); taking one again",
            topic,
        )
        seat.lock = None


__all__ = ["ASK_EVERY", "LOOK_EVERY", "WANT_FOR", "Membership", "Roster", "fair_share"]
