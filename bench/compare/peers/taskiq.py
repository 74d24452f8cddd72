# SPDX-License-Identifier: MIT
"""taskiq adapter: taskiq-redis's `RedisStreamBroker`, `taskiq worker --workers P` CLI.

taskiq has one worker model (asyncio tasks in `--workers` processes); its
CLI runs the event loop on uvloop whenever uvloop is installed (it is, in
the peers' venv). `--max-prefetch` (deliveries held beyond the running
tasks) stays at its default, 0, and the stream is read 100 entries a call
(taskiq-redis's default `xread_count`).

taskiq has no bulk enqueue: `.kiq()` is awaited concurrently, 1000 at a time.
The consumer group starts at stream id 0 so that jobs enqueued before the
workers start are read (the default `$` would skip them).
"""

from __future__ import annotations

import asyncio
import os
import time

import redis
from taskiq_redis import RedisStreamBroker

from ..latency_check import record
from ._async import incr_counter
from ._common import REDIS_URL, TAG_ENV, Adapter, bin_of, main

BATCH = 1000
STREAM = f"rqcmp:taskiq:{os.environ.get(TAG_ENV, 'none')}"

broker = RedisStreamBroker(
    REDIS_URL, queue_name=STREAM, consumer_group_name=f"{STREAM}:group", consumer_id="0"
)


@broker.task(task_name="compare_incr")
async def incr(n: int) -> None:
    await incr_counter()


@broker.task(task_name="compare_latency")
async def compare_latency(seq: int, pushed_at: float) -> None:
    record(seq, pushed_at)


class TaskiqAdapter(Adapter):
    backend = "redis"
    runner: asyncio.Runner | None = None

    def enqueue(self) -> float:
        return asyncio.run(self._enqueue())

    async def _enqueue(self) -> float:
        await broker.startup()
        try:
            started = time.perf_counter()
            for i in range(0, self.jobs, BATCH):
                chunk = range(i, min(self.jobs, i + BATCH))
                await asyncio.gather(*(incr.kiq(n) for n in chunk))
            return time.perf_counter() - started
        finally:
            await broker.shutdown()

    def worker_commands(self) -> list[list[str]]:
        return [
            [
                bin_of("taskiq"),
                "worker",
                "bench.compare.peers.taskiq:broker",
                "--workers",
                str(self.processes),
                "--max-async-tasks",
                str(self.concurrency),
                "--no-configure-logging",
            ]
        ]

    def push_one(self, seq: int, pushed_at: float) -> None:
        if self.runner is None:
            self.runner = asyncio.Runner()
            self.runner.run(broker.startup())
        self.runner.run(compare_latency.kiq(seq, pushed_at))

    def close(self) -> None:
        if self.runner is not None:
            self.runner.run(broker.shutdown())
            self.runner.close()

    def teardown(self) -> None:
        client = redis.Redis.from_url(REDIS_URL)
        keys = list(client.scan_iter(match=f"{STREAM}*"))
        if keys:
            client.delete(*keys)
        client.close()


if __name__ == "__main__":
    main(TaskiqAdapter)
