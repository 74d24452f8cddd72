# SPDX-License-Identifier: MIT
"""SAQ adapter: a Redis `Queue`, `saq <settings> --workers P` CLI.

SAQ has one worker model: asyncio, `concurrency` jobs per process and
`--workers` processes; its documentation names no other setting for
speed, so the rest are its defaults.

SAQ has no enqueue-only bulk API (`Queue.map` also waits for the results):
`Queue.enqueue` is awaited concurrently, 1000 at a time.
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

import redis
from saq import Queue

from ..latency_check import record
from ._async import incr_counter
from ._common import REDIS_URL, TAG_ENV, Adapter, bin_of, main

BATCH = 1000
NAME = f"rqcmp-saq-{os.environ.get(TAG_ENV, 'none')}"
CONCURRENCY_ENV = "RQCOMPARE_CONCURRENCY"

queue = Queue.from_url(REDIS_URL, name=NAME)


async def compare_incr(ctx: dict[str, Any], *, n: int) -> None:
    await incr_counter()


async def compare_latency(ctx: dict[str, Any], *, seq: int, pushed_at: float) -> None:
    record(seq, pushed_at)


settings = {
    "queue": queue,
    "functions": [compare_incr, compare_latency],
    "concurrency": int(os.environ.get(CONCURRENCY_ENV, "10")),
}


class SaqAdapter(Adapter):
    backend = "redis"
    runner: asyncio.Runner | None = None

    def enqueue(self) -> float:
        return asyncio.run(self._enqueue())

    async def _enqueue(self) -> float:
        await queue.connect()
        try:
            started = time.perf_counter()
            for i in range(0, self.jobs, BATCH):
                chunk = range(i, min(self.jobs, i + BATCH))
                await asyncio.gather(*(queue.enqueue("compare_incr", n=n) for n in chunk))
            return time.perf_counter() - started
        finally:
            await queue.disconnect()

    def worker_commands(self) -> list[list[str]]:
        os.environ[CONCURRENCY_ENV] = str(self.concurrency)
        return [
            [
                bin_of("saq"),
                "bench.compare.peers.saq.settings",
                "--workers",
                str(self.processes),
                "--quiet",
            ]
        ]

    def push_one(self, seq: int, pushed_at: float) -> None:
        if self.runner is None:
            self.runner = asyncio.Runner()
            self.runner.run(queue.connect())
        self.runner.run(queue.enqueue("compare_latency", seq=seq, pushed_at=pushed_at))

    def close(self) -> None:
        if self.runner is not None:
            self.runner.run(queue.disconnect())
            self.runner.close()

    def teardown(self) -> None:
        client = redis.Redis.from_url(REDIS_URL)
        keys = list(client.scan_iter(match=f"*{NAME}*"))
        if keys:
            client.delete(*keys)
        client.close()


if __name__ == "__main__":
    main(SaqAdapter)
