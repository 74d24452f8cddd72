# SPDX-License-Identifier: MIT
"""Worker CPU per job, before and after a change: the check that a refactor costs nothing.

A change that should not touch the hot path (a move, a new seam) is held to
that by measuring it, not by reading it. This enqueues the same no-op jobs
for each tree in turn, drains them with one CLI worker started from that
tree's `src/`, and takes the worker process's own CPU time (user + system,
from the operating system) per job, less what the same worker spends on an
empty queue (interpreter start, imports, connecting), so start-up is not
counted as per-job cost. Rounds alternate between the trees, so a machine
that slows down mid-run slows both; the medians are reported.

    .venv/bin/python -m bench.worker_cpu --before ../old-checkout --after . \\
        --url sqlite --url redis://127.0.0.1:6379/0 --jobs 5000 --rounds 5

Each tree must be a checkout of this repository (its `bench/noop_jobs.py`
is the worker's app). `--after-args` adds flags to the after tree's `work`
only, for the cost of a feature turned on (`--after-args "--metrics-port 0"`).
Every run gets an empty queue of its own (`cpu_places.py`): `--url sqlite` a
fresh temporary file, `--url kafka` a fresh topic of six partitions on a
Tansu broker started for the benchmark (leases and cursors on the local
Redis), a server URL a fresh prefix, whose tables or keys are removed at
the end.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from rainier_queue import QueuedJob
from rainier_queue.connections import open_queue

from .cpu_places import Places, shown


async def _enqueue(url: str, count: int) -> None:
    queue = open_queue(url)
    try:
        await queue.size("default")  # creates the tables where there are any
        jobs = [QueuedJob.create("bench-noop", {"n": n}, max_attempts=1) for n in range(count)]
        for i in range(0, count, 1000):
            await queue.push_many(jobs[i : i + 1000])
    finally:
        await queue.aclose()


def _drain_cpu(tree: Path, url: str, concurrency: int, extra: Sequence[str] = ()) -> float:
    """CPU seconds one CLI worker from `tree` spends draining `url`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAINIER_QUEUE_")}
    env["PYTHONPATH"] = str(tree / "src")
    command = [sys.executable, "-m", "rainier_queue", "--app", "bench.noop_jobs:registry"]
    command += ["--url", url, "work", "--stop-when-empty", "--concurrency", str(concurrency)]
    command += extra
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(
        command,
        cwd=tree,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=False,
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode:
        raise SystemExit(f"the worker from {tree} exited with {done.returncode}")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, required=True)
    parser.add_argument("--after", type=Path, required=True)
    parser.add_argument("--url", action="append", required=True)
    parser.add_argument("--jobs", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument(
        "--prefix", default="cpu", help="start of each round's table or key prefix on a server"
    )
    parser.add_argument(
        "--after-args", default="", help="flags for the after tree's `work` only, quoted as one"
    )
    args = parser.parse_args()
    trees = {"before": args.before.resolve(), "after": args.after.resolve()}
    extras = {"before": [], "after": shlex.split(args.after_args)}
    print(
        f"worker CPU per job (us), {args.jobs} no-op jobs, 1 worker, medians of {args.rounds}",
        flush=True,
    )
    with tempfile.TemporaryDirectory() as tmp, Places(Path(tmp), args.prefix) as places:
        for url in args.url:
            samples: dict[str, list[float]] = {name: [] for name in trees}
            for i in range(args.rounds):
                order = list(trees) if i % 2 == 0 else list(reversed(trees))
                for name in order:
                    idle = places.fresh(url)
                    asyncio.run(_enqueue(idle, 0))
                    start_up = _drain_cpu(trees[name], idle, args.concurrency, extras[name])
                    target = places.fresh(url)
                    asyncio.run(_enqueue(target, args.jobs))
                    cpu = _drain_cpu(trees[name], target, args.concurrency, extras[name])
                    cpu -= start_up
                    samples[name].append(cpu / args.jobs * 1e6)
            before, after = (statistics.median(samples[n]) for n in ("before", "after"))
            print(
                f"{shown(url):<32} before {before:7.1f}  after {after:7.1f}  "
                f"after/before {after / before:.3f}  (rounds: "
                + ", ".join(f"{b:.0f}/{a:.0f}" for b, a in zip(*samples.values(), strict=True))
                + ")",
                flush=True,
            )


if __name__ == "__main__":
    main()
