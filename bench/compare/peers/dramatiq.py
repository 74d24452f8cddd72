# SPDX-License-Identifier: MIT
"""Dramatiq adapter: `RedisBroker`, `dramatiq <module> --processes P --threads C` CLI.

Dramatiq has one worker model, the one its documentation starts with:
worker processes, each with a pool of threads (`--processes`,
`--threads`), so short jobs get a GIL per process and jobs that block
get threads; there is no second mode to run. Its prefetch is its default
(twice the threads).

Dramatiq has no bulk enqueue: `actor.send` is called once per job.
"""

from __future__ import annotations

import os
import time

import dramatiq
from dramatiq.brokers.redis import RedisBroker

from ..latency_check import record
from ._common import REDIS_URL, TAG_ENV, Adapter, bin_of, main
from ._sync import delete_matching, incr_counter

NAMESPACE = f"rqcmp-dramatiq-{os.environ.get(TAG_ENV, 'none')}"

broker = RedisBroker(url=REDIS_URL, namespace=NAMESPACE)
dramatiq.set_broker(broker)


@dramatiq.actor(actor_name="compare_incr", max_retries=0)
def compare_incr(n: int) -> None:
    incr_counter()


@dramatiq.actor(actor_name="compare_latency", max_retries=0)
def compare_latency(seq: int, pushed_at: float) -> None:
    record(seq, pushed_at)


class DramatiqAdapter(Adapter):
    backend = "redis"

    def enqueue(self) -> float:
        started = time.perf_counter()
        for n in range(self.jobs):
            compare_incr.send(n)
        return time.perf_counter() - started

    def worker_commands(self) -> list[list[str]]:
        return [
            [
                bin_of("dramatiq"),
                "bench.compare.peers.dramatiq",
                "--processes",
                str(self.processes),
                "--threads",
                str(self.concurrency),
            ]
        ]

    def push_one(self, seq: int, pushed_at: float) -> None:
        compare_latency.send(seq, pushed_at)

    def teardown(self) -> None:
        delete_matching(f"{NAMESPACE}*")


if __name__ == "__main__":
    main(DramatiqAdapter)
