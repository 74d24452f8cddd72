# SPDX-License-Identifier: MIT
"""taskiq adapter on NATS: taskiq-nats's `PullBasedJetStreamBroker`, `taskiq worker` CLI.

The same server as ours (127.0.0.1:4222, file storage), a stream, subject
and durable consumer of the run's own. Why this broker, of the three
taskiq-nats has:

- `NatsBroker` is core NATS, which stores nothing: the jobs enqueued before
  the workers start would be dropped, and a job whose worker dies is lost.
  Not a job queue in the sense of this comparison.
- `PushBasedJetStreamBroker` subscribes in every process that starts the
  broker, the enqueuing one too, which would then be handed jobs it never
  runs or acknowledges (each comes back only after the 30 s ack wait).
- `PullBasedJetStreamBroker` is the one left, and its documented knob for
  speed is `pull_consume_batch` (1 by default: one fetch round trip per
  job). Measured here at the default workload (5,000 jobs, 2 processes x 8):
  batch 1 drained 650 jobs/s; 8, 32 and 100 drained 1,400 to 1,600, within
  the machine's noise of each other, 8 ahead in both trials; 1000 ran
  jobs twice (fetched messages waited out their 30 s ack wait behind the
  8 running tasks, and came back). So `BATCH_FETCH` is 8, a fetch per free
  task, except in the latency workload: there, with an idle worker, fetches
  of 8 started a few jobs twice (4 of 300, a FAILED run), which the default
  fetch of 1 does not, so that workload runs taskiq-nats's default. The
  stream keeps the broker's default configuration (limits retention: an
  acknowledged message is not deleted, which spares the server the delete
  that ours, a work-queue stream, pays for each job).

taskiq has no bulk enqueue: `.kiq()` is awaited concurrently, 1000 at a time
(each a JetStream publish that waits for the server's acknowledgement, as
ours does). Messages are acknowledged when the task's result is saved
(taskiq's default `when_saved`; there is no result backend, so right after
the task ran).
"""

from __future__ import annotations

import asyncio
import os
import time

from taskiq_nats import PullBasedJetStreamBroker

from ..latency_check import record
from ._async import incr_counter
from ._common import NATS_URL, TAG_ENV, WORKLOAD_ENV, Adapter, bin_of, main

BATCH = 1000
BATCH_FETCH = 1 if os.environ.get(WORKLOAD_ENV) == "latency" else 8
"""Messages per fetch: the default workload's concurrency (the docstring says why)."""
NAME = f"rqcmp_taskiq_{os.environ.get(TAG_ENV, 'none')}"

broker = PullBasedJetStreamBroker(
    NATS_URL,
    subject=f"{NAME}.jobs",
    stream_name=NAME,
    durable=NAME,
    pull_consume_batch=BATCH_FETCH,
)


@broker.task(task_name="compare_incr")
async def incr(n: int) -> None:
    await incr_counter()


@broker.task(task_name="compare_latency")
async def compare_latency(seq: int, pushed_at: float) -> None:
    record(seq, pushed_at)


class TaskiqNatsAdapter(Adapter):
    backend = "nats"
    runner: asyncio.Runner | None = None

    def enqueue(self) -> float:
        return asyncio.run(self._enqueue())

    async def _enqueue(self) -> float:
        await broker.startup()  # makes the stream and the consumer, outside the clock
        try:
            started = time.perf_counter()
            for i in range(0, self.jobs, BATCH):
                chunk = range(i, min(self.jobs, i + BATCH))
                await asyncio.gather(*(incr.kiq(n) for n in chunk))
            return time.perf_counter() - started
        finally:
            await broker.shutdown()

    def worker_commands(self) -> list[list[str]]:
        return [
            [
                bin_of("taskiq"),
                "worker",
                "bench.compare.peers.taskiq_nats:broker",
                "--workers",
                str(self.processes),
                "--max-async-tasks",
                str(self.concurrency),
                "--no-configure-logging",
            ]
        ]

    def push_one(self, seq: int, pushed_at: float) -> None:
        if self.runner is None:
            self.runner = asyncio.Runner()
            self.runner.run(broker.startup())
        self.runner.run(compare_latency.kiq(seq, pushed_at))

    def close(self) -> None:
        if self.runner is not None:
            self.runner.run(broker.shutdown())
            self.runner.close()

    def teardown(self) -> None:
        asyncio.run(_delete_stream())


async def _delete_stream() -> None:
    import nats
    import nats.js.errors

    client = await nats.connect(NATS_URL)
    try:
        await client.jetstream().delete_stream(NAME)
    except nats.js.errors.NotFoundError:
        pass
    finally:
        await client.close()


if __name__ == "__main__":
    main(TaskiqNatsAdapter)
