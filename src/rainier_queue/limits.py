# SPDX-License-Identifier: MIT
"""Rate and concurrency limits per key, kept in a store every worker shares.

A limit is only a limit if every worker on every machine counts against the
same one, so the counts live in a `Cache` (the connection's own database or
Redis, Kafka's lock store, this process's memory for `memory://`) and are
changed only by its atomic steps, never read, changed and written back
blindly:

- **concurrency**, N slots per key, each a key of its own taken with `add`
  (set if absent) for the job's lease, renewed with `replace_if` while the
  job runs and given back with `forget_if` when it settles. Its value names
  the worker and job holding it (what `explain` shows). A worker that dies
  stops renewing: its slot lapses with the job's lease, so the job and its
  slot come free together, and the key is whole again.
- **rate**, N starts per period, spread evenly: one key per limit key
  holding the moment its next start may come (a cell rate without bursts);
  a start moves it on by period/N with `replace_if` on the value it read,
  and is refused while that moment is still ahead, saying exactly how long
  until it comes, which is the delay the worker sets the job aside for. So
  starts of one key are at least period/N apart, across every worker, and
  no window of one period holds more than N. (No burst: ten jobs waiting
  on "10/m" start one every six seconds, not ten at once.)

The moment is each worker's own clock: workers whose clocks disagree by more
than a small part of the period see a looser or tighter limit (keep them on
NTP). The store is asked only for a job whose class declares a limit; the
key travels in the envelope's `rq-limit-key` header, set at dispatch, so a
worker decides in-process whether to ask at all.
"""

from __future__ import annotations

import asyncio
import logging
import random
import secrets
import time
import weakref
from dataclasses import dataclass
from datetime import timedelta
from typing import Protocol, runtime_checkable

from .cache.memory import MemoryCache
from .errors import ConfigurationError
from .job import LIMIT_KEY, Job, parse_rate
from .locks import Cache, LockManager
from .queue import Queue
from .registry import JobRegistry

log = logging.getLogger("rainier_queue.limits")

SLOT_LEASE = timedelta(seconds=30)
"""How long a concurrency slot stands unrenewed when its job has no lease of its own (a
dead worker's slot frees after it); a job with a lease gives its slot the same one."""

CONCURRENCY_RETRY = timedelta(milliseconds=250)
"""How long a job that found every slot of its key taken steps aside (jittered up to 2x)."""

_CAS_TRIES = 8


@dataclass(frozen=True, slots=True)
class Limits:
    """What a job class declares: starts per period, and runs at once, per key."""

    rate: tuple[int, timedelta] | None
    concurrency: int | None

    def describe(self) -> str:
        parts = []
        if self.rate is not None:
            parts.append(f"rate {self.rate[0]} per {self.rate[1].total_seconds():g}s")
        if self.concurrency is not None:
            parts.append(f"concurrency {self.concurrency}")
        return ", ".join(parts)


def limits_of(cls: type[Job]) -> Limits | None:
    """`cls`'s limits, or None when it declares none (checked when the class was made)."""
    rate, concurrency = cls.rate_limit, cls.concurrency_limit
    if rate is None and concurrency is None:
        return None
    return Limits(parse_rate(rate) if rate is not None else None, concurrency)


@runtime_checkable
class LimitStore(Protocol):
    """A queue whose own shared store holds limits (Kafka's lock store)."""

    def limit_store(self) -> Cache | None:
        """The store, or None when there is none."""
        ...


_LOCAL: weakref.WeakKeyDictionary[Queue, MemoryCache] = weakref.WeakKeyDictionary()
"""The limit store of each in-process queue, shared by every worker on it."""


def limited_classes(registry: JobRegistry) -> list[str]:
    """The names of the registry's job classes that declare a limit."""
    return [cls.name for cls in registry if limits_of(cls) is not None]


def found_store(queue: Queue, locks: LockManager | None) -> Cache | None:
    """The store limits are counted in without being given one, or None when there is none:
    the queue's own (`LimitStore`), else `locks` when shared, else this process's memory for
    a queue that lives in it."""
    if isinstance(queue, LimitStore) and (own := queue.limit_store()) is not None:
        return own
    if locks is not None and (locks.is_shared or not queue.capabilities.shared_between_processes):
        return locks.cache
    if not queue.capabilities.shared_between_processes:
        store = _LOCAL.get(queue)
        if store is None:
            store = _LOCAL[queue] = MemoryCache()
        return store
    return None


def store_for(
    queue: Queue, given: Cache | None, locks: LockManager | None, registry: JobRegistry
) -> Cache | None:
    """Where a worker counts limits; None when no job class it knows declares any.

    `ConfigurationError`, naming `locks`, when one does and there is no shared store.
    """
    limited = limited_classes(registry)
    if not limited:
        return None
    store = given if given is not None else found_store(queue, locks)
    if store is None:
        raise ConfigurationError(
            f"job(s) {', '.join(sorted(limited))} declare rate or concurrency limits, which "
            f"every worker counts in one shared store, and {queue.describe()} has none of its "
            'own: set `locks` to a database or Redis URL (`locks = "postgresql://..."` in the '
            "config), or give the Worker `limits=` a shared cache store"
        )
    return store


