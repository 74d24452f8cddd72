# SPDX-License-Identifier: MIT
"""Our adapter for bench.compare: push_many in batches of 1000, CLI workers, on every driver.

Run by the project's venv: `python -m bench.compare.ours --backend postgres ...`.
The backends are the drivers' URLs below. `memory://` lives inside one
process, so on that backend there is no separate enqueue: one process
(`bench.compare.ours_inproc`) pushes and works, and P is always 1. Kafka
needs a broker started for the run and a lock store beside it; its adapter
is `bench.compare.ours_kafka`, built on this one.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import quote

from rainier_queue import QueuedJob
from rainier_queue.connections import open_queue

from ..latency import cleanup
from .ours_jobs import Incr
from .peers._common import MYSQL_DSN, PG_DSN, REDIS_URL, Adapter, main, tag

BATCH = 1000
BACKENDS = ("memory", "sqlite", "postgres", "mysql", "redis", "kafka")


def sqlite_path() -> Path:
    return Path(tempfile.gettempdir()) / f"rqcmp_{tag()}.db"


def kafka_locks() -> str:
    """The Kafka row's shared lock store: this run's keys on the benchmark's Redis."""
    return f"{REDIS_URL}?prefix=rqcmp:{tag()}:"


def kafka_prefix() -> str:
    return f"rqcmp.{tag()}."


def url_for(backend: str, *, brokers: str | None = None) -> str:
    """The queue URL for one backend, with this run's table prefix, key prefix or file.

    Kafka also needs the address of the broker started for the run.
    """
    if backend == "kafka":
        if brokers is None:
            raise SystemExit("ours: the kafka backend needs a broker (bench.compare.ours_kafka)")
        locks = quote(kafka_locks(), safe="")
        return f"kafka://{brokers}/?locks={locks}&topic_prefix={kafka_prefix()}"
    if backend == "postgres":
        return f"{PG_DSN}?prefix=rqcmp_{tag()}_"
    if backend == "mysql":
        return f"{MYSQL_DSN}?prefix=rqcmp_{tag()}_"
    if backend == "redis":
        return f"{REDIS_URL}?prefix=rqcmp:{tag()}:"
    if backend == "sqlite":
        return f"sqlite:///{sqlite_path()}"
    if backend == "memory":
        return "memory://"
    raise SystemExit(f"ours: no such backend {backend!r} (have {', '.join(BACKENDS)})")


class Ours(Adapter):
    def url(self) -> str:
        return url_for(self.backend)

    def enqueue(self) -> float | None:
        if self.backend == "memory":
            return None
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
        if self.backend == "memory":
            command = [
                *(sys.executable, "-m", "bench.compare.ours_inproc"),
                *("--jobs", str(self.jobs), "--concurrency", str(self.concurrency)),
            ]
            return [[*command, "--feed"] if self.workload == "memory" else command]
        command = [
            *(sys.executable, "-m", "rainier_queue", "--app", "bench.compare.ours_jobs:registry"),
            *("--url", self.url(), "--quiet", "work"),
            *("--stop-when-empty", "--concurrency", str(self.concurrency)),
        ]
        return [command] * self.processes

    def teardown(self) -> None:
        if self.backend == "sqlite":
            for suffix in ("", "-wal", "-shm"):
                with contextlib.suppress(FileNotFoundError):
                    Path(f"{sqlite_path()}{suffix}").unlink()
        elif self.backend != "memory":
            asyncio.run(cleanup(self.url()))


if __name__ == "__main__":
    main(Ours)
