# SPDX-License-Identifier: MIT
"""Our adapter for bench.compare: push_many in batches of 1000, CLI workers, on every driver.

`--enqueue dispatch_many` enqueues through the public `QueueManager.dispatch_many`
with real `Job` objects instead, in the same batches: what an application
pays, building, checking and encoding each job included.

Run by the project's venv: `python -m bench.compare.ours --backend postgres ...`.
The backends are the drivers' URLs below. `memory://` lives inside one
process, so on that backend there is no separate enqueue: one process
(`bench.compare.ours_inproc`) pushes and works, and P is always 1. Kafka
needs a broker started for the run and a lock store beside it; its adapter
is `bench.compare.ours_kafka`, built on this one. A NATS queue is made by
provisioning (`rainier-queue provision` does the same), before the clock
starts: its stream and the queue's consumers; so is a RabbitMQ queue (its
work queue, one delay tier and the failed queue), and an SQS queue (its
queue and the failed queue), on a moto endpoint started for the run
(`peers/sqs.py`), whose relay counts the requests: the row reports SQS
requests per job, enqueue and drain together.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

from rainier_queue import Queue, QueuedJob, QueueManager
from rainier_queue.connections import open_queue
from rainier_queue.queue import Provisionable

from ..latency import cleanup
from .ours_jobs import Incr
from .peers._common import (
    AMQP_URL,
    ENQUEUE_ENV,
    MYSQL_DSN,
    NATS_URL,
    PG_DSN,
    REDIS_URL,
    Adapter,
    main,
    tag,
)

BATCH = 1000
BACKENDS = (
    "memory",
    "sqlite",
    "postgres",
    "mysql",
    "redis",
    "kafka",
    "nats",
    "rabbitmq",
    "sqs",
)


def sqlite_path() -> Path:
    return Path(tempfile.gettempdir()) / f"rqcmp_{tag()}.db"


def kafka_locks() -> str:
    """The Kafka row's shared lock store: this run's keys on the benchmark's Redis."""
    return f"{REDIS_URL}?prefix=rqcmp:{tag()}:"


def kafka_prefix() -> str:
    return f"rqcmp.{tag()}."


def sqs_url(endpoint: str) -> str:
    """The SQS row's URL: the run's moto endpoint (through the counting relay), a 1 s long poll
    so `--stop-when-empty` workers notice the end soon (a 20 s poll only delays their exit)."""
    host = endpoint.split("://", 1)[1]
    return f"sqs://testing:testing@{host}/?tls=false&region=us-east-1&prefix=rqcmp-{tag()}-&wait=1s"


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
    if backend == "nats":
        return f"{NATS_URL}/?prefix=rqcmp_{tag()}"
    if backend == "rabbitmq":  # one delay tier: two quorum queues, and the failed one
        return f"{AMQP_URL}?prefix=rqcmp_{tag()}.&delays=1s"
    if backend == "sqlite":
        return f"sqlite:///{sqlite_path()}"
    if backend == "memory":
        return "memory://"
    raise SystemExit(f"ours: no such backend {backend!r} (have {', '.join(BACKENDS)})")


