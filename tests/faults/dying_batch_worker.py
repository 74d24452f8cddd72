# SPDX-License-Identifier: MIT
"""A worker that dies the moment its record of a job finished a batch, before it settles the
job: the worst moment for a batch (tests/faults/test_batches.py).

    python -m tests.faults.dying_batch_worker URL LEASE [recorded|produced]

It serves `default` with the ledger's jobs and, once the store answers that the job it
recorded was the batch's last (the callbacks are queued by that same write), ends its
process with no clean-up at all, as a kill does. The job is left unacknowledged, to run
again elsewhere and be recorded a second time.

`produced`, for a driver that counts batches in a lock store (Kafka,
`drivers/cached_batches.py`): it dies after producing the callbacks and before
marking them produced, the gap where they are queued twice.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Sequence
from datetime import timedelta

from rainier_queue.batchstate import BatchProgress, Member, Outcome, batch_store_of
from rainier_queue.connections import open_queue
from rainier_queue.drivers.cached_batches import CacheBatches
from rainier_queue.envelope import QueuedJob
from rainier_queue.worker import Worker, WorkerOptions

from .ledger_jobs import registry


async def main(url: str, lease: str, gap: str) -> None:
    queue = open_queue(url, {"lease": lease})
    store = batch_store_of(queue)
    assert store is not None
    record = store.record_in_batch

    async def record_then_die(batch: Member, job_id: str, outcome: Outcome) -> BatchProgress | None:
        progress = await record(batch, job_id, outcome)
        if progress is not None and progress.finished:
            os._exit(9)
        return progress

    setattr(store, "record_in_batch", record_then_die)  # noqa: B010  (a method, replaced)
    if gap == "produced":
        # A batch counted in a lock store: die between producing the callbacks and marking
        # them produced, the one gap that makes them at least once.
        ledger = store
        assert isinstance(ledger, CacheBatches)
        produce = ledger._push_many

        async def produce_then_die(jobs: Sequence[QueuedJob]) -> object:
            await produce(jobs)
            os._exit(9)

        ledger._push_many = produce_then_die
    options = WorkerOptions(timeout=timedelta(seconds=1.5), concurrency=1)
    await Worker(queue, registry, options).run()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else "recorded"))
