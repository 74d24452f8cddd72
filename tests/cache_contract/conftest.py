# SPDX-License-Identifier: MIT
"""The cache and lock contract: every test runs on every store."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from rainier_queue.cache import Cache

from .stores import STORES, open_store


@pytest.fixture(params=list(STORES), ids=list(STORES))
async def cache_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    store = STORES[str(request.param)]
    if store.check is not None:
        store.check()
    namespace = "rq" + uuid.uuid4().hex[:10]
    yield store.url(tmp_path, namespace)
    if store.cleanup is not None:
        await store.cleanup(tmp_path, namespace)


@pytest.fixture
async def cache(cache_url: str) -> AsyncIterator[Cache]:
    store = open_store(cache_url)
    yield store
    await store.aclose()
