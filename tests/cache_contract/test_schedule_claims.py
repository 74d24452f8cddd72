# SPDX-License-Identifier: MIT
"""The scheduler's per-tick claims hold on every store: one winner per tick across
processes, settled outcomes that stay, lapsed claims that can be taken over."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from rainier_queue.cache import Cache
from rainier_queue.cache.stores import open_cache
from rainier_queue.scheduling.claims import Claims, outcome

TICK = datetime(2026, 5, 17, 10, 0, tzinfo=UTC)
SHORT = timedelta(milliseconds=200)


async def test_a_tick_is_won_by_exactly_one_of_many_processes(cache_url: str) -> None:
    stores = [open_cache(cache_url) for _ in range(4)]
    if not stores[0].is_shared:  # a memory store: four claimers in one process share it
        stores = [stores[0]] * 4
    try:
        claimers = [Claims(store, owner=f"p{n}") for n, store in enumerate(stores)]
        won = await asyncio.gather(*(c.claim("nightly", TICK) for c in claimers for _ in range(3)))
        assert sum(claim is not None for claim in won) == 1
    finally:
        for store in set(stores):
            await store.aclose()


async def test_a_settled_tick_keeps_its_outcome_and_cannot_be_claimed_again(
    cache: Cache,
) -> None:
    claims = Claims(cache, owner="a")
    claim = await claims.claim("nightly", TICK)
    assert claim is not None
    assert await claims.state("nightly", TICK) == "claimed"
    done = outcome("nightly", TICK, "enqueued", job_id="j-1")
    assert await claims.settle(claim, done, keep_for=timedelta(hours=1))
    assert await Claims(cache, owner="b").claim("nightly", TICK) is None
    assert await claims.state("nightly", TICK) == done
    assert await claims.last("nightly") == done


async def test_a_lapsed_claim_is_taken_over_and_its_old_owner_cannot_settle(
    cache: Cache,
) -> None:
    dead = Claims(cache, owner="dead", lease=SHORT)
    old = await dead.claim("nightly", TICK)
    assert old is not None
    survivor = Claims(cache, owner="alive")
    new = None
    for _ in range(100):
        await asyncio.sleep(SHORT.total_seconds() / 2)
        new = await survivor.claim("nightly", TICK)
        if new is not None:
            break
    assert new is not None
    late = outcome("nightly", TICK, "enqueued", job_id="late")
    assert await dead.settle(old, late, keep_for=timedelta(hours=1)) is False
    assert await survivor.state("nightly", TICK) == "claimed"


async def test_giving_up_a_claim_lets_the_tick_be_claimed_again(cache: Cache) -> None:
    claims = Claims(cache, owner="a")
    claim = await claims.claim("nightly", TICK)
    assert claim is not None
    await claims.give_up(claim)
    assert await claims.state("nightly", TICK) is None
    assert await Claims(cache, owner="b").claim("nightly", TICK) is not None


async def test_the_cursor_never_moves_backwards(cache: Cache) -> None:
    claims = Claims(cache, owner="a")
    assert await claims.cursor("nightly") is None
    await claims.advance("nightly", TICK)
    await claims.advance("nightly", TICK - timedelta(minutes=1))
    assert await claims.cursor("nightly") == TICK
    await claims.advance("nightly", TICK + timedelta(seconds=1))
    assert await claims.cursor("nightly") == TICK + timedelta(seconds=1)
