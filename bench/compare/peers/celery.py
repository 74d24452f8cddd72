# SPDX-License-Identifier: MIT
"""Celery adapter: Redis broker, P `celery worker --pool threads --concurrency C` processes.

Celery has no bulk enqueue: `apply_async` is called once per job, over one
producer. Results are ignored; gossip, mingle and heartbeats are off.
"""

from __future__ import annotations

import os
import time

from celery import Celery

from ..latency_check import record
from ._common import REDIS_URL, TAG_ENV, Adapter, bin_of, main
from ._sync import delete_matching, incr_counter

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
            "threads",
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
