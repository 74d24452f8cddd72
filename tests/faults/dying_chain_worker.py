# SPDX-License-Identifier: MIT
"""A worker that dies the moment it has pushed a chain's next step, before it acknowledges
the step it finished: the worst moment for a chain (tests/faults/test_chains.py).

    python -m tests.faults.dying_chain_worker URL LEASE

It serves `default` with the ledger's jobs and, on the push of a `slow` job numbered 2,
ends its process with no clean-up at all, as a kill does.
"""

from __future__ import annotations

import asyncio
import os
import sys
from datetime import timedelta

from rainier_queue.connections import open_queue
from rainier_queue.instrument import PortCall
from rainier_queue.worker import Worker, WorkerOptions

from .ledger_jobs import registry


def die_after_the_next_step(call: PortCall) -> None:
    pushed = call.operation == "push" and call.error is None
    if pushed and any(job.name == "slow" and job.payload["n"] == 2 for job in call.jobs):
        os._exit(9)


async def main(url: str, lease: str) -> None:
    queue = open_queue(url, {"lease": lease})
    options = WorkerOptions(timeout=timedelta(seconds=1.5))  # inside the test's short lease
    worker = Worker(queue, registry, options, observers=[die_after_the_next_step])
    await worker.run()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
