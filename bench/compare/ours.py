# SPDX-License-Identifier: MIT
"""Our adapter for bench.compare: push_many in batches of 1000, CLI workers.

Run by the project's venv: `python -m bench.compare.ours --backend postgres ...`.
"""

from __future__ import annotations

import asyncio
import sys
import time

from rainier_queue import QueuedJob
from rainier_queue.drivers import open_queue

from ..latency import cleanup
from .ours_jobs import Incr
from .peers._common import PG_DSN, REDIS_URL, Adapter, main, tag

BATCH = 1000


class Ours(Adapter):
    def url(self) -> str:
        if self.backend == "postgres":
            return f"{PG_DSN}?prefix=rqcmp_{tag()}_"
        return f"{REDIS_URL}?prefix=rqcmp:{tag()}:"

    def enqueue(self) -> float:
        return asyncio.run(self._enqueue())

    async def _enqueue(self) -> float:
        jobs = [QueuedJob.create(Incr.name, {"n": n}, max_attempts=1) for n in range(self.jobs)]
        queue = open_queue(self.url())
        try:
            await queue.size("default")  # connect (and create tables) outside the timing
            started = time.perf_counter()
            for i in range(0, len(jobs), BATCH):
                await queue.push_many(jobs[i : i + BATCH])
            return time.perf_counter() - started
        finally:
            await queue.aclose()

    def worker_commands(self) -> list[list[str]]:
        command = [
            sys.executable,
            "-m",
            "rainier_queue",
            "--app",
            "bench.compare.ours_jobs:registry",
            "--url",
            self.url(),
            "--quiet",
            "work",
            "--stop-when-empty",
            "--concurrency",
            str(self.concurrency),
        ]
        return [command] * self.processes

    def teardown(self) -> None:
        asyncio.run(cleanup(self.url()))


if __name__ == "__main__":
    main(Ours)
