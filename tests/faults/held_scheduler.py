# SPDX-License-Identifier: MIT
"""A scheduler process for the held-push fault test: `python -m tests.faults.held_scheduler URL`.

`rainier-queue schedule work` with one thing changed: a claim lease of two
seconds instead of sixty, so a test that kills the claimers sees their claims
lapse without waiting a minute. One schedule, every second, catch-up `latest`
(the default), enqueueing `ledger-tick` jobs into the queue at URL, with the
claims in the same database.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
from datetime import timedelta

from rainier_queue import LockManager, QueueConfig
from rainier_queue.scheduling import Schedule, Scheduler

from .schedule_app import LedgerTick, registry

LEASE = timedelta(seconds=2)


async def main(url: str) -> None:
    manager = QueueConfig.from_url(url, locks=url).build(registry)
    assert isinstance(manager.locks, LockManager)
    schedule = Schedule()
    schedule.job(LedgerTick()).every(seconds=1).named("ledger")
    scheduler = Scheduler(manager, schedule, claim_lease=LEASE)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    print("scheduling", flush=True)
    try:
        await scheduler.run(stop)
    finally:
        await manager.aclose()


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(process)d %(message)s")
    asyncio.run(main(sys.argv[1]))
