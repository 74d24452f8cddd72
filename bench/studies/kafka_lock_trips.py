# SPDX-License-Identifier: MIT
"""Lock-store operations per job on Kafka: the count that sets a partition's pace.

A Kafka partition hands out one job at a time, and each hand-out and each
settle is a compare-and-set on the partition's cursor in the lock store,
so a partition drains at about 1 / (round trips per job x round-trip
time). The round-trip time stretches with the machine's load and is not
ours to set; the round trips per job are. This counts them, robustly to
load, while worker processes drain no-op jobs:

- starts a Tansu broker (bench.compare.tansu), creates a topic of
  `--partitions` partitions and its failed topic, pushes `--jobs` jobs;
- runs `--processes` worker processes (this module with `--worker`), each an
  in-process `Worker` over a `KafkaQueue` whose lock store (Redis, under a
  key prefix of the run's own, deleted afterwards) is wrapped in a counter:
  every call of the store is one request to Redis, so calls are round trips;
  and a call made while none other of the process is on its way starts a
  *wave*: waves are the round trips a worker waits for one after another,
  the ones that set the pace (calls side by side share one wait);
- prints, per run: jobs, lock-store calls per job (cursor writes, lease and
  seat calls apart), waves per job, the workers' CPU milliseconds per job, and the drain
  rate. The rate is wall-clock and moves with the machine's load; the calls
  per job do not.

    .venv/bin/python -m bench.studies.kafka_lock_trips --jobs 3000 --runs 3

To compare with another checkout, put its `src` first on PYTHONPATH.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import secrets
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from urllib.parse import quote

from rainier_queue import QueuedJob, Worker, WorkerOptions
from rainier_queue.cache.stores import open_cache
from rainier_queue.drivers.kafka import KafkaQueue
from rainier_queue.drivers.kafka.names import failed_topic_name, topic_name
from rainier_queue.drivers.kafka.settings import read_settings
from rainier_queue.locks import Cache, LockManager

from ..compare.tansu import Tansu
from ..latency import cleanup
from ..noop_jobs import registry

ROOT = Path(__file__).resolve().parents[2]
REDIS = "redis://127.0.0.1:6379/0"


class CountingStore(Cache):
    """Another store's calls, counted by method and by kind of key (the part before `:`)."""

    def __init__(self, inner: Cache) -> None:
        self.inner = inner
        self.name = inner.name
        self.calls: Counter[str] = Counter()
        self.waves = 0
        """Calls made while none was on its way: round trips one after another."""
        self._on_the_way = 0

    def _count(self, method: str, key: str) -> None:
        kind = key.split(":", 1)[0]
        self.calls[f"{method} {kind}"] += 1

    @contextlib.contextmanager
    def _trip(self, method: str, key: str) -> Iterator[None]:
        self._count(method, key)
        if not self._on_the_way:
            self.waves += 1
        self._on_the_way += 1
        try:
            yield
        finally:
            self._on_the_way -= 1

    @property
    def is_shared(self) -> bool:
        return self.inner.is_shared

    async def get(self, key: str) -> bytes | None:
        with self._trip("get", key):
            return await self.inner.get(key)

    async def put(self, key: str, value: bytes, ttl: timedelta | None = None) -> None:
        with self._trip("put", key):
            await self.inner.put(key, value, ttl)

    async def add(self, key: str, value: bytes, ttl: timedelta | None = None) -> bool:
        with self._trip("add", key):
            return await self.inner.add(key, value, ttl)

    async def replace_if(
        self, key: str, expected: bytes, value: bytes, ttl: timedelta | None = None
    ) -> bool:
        with self._trip("replace_if", key):
            return await self.inner.replace_if(key, expected, value, ttl)

    async def forget(self, key: str) -> bool:
        with self._trip("forget", key):
            return await self.inner.forget(key)

    async def forget_if(self, key: str, expected: bytes) -> bool:
        with self._trip("forget_if", key):
            return await self.inner.forget_if(key, expected)

    async def increment(self, key: str, by: int = 1, ttl: timedelta | None = None) -> int:
        with self._trip("increment", key):
            return await self.inner.increment(key, by, ttl)

    async def aclose(self) -> None:
        await self.inner.aclose()


