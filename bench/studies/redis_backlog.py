# SPDX-License-Identifier: MIT
"""Why a Redis drain slows down as it goes: CPU and commands per job, first tenth against last.

A drain's wall-clock rate on a shared two-core machine moves with whatever
else runs there; the CPU each job costs does not. This pushes `--jobs`
no-op jobs, drains them with `--processes` CLI workers, and a few times a
second reads how many are done (entries left in the stream), the Redis
server's CPU time (`INFO cpu`), its per-command counters (`INFO
commandstats`, which count the commands scripts call too) and the workers'
CPU time (/proc). Between 1% and 11% done and between 89% and 99% it prints
server and worker CPU per job and, per command, calls per job and
microseconds per call: a command whose cost per call grows over the drain is
one that depends on the backlog.

    .venv/bin/python -m bench.studies.redis_backlog --jobs 200000
    .venv/bin/python -m bench.studies.redis_backlog --url 'redis://127.0.0.1:6390/0?prefix=mine:'

Run it against a Redis of its own (`--url` to another port) to keep other
clients' commands out of the server-wide counters.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import threading
import time
from pathlib import Path
from typing import Any

import redis

from rainier_queue.connections import open_queue

from ..drain import enqueue, envelopes
from ..noop_jobs import start_drainers

TICK = os.sysconf("SC_CLK_TCK")
Sample = tuple[float, int, float, float, dict[str, tuple[int, float]], float]


def _proc_cpu(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / TICK


def _run_queue_wait(pid: int) -> float:
    """Seconds the process spent runnable but waiting for a core (/proc/PID/schedstat)."""
    try:
        return int(Path(f"/proc/{pid}/schedstat").read_text().split()[1]) / 1e9
    except OSError:
        return float("nan")


def _server(client: redis.Redis) -> tuple[float, dict[str, tuple[int, float]]]:
    cpu = client.info("cpu")
    stats = client.info("commandstats")
    commands = {
        name.removeprefix("cmdstat_"): (int(v["calls"]), float(v["usec"]))
        for name, v in stats.items()
    }
    return float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"]), commands


def drain(
    url: str, stream: str, count: int, processes: int, concurrency: int, every: float
) -> list[Sample]:
    client = redis.Redis.from_url(url.split("?", 1)[0])
    procs = start_drainers(url, concurrency, processes)
    samples: list[Sample] = []
    stop = threading.Event()

    def sample() -> None:
        while True:
            last = stop.is_set()  # one more look once the workers are gone
            left = int(client.xlen(stream))
            server_cpu, commands = _server(client)
            workers = sum(_proc_cpu(p.pid) for p in procs)
            waited = sum(_run_queue_wait(p.pid) for p in procs)
            samples.append(
                (time.perf_counter(), count - left, server_cpu, workers, commands, waited)
            )
            if last:
                return
            stop.wait(every)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    codes = [p.wait() for p in procs]
    stop.set()
    sampler.join()
    if any(codes):
        raise SystemExit(f"a worker exited with {codes}")
    return samples


def window(samples: list[Sample], count: int, low: float, high: float) -> dict[str, Any]:
    a = next(s for s in samples if s[1] >= low * count)
    b = next(s for s in samples if s[1] >= high * count)
    jobs = b[1] - a[1]
    per_command = {}
    for name, (calls, usec) in b[4].items():
        calls0, usec0 = a[4].get(name, (0, 0.0))
        if calls > calls0:
            per_command[name] = ((calls - calls0) / jobs, (usec - usec0) / (calls - calls0))
    return {
        "rate": jobs / (b[0] - a[0]),
        "server_us": (b[2] - a[2]) / jobs * 1e6,
        "worker_us": (b[3] - a[3]) / jobs * 1e6,
        "wait_us": (b[5] - a[5]) / jobs * 1e6,
        "commands": per_command,
    }


def report(first: dict[str, Any], last: dict[str, Any]) -> None:
    print(f"{'':24}{'first tenth':>16}{'last tenth':>16}")
    print(f"{'jobs/s (noisy)':24}{first['rate']:>16,.0f}{last['rate']:>16,.0f}")
    print(f"{'server CPU us/job':24}{first['server_us']:>16.1f}{last['server_us']:>16.1f}")
    print(f"{'workers CPU us/job':24}{first['worker_us']:>16.1f}{last['worker_us']:>16.1f}")
    print(f"{'workers runq wait us/job':24}{first['wait_us']:>16.1f}{last['wait_us']:>16.1f}")
    print(f"{'command':24}{'calls/job  us/call':>16}{'calls/job  us/call':>20}")
    names = sorted(set(first["commands"]) | set(last["commands"]))
    for name in names:
        f = first["commands"].get(name, (0.0, 0.0))
        la = last["commands"].get(name, (0.0, 0.0))
        print(f"{name:24}{f[0]:>8.3f}{f[1]:>8.2f}{la[0]:>12.3f}{la[1]:>8.2f}")


async def fill(url: str, count: int) -> None:
    await enqueue(url, envelopes(count))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=200_000)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--every", type=float, default=0.25, help="seconds between looks")
    parser.add_argument("--url", default="redis://127.0.0.1:6379/0?prefix=redis_backlog:")
    args = parser.parse_args()
    prefix = args.url.split("prefix=", 1)[1].split("&", 1)[0]
    stream = f"{prefix}{{default}}:stream"
    started = time.perf_counter()
    asyncio.run(fill(args.url, args.jobs))
    print(f"pushed {args.jobs:,} in {time.perf_counter() - started:.1f} s")
    samples = drain(args.url, stream, args.jobs, args.processes, args.concurrency, args.every)

    async def left() -> int:
        queue = open_queue(args.url)
        try:
            return await queue.size("default")
        finally:
            await queue.aclose()

    remaining = asyncio.run(left())
    if remaining:
        raise SystemExit(f"{remaining} jobs were left behind")
    report(window(samples, args.jobs, 0.01, 0.11), window(samples, args.jobs, 0.89, 0.99))
    print("by tenth, CPU us/job (server, workers):")
    for tenth in range(10):
        w = window(samples, args.jobs, tenth / 10 + 0.001, (tenth + 1) / 10 - 0.001)
        print(f"  {tenth * 10:>3}-{tenth * 10 + 10}%: {w['server_us']:6.1f} {w['worker_us']:6.1f}")
    client = redis.Redis.from_url(args.url.split("?", 1)[0])
    keys = list(client.scan_iter(match=f"{prefix}*", count=1000))
    print("keys left:", {k.decode(): client.type(k).decode() for k in keys})
    if keys:
        client.delete(*keys)


if __name__ == "__main__":
    main()
