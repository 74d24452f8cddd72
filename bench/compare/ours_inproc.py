# SPDX-License-Identifier: MIT
"""Ours on `memory://`: one process that pushes and works, since that queue cannot be shared.

`bench.compare.ours` starts this as the worker command on the memory backend.
By default it pushes all N jobs in batches of 1000 and then works until the
queue is empty, like a CLI worker with `--stop-when-empty`. With `--feed`
(the memory workload) it keeps the backlog small instead, topping it up a
batch at a time, so that the resident memory measured is the worker's and
not N queued jobs'; it then works until SIGTERM, which the harness sends
once the counter has reached N.
"""

from __future__ import annotations

import argparse
import asyncio

from rainier_queue import QueuedJob, Worker, WorkerOptions
from rainier_queue.drivers import open_queue
from rainier_queue.queue import Queue

from .ours_jobs import Incr, registry

BATCH = 1000
LOW_WATER = 2 * BATCH


def batch(start: int, stop: int) -> list[QueuedJob]:
    return [QueuedJob.create(Incr.name, {"n": n}, max_attempts=1) for n in range(start, stop)]


async def feed(queue: Queue, jobs: int) -> None:
    """Push `jobs` jobs, a batch whenever fewer than LOW_WATER are waiting."""
    pushed = 0
    while pushed < jobs:
        if await queue.size("default") < LOW_WATER:
            upto = min(jobs, pushed + BATCH)
            await queue.push_many(batch(pushed, upto))
            pushed = upto
        else:
            await asyncio.sleep(0.002)


async def run(jobs: int, concurrency: int, feeding: bool) -> None:
    queue = open_queue("memory://")
    try:
        if feeding:
            worker = Worker(queue, registry, WorkerOptions(concurrency=concurrency))
            worker.install_signal_handlers()
            feeder = asyncio.ensure_future(feed(queue, jobs))
            await worker.run()
            feeder.cancel()
        else:
            for start in range(0, jobs, BATCH):
                await queue.push_many(batch(start, min(jobs, start + BATCH)))
            options = WorkerOptions(concurrency=concurrency, stop_when_empty=True)
            worker = Worker(queue, registry, options)
            worker.install_signal_handlers()
            await worker.run()
    finally:
        await queue.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, required=True)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--feed", action="store_true", help="keep the backlog small (memory run)")
    args = parser.parse_args()
    asyncio.run(run(args.jobs, args.concurrency, args.feed))


if __name__ == "__main__":
    main()
