# SPDX-License-Identifier: MIT
"""Cache stores by URL, imported only when asked for (as the queue drivers are)."""

from __future__ import annotations

import importlib
from typing import cast

from ..drivers import scheme_of
from ..errors import ConfigurationError, UnknownOption
from . import Cache

_STORES: dict[str, tuple[str, str]] = {
    "memory": ("rainier_queue.cache.memory", "MemoryCache"),
    "sqlite": ("rainier_queue.cache.sqlite", "SQLiteCache"),
}


def open_cache(url: str) -> Cache:
    """The cache store for `url`: `memory://` or `sqlite:///path.db` (more as drivers land)."""
    scheme = scheme_of(url)
    entry = _STORES.get(scheme)
    if entry is None:
        raise UnknownOption("the lock store URL", scheme, _STORES)
    module = importlib.import_module(entry[0])
    factory = getattr(module, entry[1])
    try:
        return cast(Cache, factory.from_url(url))
    except ValueError as exc:
        raise ConfigurationError(f"lock store: {exc}") from exc
