# SPDX-License-Identifier: MIT
"""The cache operations the queue relies on, atomic where they must be."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from rainier_queue.cache import Cache
from rainier_queue.locks import ReplacesMany

SHORT = timedelta(milliseconds=200)


async def test_a_value_put_comes_back_and_a_missing_key_is_none(cache: Cache) -> None:
    await cache.put("k", b"\x00bytes\xff")

    assert await cache.get("k") == b"\x00bytes\xff"
    assert await cache.get("absent") is None


async def test_a_value_expires_after_its_ttl(cache: Cache) -> None:
    await cache.put("k", b"v", SHORT)
    await asyncio.sleep(SHORT.total_seconds() * 1.5)

    assert await cache.get("k") is None


async def test_add_sets_only_an_absent_or_expired_key(cache: Cache) -> None:
    assert await cache.add("k", b"first", SHORT) is True
    assert await cache.add("k", b"second") is False
    assert await cache.get("k") == b"first"
    await asyncio.sleep(SHORT.total_seconds() * 1.5)
    assert await cache.add("k", b"third") is True
    assert await cache.get("k") == b"third"


async def test_only_one_of_many_concurrent_adds_wins(cache: Cache) -> None:
    results = await asyncio.gather(*(cache.add("race", str(i).encode()) for i in range(20)))

    assert sum(results) == 1


async def test_forget_if_and_replace_if_touch_only_the_expected_value(cache: Cache) -> None:
    await cache.put("k", b"mine")

    assert await cache.forget_if("k", b"theirs") is False
    assert await cache.replace_if("k", b"theirs", b"x") is False
    assert await cache.get("k") == b"mine"
    assert await cache.replace_if("k", b"mine", b"mine-again", SHORT) is True
    assert await cache.forget_if("k", b"mine-again") is True
    assert await cache.get("k") is None
    assert await cache.forget("k") is False


async def test_replace_many_if_answers_each_write_on_its_own(cache: Cache) -> None:
    # Stores that send several compare-and-sets in one trip (`ReplacesMany`): each is
    # judged on its own, and a failed one changes nothing of the others.
    if not isinstance(cache, ReplacesMany):
        pytest.skip(f"the {cache.name} store is asked one replace_if at a time")
    await cache.put("a", b"1")
    await cache.put("b", b"1")
    await cache.replace_if("c", b"x", b"y")  # a single call first, as the Kafka cursors make

    answers = await cache.replace_many_if(
        [("a", b"1", b"2"), ("b", b"stale", b"2"), ("c", b"1", b"2"), ("a", b"2", b"3")]
    )

    assert answers == [True, False, False, True]
    assert [await cache.get(k) for k in "abc"] == [b"3", b"1", None]


async def test_increment_counts_atomically_from_zero(cache: Cache) -> None:
    await asyncio.gather(*(cache.increment("n") for _ in range(25)))

    assert await cache.increment("n", 5) == 30
    assert await cache.increment("fresh", -2) == -2


async def test_incrementing_something_that_is_not_a_number_is_an_error(cache: Cache) -> None:
    await cache.put("k", b"not a number")

    with pytest.raises(ValueError, match="not a whole number"):
        await cache.increment("k")
    assert await cache.get("k") == b"not a number", "never silently overwritten"


async def test_flush_forgets_everything(cache: Cache) -> None:
    await cache.put("a", b"1")
    await cache.put("b", b"2")

    await cache.flush()

    assert await cache.get("a") is None
    assert await cache.get("b") is None
