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

Two helpers sit on top, for code that wants a lock around some work rather
than the steps: `wait_for` polls for a lock until a deadline (and then gives
up, never hanging), and `run` takes a lock, runs a function, and gives the
lock back even when the function fails, renewing the lease while the
function outlives it.

`is_shared` says whether other processes see the same keys. A memory store
does not; code that needs a lock across processes (the Kafka driver, the
scheduler across servers) refuses one that is not shared, unless the
caller vouches for it with `LockManager.declared_shared()`.
"""

from __future__ import annotations

import abc
import asyncio
import inspect
import logging
import secrets
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from types import TracebackType
from typing import Any, Protocol, Self, TypeVar, overload, runtime_checkable

from .errors import LockContended

T = TypeVar("T")

log = logging.getLogger("rainier_queue.locks")

DEFAULT_POLL = timedelta(milliseconds=100)
"""How often `wait_for` asks again for a lock someone holds."""


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


@runtime_checkable
class ReplacesMany(Protocol):
    """A cache that sends several `replace_if`s in one round trip (Redis, in a pipeline).

    Each is its own compare-and-set, answered on its own (not a transaction):
    the batch only saves the trips. A store without it is asked one at a time.
    """

    async def replace_many_if(self, items: Sequence[tuple[str, bytes, bytes]]) -> list[bool]:
        """`replace_if(key, expected, value)` for each item, without a time to live."""
        ...


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

    async def wait_for(
        self,
        name: str,
        ttl: timedelta,
        timeout: timedelta | float,
        *,
        poll: timedelta = DEFAULT_POLL,
    ) -> Lock | None:
        """Take the lock, polling every `poll` while someone holds it; None at the deadline.

        Tries at once, then after each `poll`, and a last time at the deadline
        `timeout` from now: it never waits past it for the lock (a slow store's
        last round trip aside).
        """
        if poll <= timedelta(0):
            raise ValueError(f"`poll` must be longer than zero (got {poll})")
        deadline = time.monotonic() + _seconds(timeout)
        while True:
            lock = await self.acquire(name, ttl)
            if lock is not None:
                return lock
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            await asyncio.sleep(min(poll.total_seconds(), left))

    @overload
    async def run(
        self,
        name: str,
        fn: Callable[..., Awaitable[T]],
        *args: Any,
        ttl: timedelta,
        wait: timedelta | float = 0,
        **kwargs: Any,
    ) -> T: ...

    @overload
    async def run(
        self,
        name: str,
        fn: Callable[..., T],
        *args: Any,
        ttl: timedelta,
        wait: timedelta | float = 0,
        **kwargs: Any,
    ) -> T: ...

    async def run(
        self,
        name: str,
        fn: Callable[..., Any],
        *args: Any,
        ttl: timedelta,
        wait: timedelta | float = 0,
        **kwargs: Any,
    ) -> Any:
        """Run `fn(*args, **kwargs)` holding the lock `name`; its result.

        The lock is taken for `ttl` (waiting up to `wait` for it, as
        `wait_for` does); if it cannot be had, `LockContended` is raised and
        `fn` does not run. While `fn` runs its lease is renewed every third
        of `ttl`, so work that outlives `ttl` keeps the lock; afterwards the
        lock is given back, whether `fn` returned or raised (a store's error
        in giving it back is raised only when `fn` succeeded).
        `fn` may be `async def` or a plain `def`, which runs in a thread.
        """
        waited = timedelta(seconds=_seconds(wait))
        lock = await self.wait_for(name, ttl, waited) if waited else await self.acquire(name, ttl)
        if lock is None:
            raise LockContended(name, waited)
        renewing = asyncio.create_task(self._renew(lock), name=f"renew lock {name}")
        try:
            result = fn(*args, **kwargs) if _is_async(fn) else await _in_thread(fn, args, kwargs)
            if inspect.isawaitable(result):
                result = await result
        except BaseException:
            await self._give_back(lock, renewing, raising=False)
            raise
        await self._give_back(lock, renewing, raising=True)
        return result

    async def _give_back(self, lock: Lock, renewing: asyncio.Task[None], *, raising: bool) -> None:
        """Stop renewing `lock` and release it; a store's error is raised only if `raising`
        (after a failed `fn`, its error is the one the caller must see)."""
        renewing.cancel()
        await asyncio.gather(renewing, return_exceptions=True)
        try:
            released = await self.release(lock)
        except Exception as exc:
            if raising:
                raise
            log.warning("releasing lock `%s` failed; it lapses on its own: %s", lock.key, exc)
            return
        if not released:
            log.warning(
                "lock `%s` was no longer this holder's when its work ended (its lease "
                "lapsed and was not renewed in time); someone else may have held it",
                lock.key,
            )

    async def _renew(self, lock: Lock) -> None:
        """Extend `lock` a third of its TTL before each lapse, until cancelled or lost."""
        every = lock.ttl.total_seconds() / 3
        while True:
            await asyncio.sleep(every)
            try:
                if not await self.extend(lock):
                    log.warning(
                        "lock `%s` was lost while its work ran (it lapsed before it was "
                        "renewed); another holder may run beside it",
                        lock.key,
                    )
                    return
            except Exception as exc:  # a store that blinks: the next turn tries again
                log.warning("renewing lock `%s` failed: %s", lock.key, exc)

    async def is_held(self, name: str) -> bool:
        """Whether anybody holds the lock now."""
        return await self.cache.get(self.key(name)) is not None

    async def holds(self, lock: Lock) -> bool:
        """Whether `lock` is still held by its owner."""
        return await self.cache.get(lock.key) == lock.owner.encode()

    def __repr__(self) -> str:
        return f"LockManager({self.cache.name}, prefix={self.prefix!r}, shared={self.is_shared})"


def _seconds(value: timedelta | float) -> float:
    seconds = value.total_seconds() if isinstance(value, timedelta) else float(value)
    if seconds < 0:
        raise ValueError(f"a wait cannot be negative (got {value})")
    return seconds


def _is_async(fn: Callable[..., object]) -> bool:
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None)  # noqa: B004 - an object whose __call__ is async
    )


async def _in_thread(fn: Callable[..., T], args: tuple[Any, ...], kwargs: dict[str, Any]) -> T:
    return await asyncio.to_thread(fn, *args, **kwargs)


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


__all__ = ["Cache", "Lock", "LockManager", "ReplacesMany", "parse_counter"]
