# SPDX-License-Identifier: MIT
"""Our job for bench.compare: one Redis INCR on the per-run counter key."""

from __future__ import annotations

import os

import redis.asyncio as aioredis

from rainier_queue import Job, JobContext, JobRegistry

from .peers._common import KEY_ENV, REDIS_URL

_client: aioredis.Redis | None = None


class Incr(Job):
    name = "compare-incr"
    tries = 1
    n: int

    async def handle(self, ctx: JobContext) -> None:
        global _client
        if _client is None:
            _client = aioredis.Redis.from_url(REDIS_URL)
        await _client.incr(os.environ[KEY_ENV])


registry = JobRegistry([Incr])
