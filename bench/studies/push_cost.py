# SPDX-License-Identifier: MIT
"""What one `push` costs the client in CPU: the number behind an enqueue-heavy application.

Wall time on a shared machine says how busy the machine was; the process's
own CPU time (`time.process_time`) says what the push path spends. This
pushes `--jobs` envelopes built beforehand, one `push` call each, awaited
in turn (the way a web handler enqueues), and prints the CPU microseconds
per push of the calling process, the median of `--rounds` rounds. With
`--profile` it runs one more round under cProfile and prints the top
functions by own time.

    .venv/bin/python -m bench.studies.push_cost --url 'redis://127.0.0.1:6379/0?prefix=push_cost:'
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import statistics
import time

import redis

from rainier_queue import QueuedJob
from rainier_queue.connections import open_queue
from rainier_queue.queue import Queue


async def one_round(queue: Queue, count: int) -> float:
    jobs = [QueuedJob.create("bench-noop", {"n": n}, max_attempts=1) for n in range(count)]
    await queue.clear("default")
    started = time.process_time()
    for job in jobs:
        await queue.push(job)
    return (time.process_time() - started) / count * 1e6


async def run(url: str, count: int, rounds: int, profile: bool) -> None:
    queue = open_queue(url)
    try:
        await one_round(queue, 1000)  # connect, load scripts
        costs = [await one_round(queue, count) for _ in range(rounds)]
        print(f"push: {statistics.median(costs):.1f} us CPU per call (rounds: {costs})")
        if profile:
            profiler = cProfile.Profile(time.process_time)
            profiler.enable()
            await one_round(queue, count)
            profiler.disable()
            pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
        await queue.clear("default")
    finally:
        await queue.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--url", default="redis://127.0.0.1:6379/0?prefix=push_cost:")
    args = parser.parse_args()
    try:
        import uvloop

        uvloop.run(run(args.url, args.jobs, args.rounds, args.profile))
    except ImportError:
        asyncio.run(run(args.url, args.jobs, args.rounds, args.profile))
    prefix = args.url.split("prefix=", 1)[1].split("&", 1)[0]
    client = redis.Redis.from_url(args.url.split("?", 1)[0])
    keys = list(client.scan_iter(match=f"{prefix}*", count=1000))
    if keys:
        client.delete(*keys)


if __name__ == "__main__":
    main()
