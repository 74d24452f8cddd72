# SPDX-License-Identifier: MIT
"""The cache and lock contract: every test runs on every store."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from rainier_queue.cache import Cache
from rainier_queue.cache.stores import open_cache

STORES: dict[str, Callable[[Path], str]] = {
    "memory": lambda tmp: "memory://",
    "sqlite": lambda tmp: f"sqlite:///{tmp / 'cache.db'}",
}


@pytest.fixture(params=list(STORES), ids=list(STORES))
def cache_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return STORES[str(request.param)](tmp_path)


@pytest.fixture
async def cache(cache_url: str) -> AsyncIterator[Cache]:
    store = open_cache(cache_url)
    yield store
    await store.aclose()
