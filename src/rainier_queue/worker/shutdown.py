# SPDX-License-Identifier: MIT
"""The end of a run: the jobs a stopping worker still holds, finished or handed back.

A stop must never strand a job, and a job is the worker's from its reserve
until the broker has recorded what became of it, which for a success can be
after its handler returned and its task ended (the acknowledgement rides in
a batch, `Settler.settle_soon`). So what a stop waits for is the slots, not
the tasks: first, within the grace period, for every held job to end and be
recorded; then it interrupts the rest (a job not yet started is handed back
unstarted, a running one is cancelled and handed back with its attempt
refunded) and waits for those to be recorded too.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta

from .slots import Slots

log = logging.getLogger("rainier_queue.worker")


async def finish_held_jobs(
    slots: Slots,
    changed: asyncio.Event,
    *,
    grace: timedelta | None,
    hard: asyncio.Event,
) -> None:
    """Let held jobs end within `grace` (None: not at all) unless `hard` is set; then the rest."""
    if not slots:
        return
    if grace is not None:
        log.info(
            "waiting up to %gs for %d running job(s) to finish",
            grace.total_seconds(),
            len(slots),
        )
        finished = asyncio.create_task(
            asyncio.wait_for(all_finished(slots, changed), grace.total_seconds())
        )
        stopped_now = asyncio.create_task(hard.wait())
        try:
            await asyncio.wait({finished, stopped_now}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            finished.cancel()
            stopped_now.cancel()
            await asyncio.gather(finished, stopped_now, return_exceptions=True)
    remaining = list(slots.running.values())
    if remaining:
        log.warning("interrupting %d running job(s) and handing them back", len(remaining))
    for slot in remaining:
        slot.control.interrupt()
    await all_finished(slots, changed)


async def all_finished(slots: Slots, changed: asyncio.Event) -> None:
    """Wait until no job is held: each ended and its result recorded (or given up on).

    `changed` is the worker's event, set whenever a slot finishes.
    """
    while slots:
        changed.clear()
        await changed.wait()


__all__ = ["all_finished", "finish_held_jobs"]
