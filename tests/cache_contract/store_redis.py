# SPDX-License-Identifier: MIT
from __future__ import annotations

from pathlib import Path

from ..services import require_port
from .stores import Store

REDIS_URL = "redis://127.0.0.1:6379/0"


def check() -> None:
    require_port("Redis", 6379)


async def cleanup(tmp: Path, namespace: str) -> None:
    from redis.asyncio import Redis

    client = Redis.from_url(REDIS_URL)
    try:
        keys = [key async for key in client.scan_iter(match=f"rq:{namespace}:*", count=1000)]
        if keys:
            await client.delete(*keys)
    finally:
        await client.aclose()


STORE = Store("redis", lambda tmp, ns: f"{REDIS_URL}?prefix=rq:{ns}:", check, cleanup)
