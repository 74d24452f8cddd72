# SPDX-License-Identifier: MIT
"""Our job for bench.compare: one Redis INCR on the per-run counter key.

It counts through the same pipelined INCR as the other asyncio systems
(`peers/_async.py`, which says why it is not redis-py's asyncio client).
"""

from __future__ import annotations

from rainier_queue import Job, JobContext, JobRegistry

from .peers._async import incr_counter


class Incr(Job):
    name = "compare-incr"
    tries = 1
    n: int

    async def handle(self, ctx: JobContext) -> None:
        await incr_counter()


registry = JobRegistry([Incr])
