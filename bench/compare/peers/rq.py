# SPDX-License-Identifier: MIT
"""RQ adapter: `Queue.enqueue_many` (its bulk API), P `rq worker --burst` processes.

An RQ worker runs one job at a time, so there is no concurrency C: P workers
run P jobs at once. They use `SimpleWorker` (no fork per job): RQ's notes
on performance measure it several times faster than the default worker,
which forks for each job, and advise it for very short, trusted jobs, which
these are.
"""

from __future__ import annotations

import os
import time

import redis
from rq import Queue

from ..latency_check import record
from ._common import REDIS_URL, TAG_ENV, Adapter, bin_of, main
from ._sync import delete_matching, incr_counter

BATCH = 1000
NAME = f"rqcmp-rq-{os.environ.get(TAG_ENV, 'none')}"


def compare_incr(n: int) -> None:
    incr_counter()


def compare_latency(seq: int, pushed_at: float) -> None:
    record(seq, pushed_at)


class RqAdapter(Adapter):
    backend = "redis"

    def enqueue(self) -> float:
        connection = redis.Redis.from_url(REDIS_URL)
        queue = Queue(NAME, connection=connection)
        started = time.perf_counter()
        self.ids: list[str] = []
        for i in range(0, self.jobs, BATCH):
            chunk = range(i, min(self.jobs, i + BATCH))
            with connection.pipeline() as pipe:
                jobs = queue.enqueue_many(
                    [Queue.prepare_data(compare_incr, (n,), result_ttl=0) for n in chunk],
                    pipeline=pipe,
                )
                pipe.execute()
            self.ids.extend(job.id for job in jobs)
        elapsed = time.perf_counter() - started
        connection.close()
        return elapsed

    def worker_commands(self) -> list[list[str]]:
        command = [
            bin_of("rq"),
            "worker",
            *(["--burst"] if self.workload != "latency" else []),
            "--quiet",
            "--url",
            REDIS_URL,
            "--worker-class",
            "rq.worker.SimpleWorker",
            NAME,
        ]
        return [command] * self.processes

    def push_one(self, seq: int, pushed_at: float) -> None:
        if not hasattr(self, "queue"):
            self.connection = redis.Redis.from_url(REDIS_URL)
            self.queue = Queue(NAME, connection=self.connection)
        job = self.queue.enqueue(compare_latency, seq, pushed_at, result_ttl=0)
        self.ids = [*getattr(self, "ids", []), job.id]

    def close(self) -> None:
        if hasattr(self, "connection"):
            self.connection.close()

    def teardown(self) -> None:
        delete_matching(f"*{NAME}*")
        client = redis.Redis.from_url(REDIS_URL)
        client.srem("rq:queues", f"rq:queue:{NAME}")
        ids = getattr(self, "ids", [])
        for i in range(0, len(ids), 1000):
            chunk = ids[i : i + 1000]
            client.delete(*(f"rq:job:{j}" for j in chunk), *(f"rq:results:{j}" for j in chunk))
        client.close()


if __name__ == "__main__":
    main(RqAdapter)
