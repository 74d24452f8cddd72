# SPDX-License-Identifier: MIT
"""Instructions the worker spends per job: a cost that a loaded machine cannot blur.

CPU time per job swings by 15% on a shared two-core machine, which is more
than most changes to the worker's hot path are worth. Instructions do not
swing: this runs an in-process worker over no-op jobs under
`valgrind --tool=callgrind` twice, once with the jobs worked and once with
them only enqueued (or, on SQLite, with an empty database), and divides the
difference by the number of jobs. Start-up, imports and enqueueing cancel
out; what is left is reserve, build, run, settle and the event loop around
them, everything the worker does per job, the driver's own work included
(on `memory://` that is a few list operations, so memory:// is the worker
alone and SQLite is the worker plus a real driver).

    .venv/bin/python -m bench.worker_instructions                  # memory:// and SQLite
    .venv/bin/python -m bench.worker_instructions --jobs 20000 --concurrency 8
    .venv/bin/python -m bench.worker_instructions --url postgresql://postgres@127.0.0.1/test \
        --url mysql://root@127.0.0.1/test --url kafka

A server URL, and `kafka` (a Tansu broker started for the run, as
`bench.worker_cpu` starts one), get an empty queue of their own per run
(`cpu_places.py`), removed at the end.

`--metrics` gives the worker the Prometheus instruments (`telemetry.metrics`,
the port observer and the job scope, as `work --metrics-port` does, less
the HTTP server, which costs nothing per job), for their cost per job.

`--encrypted` seals every payload with a key ring (the connection's
`encryption` option, docs/encryption.md), so the worker opens each one,
for what encryption costs per job on the worker's side.

`--profile` runs the same worker under cProfile instead (no valgrind) and
prints where the time goes by function, for attribution; its microseconds
are inflated by the profiler, so read them as shares, not costs.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import cProfile
import os
import pstats
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from rainier_queue import QueuedJob
from rainier_queue.connections import open_queue
from rainier_queue.queue import Queue
from rainier_queue.worker import Worker, WorkerOptions

from .cpu_places import Places, shown
from .noop_jobs import registry

KEY_RING = {"encryption": {"keys": {"k1": base64.urlsafe_b64encode(bytes(range(32))).decode()}}}
"""A fixed key: the runs are compared by instruction counts, and a random one changes none."""


def _open(url: str, encrypted: bool) -> Queue:
    return open_queue(url, KEY_RING if encrypted else None)


async def _enqueue(url: str, count: int, encrypted: bool = False) -> None:
    queue = _open(url, encrypted)
    try:
        await _push(queue, count)
    finally:
        await queue.aclose()


async def _push(queue: Queue, count: int) -> None:
    await queue.size("default")  # creates the tables where there are any
    jobs = [QueuedJob.create("bench-noop", {"n": n}, max_attempts=1) for n in range(count)]
    for i in range(0, count, 1000):
        await queue.push_many(jobs[i : i + 1000])


async def _work(
    url: str,
    jobs: int,
    concurrency: int,
    enqueue: bool,
    run: bool,
    expect: int | None = None,
    metrics: bool = False,
    encrypted: bool = False,
) -> None:
    """The measured process: enqueue in-process (memory://) if asked, then work if asked."""
    queue = _open(url, encrypted)
    try:
        if enqueue:
            await _push(queue, jobs)
        else:
            await queue.size("default")
        if run:
            options = WorkerOptions(concurrency=concurrency, stop_when_empty=True)
            instruments: dict[str, Any] = {}
            if metrics:
                from rainier_queue.telemetry.metrics import Metrics

                made = Metrics()
                instruments = {"observers": [made.observe], "job_scopes": [made.job_scope]}
            stats = await Worker(queue, registry, options, **instruments).run()
            expected = jobs if expect is None else expect
            if stats.processed != expected:
                raise SystemExit(f"worked {stats.processed} jobs, not {expected}")
    finally:
        await queue.aclose()


def _callgrind(args: list[str], folder: Path) -> int:
    """Instructions (Ir) one run of this module with `args` takes under callgrind."""
    out = folder / f"cg.{os.urandom(4).hex()}"
    command = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"]
    command += [sys.executable, "-m", "bench.worker_instructions", "--child", *args]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(f"the measured run failed:\n{done.stderr[-2000:]}")
    found = re.search(r"Collected\s*:\s*(\d+)", done.stderr)
    if found is None:
        raise SystemExit(f"no instruction count in callgrind's output:\n{done.stderr[-2000:]}")
    out.unlink(missing_ok=True)
    return int(found.group(1))


def per_job(
    url: str,
    jobs: int,
    concurrency: int,
    folder: Path,
    metrics: bool = False,
    encrypted: bool = False,
    places: Places | None = None,
) -> float:
    """Instructions the worker spends per job on `url` (`memory://`, `sqlite`, `kafka` or a
    server's URL, which `places` gives a fresh queue per run)."""
    common = ["--jobs", str(jobs), "--concurrency", str(concurrency)]
    common += ["--metrics"] if metrics else []
    common += ["--encrypted"] if encrypted else []
    if url == "sqlite":
        full = f"sqlite:///{folder / 'full.db'}"
        empty = f"sqlite:///{folder / 'empty.db'}"
        asyncio.run(_enqueue(full, jobs, encrypted))
        asyncio.run(_enqueue(empty, 0, encrypted))
        worked = _callgrind(["--url", full, "--run", *common], folder)
        base = _callgrind(["--url", empty, "--run", "--expect", "0", *common], folder)
        for name in ("full.db", "empty.db"):
            for suffix in ("", "-wal", "-shm"):
                (folder / f"{name}{suffix}").unlink(missing_ok=True)
    else:
        # Each run its own queue: the run that only enqueues leaves its jobs behind.
        worked_url = url if places is None else places.fresh(url)
        base_url = url if places is None else places.fresh(url)
        worked = _callgrind(["--url", worked_url, "--enqueue", "--run", *common], folder)
        base = _callgrind(["--url", base_url, "--enqueue", *common], folder)
    return (worked - base) / jobs


def _profile(
    url: str,
    jobs: int,
    concurrency: int,
    folder: Path,
    top: int,
    metrics: bool = False,
    places: Places | None = None,
) -> None:
    # memory:// lives in the profiled process, so its jobs are enqueued there (and the
    # profile counts that); any other queue is filled beforehand.
    enqueue = url.startswith("memory:")
    if url == "sqlite":
        url = f"sqlite:///{folder / 'profile.db'}"
    elif places is not None:
        url = places.fresh(url)
    if not enqueue:
        asyncio.run(_enqueue(url, jobs))
    profiler = cProfile.Profile()
    profiler.enable()
    asyncio.run(_work(url, jobs, concurrency, enqueue=enqueue, run=True, metrics=metrics))
    profiler.disable()
    stats = pstats.Stats(profiler)
    stats.sort_stats("tottime").print_stats(top)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", action="append")
    parser.add_argument("--jobs", type=int, default=20000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--metrics", action="store_true", help="with the Prometheus instruments")
    parser.add_argument("--encrypted", action="store_true", help="payloads sealed by a key ring")
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--enqueue", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--run", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--expect", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    urls = args.url or ["memory://", "sqlite"]
    if args.child:
        asyncio.run(
            _work(
                urls[0],
                args.jobs,
                args.concurrency,
                args.enqueue,
                args.run,
                args.expect,
                args.metrics,
                args.encrypted,
            )
        )
        return
    with tempfile.TemporaryDirectory() as tmp, Places(Path(tmp)) as places:
        for url in urls:
            if args.profile:
                _profile(
                    url, args.jobs, args.concurrency, Path(tmp), args.top, args.metrics, places
                )
                continue
            cost = per_job(
                url, args.jobs, args.concurrency, Path(tmp), args.metrics, args.encrypted, places
            )
            extras = ["with metrics"] * args.metrics + ["encrypted"] * args.encrypted
            print(
                f"{shown(url):<12} {cost:10,.0f} instructions per job "
                f"({args.jobs} no-op jobs, concurrency {args.concurrency}"
                + "".join(f", {extra}" for extra in extras)
                + ")",
                flush=True,
            )


if __name__ == "__main__":
    main()
