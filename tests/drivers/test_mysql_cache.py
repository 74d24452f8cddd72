# SPDX-License-Identifier: MIT
"""What only the MySQL cache promises: exact keys under utf8mb4, and no silent truncation."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest

from rainier_queue.cache import Cache
from rainier_queue.cache.stores import open_cache
from rainier_queue.errors import BrokerRejected, ConfigurationError

from ..mysql_service import SERVER, check, drop_tables


@pytest.fixture
async def cache() -> AsyncIterator[Cache]:
    check()
    prefix = f"rq{uuid.uuid4().hex[:10]}_"
    store = open_cache(f"{SERVER}?prefix={prefix}")
    yield store
    await store.aclose()
    await drop_tables(prefix, ("cache",))


async def test_keys_that_differ_only_by_case_or_accent_are_different_keys(cache: Cache) -> None:
    for key in ("Lock", "lock", "LOCK", "löck"):
        assert await cache.add(key, key.encode()) is True

    assert [await cache.get(k) for k in ("Lock", "lock", "LOCK", "löck")] == [
        b"Lock",
        b"lock",
        b"LOCK",
        "löck".encode(),
    ]


async def test_four_byte_keys_and_arbitrary_bytes_round_trip(cache: Cache) -> None:
    await cache.put("unique:send 📨:🎉", bytes(range(256)))

    assert await cache.get("unique:send 📨:🎉") == bytes(range(256))
    assert await cache.forget_if("unique:send 📨:🎉", bytes(range(256))) is True


async def test_a_key_too_long_for_its_column_is_refused_not_cut_short(cache: Cache) -> None:
    with pytest.raises(BrokerRejected, match="too long"):
        await cache.put("k" * 300, b"v")

    assert await cache.get("k" * 255) is None


def test_an_unknown_option_in_the_url_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="does not take `prefx`. Did you mean `prefix`"):
        open_cache(f"{SERVER}?prefx=a_")
