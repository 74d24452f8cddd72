# SPDX-License-Identifier: MIT
"""Dramatiq on RabbitMQ: `RabbitmqBroker` (pika), `dramatiq <module> --processes P --threads C`.

The worker as on Redis (`dramatiq.py`: processes x threads, its one
model). Dramatiq's RabbitMQ broker as it comes: durable classic queues (with its
own delay and dead-letter queues beside each), persistent messages, no
publisher confirms (its default). No bulk enqueue: `actor.send` per job.
"""

from __future__ import annotations

import os
import time

import dramatiq
from dramatiq.brokers.rabbitmq import RabbitmqBroker

from ..latency_check import record
from ._common import AMQP_URL, TAG_ENV, Adapter, bin_of, main
from ._sync import incr_counter
from .rabbitmq import delete_queues

QUEUE = f"rqcmp-dramatiq-{os.environ.get(TAG_ENV, 'none')}"

broker = RabbitmqBroker(url=AMQP_URL)
dramatiq.set_broker(broker)


@dramatiq.actor(actor_name="compare_incr", queue_name=QUEUE, max_retries=0)
def compare_incr(n: int) -> None:
    incr_counter()


@dramatiq.actor(actor_name="compare_latency", queue_name=QUEUE, max_retries=0)
def compare_latency(seq: int, pushed_at: float) -> None:
    record(seq, pushed_at)


class DramatiqRabbitMQAdapter(Adapter):
    backend = "rabbitmq"

    def enqueue(self) -> float:
        started = time.perf_counter()
        for n in range(self.jobs):
            compare_incr.send(n)
        return time.perf_counter() - started

    def worker_commands(self) -> list[list[str]]:
        return [
            [
                bin_of("dramatiq"),
                "bench.compare.peers.dramatiq_rabbitmq",
                "--processes",
                str(self.processes),
                "--threads",
                str(self.concurrency),
            ]
        ]

    def push_one(self, seq: int, pushed_at: float) -> None:
        compare_latency.send(seq, pushed_at)

    def teardown(self) -> None:
        broker.close()
        delete_queues([QUEUE, f"{QUEUE}.DQ", f"{QUEUE}.XQ"])


if __name__ == "__main__":
    main(DramatiqRabbitMQAdapter)
