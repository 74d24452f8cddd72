# SPDX-License-Identifier: MIT
"""Celery on RabbitMQ: the `amqp://` broker (py-amqp), `celery worker --pool POOL` processes.

The pool is prefork or threads, both run (see `celery.py` for why).

Celery as its users run it on RabbitMQ: a durable classic queue, persistent
messages, acknowledged after the task (`task_acks_late`, as our workers
acknowledge after a job), no publisher confirms (Celery's default). No bulk
enqueue: `apply_async` once per job, over one producer.
"""

from __future__ import annotations

import os
import time

from celery import Celery

from ..latency_check import record
from ._common import AMQP_URL, TAG_ENV, Adapter, bin_of, main, mode
from ._sync import incr_counter
from .rabbitmq import delete_queues

POOL = mode(("prefork", "threads"))
"""`--pool`: "prefork" (Celery's default and recommended pool) or "threads"."""
QUEUE = f"rqcmp-celery-{os.environ.get(TAG_ENV, 'none')}"

app = Celery("rqcompare", broker=AMQP_URL)
app.conf.update(
    task_default_queue=QUEUE,
    task_ignore_result=True,
    task_acks_late=True,
    worker_prefetch_multiplier=1,
    worker_hijack_root_logger=False,
    broker_connection_retry_on_startup=True,
)


@app.task(name="compare_incr")
def compare_incr(n: int) -> None:
    incr_counter()


@app.task(name="compare_latency")
def compare_latency(seq: int, pushed_at: float) -> None:
    record(seq, pushed_at)


class CeleryRabbitMQAdapter(Adapter):
    backend = "rabbitmq"

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
            "bench.compare.peers.celery_rabbitmq",
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
        delete_queues([QUEUE])


if __name__ == "__main__":
    main(CeleryRabbitMQAdapter)
