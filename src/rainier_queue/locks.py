# SPDX-License-Identifier: MIT
"""The `Cache` port and the `LockManager` built on it.

Three things in a job queue need a small shared store that is not the
queue itself: unique jobs (a lock per job name and id, taken at dispatch
and given back by the worker), the scheduler's "run on one server" lock,
and the Kafka driver's partition leases and cursors. They all reduce to a
few atomic operations on keys with a time to live, so that is the port:

- `add`: set if absent (acquire),
- `replace_if`: set only if the value is still what we think (extend),
- `forget_if`: delete only if the value is still ours (release),
- `increment`: an atomic counter.

A lock is a lease, not a mutex: if its holder overruns the TTL, a second
holder can take it. Every operation after acquire carries the owner's
random token, so a holder whose lease lapsed can never release or extend
the lock that someone else now holds.

`is_shared` says whether other processes see the same keys. A memory store
does not; code that needs a lock across processes (the Kafka driver, the
scheduler across servers) refuses one that is not shared, unless the
caller vouches for it with `LockManager.declared_shared()`.
"""

from __future__ import annotations

import abc
import secrets
from dataclasses import dataclass
from datetime import timedelta
from types import TracebackType
from typing import Self


class Cache(abc.ABC):
    """A key-value store with expiry and a few atomic operations. Bytes in, bytes out."""

    name: str = "cache"

    @property
    @abc.abstractmethod
    def is_shared(self) -> bool:
        """Whether other processes (and machines) see the same keys."""

    @abc.abstractmethod
    async def get(self, key: str) -> bytes | None:
        """The value, or None when absent or expired."""

    @abc.abstractmethod
    async def put(self, key: str, value: bytes, ttl: timedelta | None = None) -> None:
        """Set `key`, replacing any value; expire after `ttl` if given."""

    @abc.abstractmethod
    async def add(self, key: str, value: bytes, ttl: timedelta | None = None) -> bool:
        """Set `key` only if it is absent (or expired). True if this call set it."""

    @abc.abstractmethod
    async def replace_if(
        self, key: str, expected: bytes, value: bytes, ttl: timedelta | None = None
    ) -> bool:
        """Set `key` to `value` only if it currently holds `expected`. True if it did."""

    @abc.abstractmethod
    async def forget(self, key: str) -> bool:
        """Delete `key`. True if something was deleted."""

    @abc.abstractmethod
    async def forget_if(self, key: str, expected: bytes) -> bool:
        """Delete `key` only if it currently holds `expected`. True if it did."""

    @abc.abstractmethod
    async def increment(self, key: str, by: int = 1, ttl: timedelta | None = None) -> int:
        """Add `by` to the counter at `key` (absent counts as 0) and return the new value.

        `ttl` applies when the call creates the counter; an existing counter
        keeps its expiry. A value that is not a whole number is an error,
        never silently overwritten.
        """

    async def flush(self) -> None:
        """Delete every key this store holds (tests and `rainier-queue flush`)."""
        raise NotImplementedError

    async def aclose(self) -> None:  # noqa: B027 - optional hook
        """Free connections and threads."""

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


@dataclass(frozen=True, slots=True)
class Lock:
    """A held lock: the key it sits on and the owner token that proves it is ours."""

    key: str
    owner: str
    ttl: timedelta


class LockManager:
    """Lease-style locks over a `Cache`, each acquire with its own owner token."""

    def __init__(self, cache: Cache, *, prefix: str = "lock:", shared: bool | None = None) -> None:
        self.cache = cache
        self.prefix = prefix
        self._declared_shared = shared

    def declared_shared(self) -> LockManager:
        """The same locks, vouched for as shared between every process that uses them.

        For a store that cannot tell (a memory store in a single-process test,
        a store the operator knows is shared). The caller takes responsibility.
        """
        return LockManager(self.cache, prefix=self.prefix, shared=True)

    @property
    def is_shared(self) -> bool:
        """Whether a lock taken here excludes other processes too."""
        if self._declared_shared is not None:
            return self._declared_shared
        return self.cache.is_shared

    def key(self, name: str) -> str:
        """The cache key a lock named `name` lives under."""
        return self.prefix + name

    async def acquire(self, name: str, ttl: timedelta) -> Lock | None:
        """Take the lock for `ttl`; None when someone else holds it."""
        owner = secrets.token_hex(16)
        key = self.key(name)
        if await self.cache.add(key, owner.encode(), ttl):
            return Lock(key=key, owner=owner, ttl=ttl)
        return None

    async def extend(self, lock: Lock, ttl: timedelta | None = None) -> bool:
        """Push the lock's expiry to `ttl` from now; False if it is no longer ours."""
        owner = lock.owner.encode()
        return await self.cache.replace_if(lock.key, owner, owner, ttl or lock.ttl)

    async def release(self, lock: Lock) -> bool:
        """Give the lock back; False (and nothing deleted) if it is no longer ours."""
        return await self.cache.forget_if(lock.key, lock.owner.encode())

    async def force_release(self, name: str) -> bool:
        """Delete the lock whoever holds it. For owners that are gone (a worker
        releasing a uniqueness lock its dispatcher took)."""
        return await self.cache.forget(self.key(name))

    async def is_held(self, name: str) -> bool:
        """Whether anybody holds the lock now."""
        return await self.cache.get(self.key(name)) is not None

    async def holds(self, lock: Lock) -> bool:
        """Whether `lock` is still held by its owner."""
        return await self.cache.get(lock.key) == lock.owner.encode()

    def __repr__(self) -> str:
        return f"LockManager({self.cache.name}, prefix={self.prefix!r}, shared={self.is_shared})"


def parse_counter(key: str, raw: bytes) -> int:
    """A stored counter's value; a `ValueError` (never a silent reset) if it is not one.

    Counters are stored as decimal text, so any store can hold them and a
    person can read them; an empty value counts as zero.
    """
    try:
        return int(raw.decode() or "0")
    except (UnicodeDecodeError, ValueError):
        raise ValueError(
            f"cache key {key!r} holds {raw[:20]!r}, which is not a whole number"
        ) from None


__all__ = ["Cache", "Lock", "LockManager", "parse_counter"]
