# SPDX-License-Identifier: MIT
"""A first benchmark: bulk enqueue N no-op jobs, then drain them with P worker processes.

Prints enqueue jobs/s and end-to-end jobs/s for the memory driver (one
process, in-process worker) and SQLite (P processes through the CLI).
The full side-by-side comparison with peer libraries is a separate tool;
this one answers "how fast is the embedded default here, now".

    .venv/bin/python -m bench.drain --jobs 20000 --processes 2 --concurrency 16
    .venv/bin/python -m bench.drain --url 'postgresql://postgres@127.0.0.1/test?prefix=bench_'

`--url` drains through that queue instead of a temporary SQLite file; it
should be empty to start with.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rainier_queue import QueuedJob, Worker, WorkerOptions
from rainier_queue.connections import open_queue

from .noop_jobs import registry

ROOT = Path(__file__).resolve().parents[1]


def envelopes(count: int) -> list[QueuedJob]:
    return [QueuedJob.create("bench-noop", {"n": n}, max_attempts=1) for n in range(count)]


async def enqueue(url: str, jobs: list[QueuedJob], batch: int = 1000) -> float:
    queue = open_queue(url)
    try:
        await queue.size("default")
        started = time.perf_counter()
        for i in range(0, len(jobs), batch):
            await queue.push_many(jobs[i : i + batch])
        return time.perf_counter() - started
    finally:
        await queue.aclose()


async def memory_run(count: int, concurrency: int) -> tuple[float, float]:
    queue = open_queue("memory://")
    jobs = envelopes(count)
    started = time.perf_counter()
    for i in range(0, count, 1000):
        await queue.push_many(jobs[i : i + 1000])
    pushed = time.perf_counter() - started
    worker = Worker(queue, registry, WorkerOptions(concurrency=concurrency, stop_when_empty=True))
    started = time.perf_counter()
    stats = await worker.run()
    drained = time.perf_counter() - started
    assert stats.processed == count, stats
    return pushed, drained


def cli_drain(url: str, processes: int, concurrency: int) -> float:
    command = [
        sys.executable,
        "-m",
        "rainier_queue",
        "--app",
        "bench.noop_jobs:registry",
        "--url",
        url,
        "work",
        "--stop-when-empty",
        "--concurrency",
        str(concurrency),
    ]
    started = time.perf_counter()
    procs = [
        subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL) for _ in range(processes)
    ]
    codes = [p.wait() for p in procs]
    elapsed = time.perf_counter() - started
    if any(codes):
        raise SystemExit(f"a worker exited with {codes}")
    return elapsed


async def sqlite_run(count: int, processes: int, concurrency: int) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as tmp:
        return await url_run(f"sqlite:///{Path(tmp) / 'bench.db'}", count, processes, concurrency)


async def url_run(url: str, count: int, processes: int, concurrency: int) -> tuple[float, float]:
    """Enqueue `count` jobs on `url`, then drain them with `processes` CLI workers."""
    pushed = await enqueue(url, envelopes(count))
    drained = await asyncio.to_thread(cli_drain, url, processes, concurrency)
    queue = open_queue(url)
    try:
        left = await queue.size("default")
    finally:
        await queue.aclose()
    if left:
        raise SystemExit(f"{left} jobs were left behind")
    return pushed, drained


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--url", help="drain through this queue instead of a temporary SQLite file")
    args = parser.parse_args()
    rows = [("memory (1 process)", *asyncio.run(memory_run(args.jobs, args.concurrency)))]
    if args.url:
        scheme = args.url.split(":", 1)[0]
        run = url_run(args.url, args.jobs, args.processes, args.concurrency)
    else:
        scheme = "sqlite"
        run = sqlite_run(args.jobs, args.processes, args.concurrency)
    rows.append((f"{scheme} ({args.processes} processes)", *asyncio.run(run)))
    print(f"{args.jobs} no-op jobs, concurrency {args.concurrency}")
    print(f"{'driver':<24}{'enqueue jobs/s':>16}{'end-to-end jobs/s':>20}")
    for name, pushed, drained in rows:
        print(f"{name:<24}{args.jobs / pushed:>16,.0f}{args.jobs / drained:>20,.0f}")


if __name__ == "__main__":
    main()