class Ours(Adapter):
    endpoint: Any = None
    """The SQS row's moto endpoint (peers/sqs.py), started in `setup`."""
    counted: tuple[int, int] = (0, 0)

    def setup(self) -> None:
        if self.backend == "sqs":
            from .peers.sqs import Endpoint

            self.endpoint = Endpoint()

    def url(self) -> str:
        if self.backend == "sqs":
            return sqs_url(self.endpoint.url)
        return url_for(self.backend)

    def enqueue(self) -> float | None:
        if self.backend == "memory":
            return None
        return asyncio.run(self._enqueue())

    async def _enqueue(self) -> float:
        queue = open_queue(self.url())
        try:
            if isinstance(queue, Provisionable):
                await queue.provision(["default"])
            await queue.size("default")  # connect (and create tables) outside the timing
            if self.endpoint is not None:
                self.counted = (self.endpoint.requests, 0)
            way = os.environ.get(ENQUEUE_ENV)
            if way == "dispatch_many":
                return await self._dispatch_many(QueueManager(queue))
            if way == "push_many_built":
                return await self._push_many_built(queue)
            jobs = [QueuedJob.create(Incr.name, {"n": n}, max_attempts=1) for n in range(self.jobs)]
            started = time.perf_counter()
            for i in range(0, len(jobs), BATCH):
                await queue.push_many(jobs[i : i + BATCH])
            took = time.perf_counter() - started
            if self.endpoint is not None:
                self.counted = (self.counted[0], self.endpoint.requests)
            return took
        finally:
            await queue.aclose()

    async def _push_many_built(self, queue: Queue) -> float:
        """Build the envelopes and push them, all in the clock, as a caller of push_many does."""
        started = time.perf_counter()
        for i in range(0, self.jobs, BATCH):
            await queue.push_many(
                [
                    QueuedJob.create(Incr.name, {"n": n}, max_attempts=1)
                    for n in range(i, min(i + BATCH, self.jobs))
                ]
            )
        return time.perf_counter() - started

    async def _dispatch_many(self, manager: QueueManager) -> float:
        """Build the `Job`s and dispatch them, all inside the clock, as an application does."""
        started = time.perf_counter()
        for i in range(0, self.jobs, BATCH):
            await manager.dispatch_many([Incr(n=n) for n in range(i, min(i + BATCH, self.jobs))])
        return time.perf_counter() - started

    def after_drain(self) -> dict[str, Any]:
        """What an emptied queue leaves on disk: PostgreSQL's table and indexes, SQLite's files."""
        if self.backend == "postgres":
            return asyncio.run(_postgres_sizes(self.url()))
        if self.backend == "sqlite":
            files = [Path(f"{sqlite_path()}{suffix}") for suffix in ("", "-wal")]
            return {"file_bytes": sum(f.stat().st_size for f in files if f.exists())}
        if self.endpoint is not None:
            return sqs_requests(self.endpoint.requests, self.counted, self.jobs)
        return {}

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
        if self.endpoint is not None:
            self.endpoint.stop()  # its queues go with it
            return
        if self.backend == "sqlite":
            for suffix in ("", "-wal", "-shm"):
                with contextlib.suppress(FileNotFoundError):
                    Path(f"{sqlite_path()}{suffix}").unlink()
        elif self.backend != "memory":
            asyncio.run(cleanup(self.url()))


def sqs_requests(now: int, counted: tuple[int, int], jobs: int) -> dict[str, Any]:
    """SQS requests per job: of the enqueue, of the drain (workers' start and idle tail
    included, so above the steady state's), and of both."""
    before, enqueued = counted
    return {
        "sqs_requests_per_job_enqueue": round((enqueued - before) / jobs, 3),
        "sqs_requests_per_job_drain": round((now - enqueued) / jobs, 3),
        "sqs_requests_per_job": round((now - before) / jobs, 3),
    }


async def _postgres_sizes(url: str) -> dict[str, Any]:
    import psycopg

    base, _, _ = url.partition("?")
    jobs = f"rqcmp_{tag()}_jobs"
    async with await psycopg.AsyncConnection.connect(base, autocommit=True) as conn:
        cursor = await conn.execute(
            "SELECT pg_table_size(c.oid), pg_indexes_size(c.oid), "
            "coalesce(s.n_dead_tup, 0), coalesce(s.n_tup_hot_upd, 0), coalesce(s.n_tup_upd, 0) "
            "FROM pg_class c LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid "
            "WHERE c.oid = to_regclass(%s)",
            (jobs,),
        )
        row = await cursor.fetchone()
    if row is None:
        return {}
    table, indexes, dead, hot, updates = row
    return {
        "table_bytes": table,
        "index_bytes": indexes,
        "dead_rows": dead,
        "hot_update_share": round(hot / updates, 3) if updates else None,
    }


if __name__ == "__main__":
    main(Ours)
