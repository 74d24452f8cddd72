# SPDX-License-Identifier: MIT
"""Celery on SQS: kombu's SQS transport (boto3, pycurl), `celery worker --pool POOL` processes.

The pool is prefork or threads, both run (see `celery.py` for why).

Celery as its documentation tunes it for SQS, on the same moto endpoint as
ours (peers/sqs.py, its relay counting the requests): a predefined queue
(no `ListQueues`/`GetQueueUrl` on start), a 1 s long poll and no client
sleep between polls while messages come, each receive asking for as many as
the worker's threads (a prefetch multiplier of 1: with 10, messages held
past their visibility timeout ran twice on a loaded machine), and tasks
acknowledged after they run (`task_acks_late`, as our workers acknowledge
after a job). kombu deletes each message on its
own (SQS's `DeleteMessage`, no batch) and sends each task alone (no bulk
enqueue: `apply_async` once per job).
"""

from __future__ import annotations

import os
import time

from celery import Celery

from ..latency_check import record
from ._common import TAG_ENV, Adapter, bin_of, main, mode
from ._sync import incr_counter
from .sqs import ACCOUNT, KEY, REGION, Endpoint, create_queue

POOL = mode(("prefork", "threads"))
"""`--pool`: "prefork" (Celery's default and recommended pool) or "threads"."""
QUEUE = f"rqcmp-celery-{os.environ.get(TAG_ENV, 'none')}"
ENDPOINT_ENV = "RQCOMPARE_SQS_ENDPOINT"
"""The relay's port, handed from the adapter to its workers."""

app = Celery("rqcompare")


def configure(port: str) -> None:
    """Point the app at the relay on `port` (before its first connection)."""
    app.conf.update(
        broker_url=f"sqs://{KEY}:{KEY}@127.0.0.1:{port}",
        task_default_queue=QUEUE,
        task_ignore_result=True,
        task_acks_late=True,
        worker_prefetch_multiplier=1,  # receives of `concurrency` (see the module's doc)
        worker_hijack_root_logger=False,
        broker_connection_retry_on_startup=True,
        broker_transport_options={
            "region": REGION,
            "is_secure": False,
            "wait_time_seconds": 1,
            "polling_interval": 0,
            "visibility_timeout": 90,
            "predefined_queues": {
                QUEUE: {
                    "url": f"http://127.0.0.1:{port}/{ACCOUNT}/{QUEUE}",
                    "access_key_id": KEY,
                    "secret_access_key": KEY,
                }
            },
        },
    )


if ENDPOINT_ENV in os.environ:  # a worker: the adapter's relay
    configure(os.environ[ENDPOINT_ENV])


@app.task(name="compare_incr")
def compare_incr(n: int) -> None:
    incr_counter()


@app.task(name="compare_latency")
def compare_latency(seq: int, pushed_at: float) -> None:
    record(seq, pushed_at)


class CelerySQSAdapter(Adapter):
    backend = "sqs"
    endpoint: Endpoint | None = None
    counted: tuple[int, int] = (0, 0)

    def setup(self) -> None:
        self.endpoint = Endpoint()
        create_queue(self.endpoint, QUEUE)
        os.environ[ENDPOINT_ENV] = str(self.endpoint.port)  # the workers inherit it
        configure(str(self.endpoint.port))

    def enqueue(self) -> float:
        assert self.endpoint is not None
        before = self.endpoint.requests
        with app.producer_or_acquire() as producer:
            started = time.perf_counter()
            for n in range(self.jobs):
                compare_incr.apply_async((n,), producer=producer)
            took = time.perf_counter() - started
        self.counted = (before, self.endpoint.requests)
        return took

    def worker_commands(self) -> list[list[str]]:
        command = [
            bin_of("celery"),
            "-A",
            "bench.compare.peers.celery_sqs",
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

    def after_drain(self) -> dict[str, object]:
        assert self.endpoint is not None
        before, enqueued = self.counted
        now, jobs = self.endpoint.requests, self.jobs
        return {
            "sqs_requests_per_job_enqueue": round((enqueued - before) / jobs, 3),
            "sqs_requests_per_job_drain": round((now - enqueued) / jobs, 3),
            "sqs_requests_per_job": round((now - before) / jobs, 3),
        }

    def teardown(self) -> None:
        if self.endpoint is not None:
            self.endpoint.stop()


if __name__ == "__main__":
    main(CelerySQSAdapter)