@dataclass(slots=True)
class Held:
    """Slots a running job holds; given back by `Limiter.give_back`."""

    key: str
    slot: str | None
    """The concurrency slot's store key, or None when the job is only rate-limited."""
    value: bytes
    lease: timedelta
    """How long the slot stands unrenewed."""
    renewing: asyncio.Task[None] | None = None


@dataclass(frozen=True, slots=True)
class Refused:
    """Why a job may not start yet, and how long to set it aside for."""

    reason: str
    wait: timedelta


class Limiter:
    """Takes and gives back a key's budget in `cache`, for one worker."""

    def __init__(self, cache: Cache, *, holder: str, lease: timedelta = SLOT_LEASE) -> None:
        self.cache = cache
        self._holder = holder
        self._lease = lease
        self._clock = time.time

    @staticmethod
    def slot_key(key: str, index: int) -> str:
        return f"rq-limit:{key}:slot:{index}"

    @staticmethod
    def rate_key(key: str) -> str:
        return f"rq-limit:{key}:rate"

    async def take(
        self, key: str, limits: Limits, job_id: str, *, lease: timedelta | None = None
    ) -> Held | Refused:
        """A slot (if limited) and a start (if rated) for `job_id`, or why not and how long.

        The slot stands for `lease` unrenewed (the job's own lease, so a dead worker's
        job and its slot come free together), or the limiter's default.
        """
        value = f"{self._holder} job {job_id} {secrets.token_hex(4)}".encode()
        held = Held(key, None, value, lease or self._lease)
        if limits.concurrency is not None:
            first = random.randrange(limits.concurrency)
            for n in range(limits.concurrency):
                slot = self.slot_key(key, (first + n) % limits.concurrency)
                if await self.cache.add(slot, held.value, held.lease):
                    held.slot = slot
                    break
            else:
                return Refused(
                    f"all {limits.concurrency} slots of key `{key}` are taken",
                    CONCURRENCY_RETRY * (1 + random.random()),
                )
        if limits.rate is not None:
            wait = await self._start(key, *limits.rate)
            if wait is not None:
                await self._forget(held)
                return Refused(
                    f"key `{key}` used its {limits.rate[0]} starts per "
                    f"{limits.rate[1].total_seconds():g}s",
                    wait,
                )
        if held.slot is not None:
            held.renewing = asyncio.get_running_loop().create_task(
                self._renew(held), name=f"rainier-queue limit slot {held.slot}"
            )
        return held

    async def give_back(self, held: Held) -> None:
        """The job settled: its slot is free for the next (never fails; a slot lapses anyway)."""
        if held.renewing is not None:
            held.renewing.cancel()
            held.renewing = None
        await self._forget(held)

    async def holders(self, key: str, limits: Limits) -> list[str]:
        """Who holds `key`'s concurrency slots now (`explain`)."""
        if limits.concurrency is None:
            return []
        found = []
        for index in range(limits.concurrency):
            value = await self.cache.get(self.slot_key(key, index))
            if value is not None:
                found.append(value.decode(errors="replace").rsplit(" ", 1)[0])
        return found

    async def rate_wait(self, key: str, limits: Limits) -> timedelta | None:
        """How long until `key` may start another job, or None when it may now (`explain`)."""
        if limits.rate is None:
            return None
        raw = await self.cache.get(self.rate_key(key))
        if raw is None:
            return None
        ahead = float(raw) - self._clock()
        return timedelta(seconds=ahead) if ahead > 0 else None

    async def _start(self, key: str, count: int, period: timedelta) -> timedelta | None:
        """Spend one start of `key`'s budget; None if spent, else how long until one fits."""
        step = period.total_seconds() / count
        name = self.rate_key(key)
        for _ in range(_CAS_TRIES):
            raw = await self.cache.get(name)
            now = self._clock()
            next_start = float(raw) if raw is not None else now
            if next_start > now:
                return timedelta(seconds=next_start - now)
            after = now + step
            value = repr(after).encode()
            ttl = timedelta(seconds=after - now + 1)
            if raw is None:
                if await self.cache.add(name, value, ttl):
                    return None
            elif await self.cache.replace_if(name, raw, value, ttl):
                return None
        # Lost the race every time: others are starting this key's jobs right now.
        return timedelta(seconds=step * (1 + random.random()))

    async def _renew(self, held: Held) -> None:
        assert held.slot is not None
        every = held.lease.total_seconds() / 3
        while True:
            await asyncio.sleep(every)
            try:
                if not await self.cache.replace_if(held.slot, held.value, held.value, held.lease):
                    log.warning(
                        "concurrency slot %s lapsed while its job ran; another job of key `%s` "
                        "may run beside it",
                        held.slot,
                        held.key,
                    )
                    return
            except Exception as exc:
                log.warning(
                    "could not renew concurrency slot %s (%s); trying again", held.slot, exc
                )

    async def _forget(self, held: Held) -> None:
        if held.slot is None:
            return
        try:
            await self.cache.forget_if(held.slot, held.value)
        except Exception as exc:
            log.warning(
                "could not give back concurrency slot %s (%s); it lapses within %gs",
                held.slot,
                exc,
                held.lease.total_seconds(),
            )


__all__ = [
    "found_store",
    "limited_classes",
    "store_for",
    "CONCURRENCY_RETRY",
    "LIMIT_KEY",
    "SLOT_LEASE",
    "Held",
    "LimitStore",
    "Limiter",
    "Limits",
    "Refused",
    "limits_of",
]
