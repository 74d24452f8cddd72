# SPDX-License-Identifier: MIT
from __future__ import annotations

from pathlib import Path

from ..redis_servers import delete_keys
from ..services import require_port
from .stores import Store

REDIS_URL = "redis://127.0.0.1:6379/0"


def check() -> None:
    require_port("Redis", 6379)


async def cleanup(tmp: Path, namespace: str) -> None:
    await delete_keys(f"rq:{namespace}:*", REDIS_URL)


STORE = Store("redis", lambda tmp, ns: f"{REDIS_URL}?prefix=rq:{ns}:", check, cleanup)
