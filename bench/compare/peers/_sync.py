# SPDX-License-Identifier: MIT
"""Helpers for the synchronous Redis peers: one lazy client per process, key cleanup."""

from __future__ import annotations

import redis

from ._common import REDIS_URL, counter_key

_client: redis.Redis | None = None


def incr_counter() -> None:
    global _client
    if _client is None:
        _client = redis.Redis.from_url(REDIS_URL)
    _client.incr(counter_key())


def delete_matching(pattern: str) -> None:
    client = redis.Redis.from_url(REDIS_URL)
    try:
        keys = list(client.scan_iter(match=pattern, count=1000))
        for i in range(0, len(keys), 1000):
            client.delete(*keys[i : i + 1000])
    finally:
        client.close()