async def work(url: str, concurrency: int) -> None:
    """One worker process: drain until empty, then print what it counted as JSON."""
    settings, locks_url = read_settings(url, {})
    store = CountingStore(open_cache(locks_url))
    queue = KafkaQueue(settings, LockManager(store), owns_cache=True)
    worker = Worker(queue, registry, WorkerOptions(concurrency=concurrency, stop_when_empty=True))
    cpu = time.process_time()
    try:
        stats = await worker.run()
    finally:
        await queue.aclose()
    out = {
        "processed": stats.processed,
        "cpu": time.process_time() - cpu,
        "calls": dict(store.calls),
        "waves": store.waves,
    }
    print(json.dumps(out))


async def push(url: str, count: int) -> None:
    from rainier_queue.connections import open_queue

    queue = open_queue(url)
    try:
        jobs = [QueuedJob.create("bench-noop", {"n": n}, max_attempts=1) for n in range(count)]
        for start in range(0, count, 1000):
            await queue.push_many(jobs[start : start + 1000])
    finally:
        await queue.aclose()


def one_run(args: argparse.Namespace) -> dict[str, float]:
    tag = secrets.token_hex(4)
    prefix = f"rqkt.{tag}."
    locks = f"{REDIS}?prefix=rqkt:{tag}:"
    broker = Tansu.start()
    try:
        topic = topic_name(prefix, "default")
        broker.create_topics({topic: args.partitions, failed_topic_name(prefix, "default"): 1})
        url = (
            f"kafka://{broker.bootstrap}/?locks={quote(locks, safe='')}"
            f"&topic_prefix={prefix}&batch_bytes=1"
        )
        asyncio.run(push(url, args.jobs))
        command = [sys.executable, "-m", "bench.studies.kafka_lock_trips", "--worker", url]
        command += ["--concurrency", str(args.concurrency)]
        started = time.perf_counter()
        procs = [
            subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, env=dict(os.environ))
            for _ in range(args.processes)
        ]
        outputs = [p.communicate()[0] for p in procs]
        elapsed = time.perf_counter() - started
        if any(p.returncode for p in procs):
            raise SystemExit(f"a worker failed: {[p.returncode for p in procs]}")
    finally:
        broker.stop()
        asyncio.run(cleanup(locks))
    results = [json.loads(o.decode().strip().splitlines()[-1]) for o in outputs]
    processed = sum(r["processed"] for r in results)
    calls: Counter[str] = Counter()
    for r in results:
        calls.update(r["calls"])
    cursor = sum(n for k, n in calls.items() if k.endswith("kafka-cursor"))
    total = calls.total()
    return {
        "jobs": processed,
        "calls_per_job": total / processed,
        "cursor_per_job": cursor / processed,
        "other_per_job": (total - cursor) / processed,
        "waves_per_job": sum(r["waves"] for r in results) / processed,
        "cpu_ms_per_job": 1000 * sum(r["cpu"] for r in results) / processed,
        "rate": processed / elapsed,
        "detail": dict(calls.most_common()),  # type: ignore[dict-item]
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worker", metavar="URL", help=argparse.SUPPRESS)
    parser.add_argument("--jobs", type=int, default=3000, help="[%(default)s]")
    parser.add_argument("--partitions", type=int, default=6, help="[%(default)s]")
    parser.add_argument("--processes", type=int, default=2, help="[%(default)s]")
    parser.add_argument("--concurrency", type=int, default=8, help="[%(default)s]")
    parser.add_argument("--runs", type=int, default=3, help="[%(default)s]")
    parser.add_argument("--detail", action="store_true", help="print the calls by kind")
    args = parser.parse_args()
    if args.worker:
        asyncio.run(work(args.worker, args.concurrency))
        return
    for _ in range(args.runs):
        row = one_run(args)
        detail = row.pop("detail")
        print(json.dumps({k: round(v, 3) for k, v in row.items()}), flush=True)
        if args.detail:
            print("   ", detail, flush=True)


if __name__ == "__main__":
    main()
