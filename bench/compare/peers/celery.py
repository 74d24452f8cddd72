# SPDX-License-Identifier: MIT
"""Celery adapter: Redis broker, P `celery worker --pool POOL --concurrency C` processes.

Celery's documentation recommends its default pool, prefork (C forked
child processes per worker), for most uses and for CPU-bound tasks, and
names greenlet pools (gevent, eventlet) for I/O-bound ones; a thread pool
is the other choice it lists. Both prefork and threads run here
(`bench/compare/modes.py`: "celery/prefork" and "celery/threads", the
pool from `MODE_ENV`), and ours is compared with the faster of the two:
processes for short jobs that spend their time in Python, threads where
jobs block on I/O and the GIL is free. The same holds for Celery on
RabbitMQ and on SQS (`celery_rabbitmq.py`, `celery_sqs.py`). gevent is not
installed in the peers' venv, so the greenlet pools are not run.

Celery has no bulk enqueue: `apply_async` is called once per job, over one
producer. Results are ignored; gossip, mingle and heartbeats are off; the
prefetch multiplier is Celery's default (4 messages per pool slot).
"""

from __future__ import annotations

import os
import time

from celery import Celery

from ..latency_check import record
from ._common import REDIS_URL, TAG_ENV, Adapter, bin_of, main, mode
from ._sync import delete_matching, incr_counter

POOL = mode(("prefork", "threads"))
"""`--pool`: "prefork" (Celery's default and recommended pool) or "threads"."""
QUEUE = f"rqcmp-celery-{os.environ.get(TAG_ENV, 'none')}"

app = Celery("rqcompare", broker=REDIS_URL)
app.conf.update(
    task_default_queue=QUEUE,
    task_ignore_result=True,
    worker_hijack_root_logger=False,
    broker_connection_retry_on_startup=True,
)


@app.task(name="compare_incr")
def compare_incr(n: int) -> None:
    incr_counter()


@app.task(name="compare_latency")
def compare_latency(seq: int, pushed_at: float) -> None:
    record(seq, pushed_at)


class CeleryAdapter(Adapter):
    backend = "redis"

    def enqueue(self) -> float:
        with app.producer_or_acquire() as producer:
            started = time.perf_counter()
            for n in range(self.jobs):
                compare_incr.apply_async((n,), producer=producer)
            return time.perf_counter() - started

    def worker_commands(self) -> list[list[str]]:
        command = [
            bin_of("celery"),
            "-A",
            "bench.compare.peers.celery",
            "worker",
            "--pool",
            POOL,
            "--concurrency",
            str(self.concurrency),
            "--queues",
            QUEUE,
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
            "--loglevel",
            "WARNING",
        ]
        return [[*command, "--hostname", f"w{i}@%h"] for i in range(self.processes)]

    def push_one(self, seq: int, pushed_at: float) -> None:
        compare_latency.apply_async((seq, pushed_at))

    def teardown(self) -> None:
        delete_matching(f"*{QUEUE}*")


if __name__ == "__main__":
    main(CeleryAdapter)
