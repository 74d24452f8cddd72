# SPDX-License-Identifier: MIT
"""The Kafka cursors' compare-and-sets of one event-loop turn, sent together to a Redis store.

`CursorWrites` gathers the writes the tasks of one turn ask for and sends
them as one pipeline; these tests hold it to answering each caller as its
own `replace_if` would, on the shared Redis (under a prefix of the test's
own), and to handing an outage to every caller of the batch.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import pytest

from rainier_queue.cache.memory import MemoryCache
from rainier_queue.cache.redis import RedisCache
from rainier_queue.drivers.kafka.cursor_writes import CursorWrites
from rainier_queue.errors import BrokerUnavailable

from ..contract.backends import closed_port
from ..redis_servers import delete_keys

REDIS = "redis://127.0.0.1:6379/0"


@pytest.fixture
async def cache() -> AsyncIterator[RedisCache]:
    prefix = f"cw{uuid.uuid4().hex[:8]}:"
    store = RedisCache.from_url(f"{REDIS}?prefix={prefix}")
    try:
        await store.put("probe", b"1")
    except BrokerUnavailable as exc:
        pytest.skip(f"no Redis at {REDIS}: {exc}")
    yield store
    await store.aclose()
    await delete_keys(f"{prefix}*", REDIS)


async def test_writes_of_one_turn_each_get_their_own_answer(cache: RedisCache) -> None:
    writes = CursorWrites(cache)
    for key in ("p0", "p1", "p2"):
        await cache.put(key, b"5")

    answers = await asyncio.gather(
        writes.replace_if("p0", b"5", b"6"),
        writes.replace_if("p1", b"4", b"6"),  # another worker moved it: refused
        writes.replace_if("p2", b"5", b"7"),
        writes.replace_if("p3", b"5", b"6"),  # no cursor at all: refused
    )

    assert list(answers) == [True, False, True, False]
    assert [await cache.get(k) for k in ("p0", "p1", "p2", "p3")] == [b"6", b"5", b"7", None]


async def test_a_write_alone_in_its_turn_and_writes_of_later_turns_are_answered_too(
    cache: RedisCache,
) -> None:
    writes = CursorWrites(cache)
    await cache.put("p0", b"1")

    assert await writes.replace_if("p0", b"1", b"2") is True
    first = asyncio.ensure_future(writes.replace_if("p0", b"2", b"3"))
    await asyncio.sleep(0)  # the next write asks in a later turn, the first still on its way
    second = asyncio.ensure_future(writes.replace_if("p0", b"3", b"4"))

    assert await first is True
    assert await second in (True, False)  # sent before or after the first: never an error
    assert await cache.get("p0") in (b"3", b"4")


async def test_an_outage_reaches_every_write_of_the_batch() -> None:
    down = RedisCache.from_url(f"redis://127.0.0.1:{closed_port()}/0?prefix=cw:")
    writes = CursorWrites(down)
    try:
        answers = await asyncio.gather(
            *(writes.replace_if(f"p{n}", b"1", b"2") for n in range(3)), return_exceptions=True
        )
    finally:
        await down.aclose()

    assert all(isinstance(answer, BrokerUnavailable) for answer in answers)


async def test_a_store_that_cannot_batch_is_asked_one_write_at_a_time() -> None:
    store = MemoryCache()
    writes = CursorWrites(store)
    await store.put("p0", b"1")

    answers = await asyncio.gather(
        writes.replace_if("p0", b"1", b"2"), writes.replace_if("p0", b"9", b"3")
    )

    assert list(answers) == [True, False]
    assert await store.get("p0") == b"2"
