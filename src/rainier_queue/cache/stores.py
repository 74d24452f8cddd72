# SPDX-License-Identifier: MIT
"""Cache stores by URL, imported only when asked for (as the queue drivers are)."""

from __future__ import annotations

import importlib
import importlib.util
from typing import cast
from urllib.parse import parse_qsl, urlencode

from ..errors import ConfigurationError, MissingDependency, UnknownOption
from ..locks import Cache
from ..schemes import scheme_of

_STORES: dict[str, tuple[str, str]] = {
    "memory": ("rainier_queue.cache.memory", "MemoryCache"),
    "sqlite": ("rainier_queue.cache.sqlite", "SQLiteCache"),
    "postgresql": ("rainier_queue.cache.postgres", "PostgresCache"),
    "postgres": ("rainier_queue.cache.postgres", "PostgresCache"),
    "mysql": ("rainier_queue.cache.mysql", "MySQLCache"),
    "mariadb": ("rainier_queue.cache.mysql", "MySQLCache"),
    "redis": ("rainier_queue.cache.redis", "RedisCache"),
    "rediss": ("rainier_queue.cache.redis", "RedisCache"),
    "redis-cluster": ("rainier_queue.cache.redis", "RedisCache"),
    "unix": ("rainier_queue.cache.redis", "RedisCache"),  # a Redis on a Unix socket
}
_EXTRAS = {
    "postgresql": ("postgres", "psycopg"),
    "postgres": ("postgres", "psycopg"),
    "mysql": ("mysql", "aiomysql"),
    "mariadb": ("mysql", "aiomysql"),
    "redis": ("redis", "redis"),
    "rediss": ("redis", "redis"),
    "redis-cluster": ("redis", "redis"),
    "unix": ("redis", "redis"),
}


def open_cache(url: str) -> Cache:
    """The cache store for `url`: `memory://`, `sqlite:///path.db`, and each server driver's."""
    scheme = scheme_of(url)
    entry = _STORES.get(scheme)
    if entry is None:
        raise UnknownOption("the lock store URL", scheme, _STORES)
    extra = _EXTRAS.get(scheme)
    if extra is not None and importlib.util.find_spec(extra[1]) is None:
        raise MissingDependency(f"{scheme} lock store", extra[0])
    module = importlib.import_module(entry[0])
    factory = getattr(module, entry[1])
    try:
        return cast(Cache, factory.from_url(url))
    except ValueError as exc:
        raise ConfigurationError(f"lock store: {exc}") from exc


SHARED_OPTIONS = frozenset({"prefix", "schema"})
"""Query options a queue URL and its cache store share; the rest are the queue's own."""


def open_cache_beside(url: str) -> Cache:
    """The cache store in the same database or Redis as the queue at `url`.

    What a connection with no `locks` of its own keeps shared state in (the
    scheduler's claims, rate and concurrency limits): the queue URL with its
    queue-only options dropped. A scheme with no cache store (a broker) is
    `UnknownOption`.
    """
    base, _, query = url.partition("?")
    kept = urlencode([(k, v) for k, v in parse_qsl(query) if k in SHARED_OPTIONS])
    return open_cache(f"{base}?{kept}" if kept else base)
