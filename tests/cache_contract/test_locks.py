# SPDX-License-Identifier: MIT
"""Locks are leases with owner tokens: only the owner extends or releases."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from rainier_queue.cache import Cache, LockManager

from .stores import open_store

SHORT = timedelta(milliseconds=200)


async def test_a_held_lock_cannot_be_taken_again_until_released(cache: Cache) -> None:
    locks = LockManager(cache)

    first = await locks.acquire("job", timedelta(minutes=1))
    second = await locks.acquire("job", timedelta(minutes=1))
    assert first is not None
    assert second is None
    assert await locks.release(first) is True
    assert await locks.acquire("job", timedelta(minutes=1)) is not None


async def test_a_lapsed_holder_cannot_release_or_extend_the_new_holders_lock(cache: Cache) -> None:
    locks = LockManager(cache)
    old = await locks.acquire("job", SHORT)
    assert old is not None
    await asyncio.sleep(SHORT.total_seconds() * 1.5)
    new = await locks.acquire("job", timedelta(minutes=1))
    assert new is not None

    assert await locks.release(old) is False
    assert await locks.extend(old) is False
    assert await locks.holds(new)


async def test_extend_keeps_a_lock_past_its_first_ttl(cache: Cache) -> None:
    # Each extension comes half a TTL after the last; the TTL is long enough
    # that a slow round trip on a loaded machine cannot eat the other half.
    locks = LockManager(cache)
    ttl = timedelta(milliseconds=600)
    lock = await locks.acquire("job", ttl)
    assert lock is not None

    for _ in range(3):  # 0.9 s in all: past the first TTL
        await asyncio.sleep(ttl.total_seconds() / 2)
        assert await locks.extend(lock) is True

    assert await locks.acquire("job", ttl) is None


async def test_force_release_frees_a_lock_whoever_holds_it(cache: Cache) -> None:
    locks = LockManager(cache)
    await locks.acquire("job", timedelta(minutes=1))

    assert await locks.force_release("job") is True
    assert not await locks.is_held("job")


async def test_a_store_says_whether_other_processes_share_its_locks(cache_url: str) -> None:
    first = open_store(cache_url)
    second = open_store(cache_url)
    try:
        held = await LockManager(first).acquire("job", timedelta(minutes=1))
        assert held is not None
        seen_elsewhere = await LockManager(second).is_held("job")

        assert seen_elsewhere == first.is_shared
        assert LockManager(first).declared_shared().is_shared
    finally:
        await first.aclose()
        await second.aclose()
