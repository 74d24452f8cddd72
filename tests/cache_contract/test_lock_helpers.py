# SPDX-License-Identifier: MIT
"""`wait_for` and `run`, the helpers around a lock, on every lock store.

The upstream's checklist, as ours: `wait_for` acquires once the holder is
gone and gives up at its deadline without hanging; `run` gives the lock
back whether the work succeeded or failed, skips the work when the lock is
taken, and (past the upstream) keeps the lock while work outlives its TTL.
"""

from __future__ import annotations

import asyncio
import threading
from datetime import timedelta

import pytest

from rainier_queue import LockContended
from rainier_queue.cache import Cache, LockManager

LONG = timedelta(minutes=1)


async def test_wait_for_takes_a_free_lock_at_once(cache: Cache) -> None:
    locks = LockManager(cache)

    lock = await locks.wait_for("job", LONG, timeout=timedelta(seconds=30))

    assert lock is not None
    assert await locks.holds(lock)


async def test_wait_for_gives_up_at_its_deadline_while_the_lock_is_held(cache: Cache) -> None:
    locks = LockManager(cache)
    holder = await locks.acquire("job", LONG)
    assert holder is not None

    waited = await locks.wait_for("job", LONG, timeout=timedelta(milliseconds=300))

    assert waited is None
    assert await locks.holds(holder), "giving up took nothing from the holder"


async def test_wait_for_takes_the_lock_once_its_holder_lets_go(cache: Cache) -> None:
    locks = LockManager(cache)
    holder = await locks.acquire("job", LONG)
    assert holder is not None
    asked = asyncio.Event()
    real_acquire = locks.acquire

    async def acquire_and_tell(name: str, ttl: timedelta) -> object:
        got = await real_acquire(name, ttl)
        asked.set()
        return got

    locks.acquire = acquire_and_tell  # type: ignore[method-assign,assignment]
    waiting = asyncio.create_task(locks.wait_for("job", LONG, timeout=timedelta(seconds=30)))
    await asyncio.wait_for(asked.wait(), 30)  # it has found the lock held at least once
    assert not waiting.done()
    assert await locks.release(holder)

    lock = await asyncio.wait_for(waiting, 30)
    assert lock is not None
    assert lock.owner != holder.owner


async def test_wait_for_takes_a_lock_whose_holder_let_it_lapse(cache: Cache) -> None:
    locks = LockManager(cache)
    assert await locks.acquire("job", timedelta(milliseconds=300)) is not None

    lock = await locks.wait_for("job", LONG, timeout=timedelta(seconds=30))

    assert lock is not None


async def test_run_holds_the_lock_while_the_work_runs_and_gives_it_back(cache: Cache) -> None:
    locks = LockManager(cache)
    seen: list[bool] = []

    async def work(a: int, *, b: int) -> int:
        seen.append(await locks.is_held("job"))
        return a + b

    result = await locks.run("job", work, 2, b=3, ttl=LONG)

    assert result == 5
    assert seen == [True]
    assert not await locks.is_held("job")


async def test_run_gives_the_lock_back_when_the_work_fails(cache: Cache) -> None:
    locks = LockManager(cache)

    async def work() -> None:
        raise RuntimeError("the work failed")

    with pytest.raises(RuntimeError, match="the work failed"):
        await locks.run("job", work, ttl=LONG)

    assert not await locks.is_held("job")
    assert await locks.acquire("job", LONG) is not None


async def test_run_skips_the_work_when_the_lock_is_taken(cache: Cache) -> None:
    locks = LockManager(cache)
    holder = await locks.acquire("job", LONG)
    assert holder is not None
    ran: list[str] = []

    async def work() -> None:
        ran.append("ran")

    with pytest.raises(LockContended, match="lock `job` is held elsewhere"):
        await locks.run("job", work, ttl=LONG)
    with pytest.raises(LockContended, match=r"after waiting 0.2s"):
        await locks.run("job", work, ttl=LONG, wait=timedelta(milliseconds=200))

    assert ran == []
    assert await locks.holds(holder), "the holder keeps its lock"


async def test_run_renews_the_lease_while_the_work_outlives_it(cache: Cache) -> None:
    # The work takes two of the lock's TTLs; another taker is shut out throughout. The
    # TTL leaves a renewal (every third of it) a second of slack on a loaded machine.
    locks = LockManager(cache)
    ttl = timedelta(milliseconds=1500)
    refused: list[bool] = []

    async def long_work() -> str:
        for _ in range(2):
            await asyncio.sleep(ttl.total_seconds())
            refused.append(await locks.acquire("job", ttl) is None)
        return "done"

    assert await locks.run("job", long_work, ttl=ttl) == "done"

    assert refused == [True, True]
    assert not await locks.is_held("job")


async def test_run_runs_a_plain_def_in_a_thread(cache: Cache) -> None:
    locks = LockManager(cache)
    loop_thread = threading.get_ident()

    def blocking_work(name: str) -> tuple[str, bool]:
        return name, threading.get_ident() != loop_thread

    assert await locks.run("job", blocking_work, "x", ttl=LONG) == ("x", True)
    assert not await locks.is_held("job")
