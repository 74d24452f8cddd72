# SPDX-License-Identifier: MIT
"""Shared time-limit timers: they stop what overruns and keep nothing that finished."""

from __future__ import annotations

import asyncio
import gc
import weakref

from rainier_queue.worker.deadlines import Deadlines


async def test_a_finished_job_leaves_its_slice_so_its_task_can_be_freed() -> None:
    deadlines = Deadlines()

    async def quick() -> None:
        limit = deadlines.start(asyncio.current_task(), 60)  # type: ignore[arg-type]
        await asyncio.sleep(0)
        limit.done()

    task = asyncio.create_task(quick())
    await task
    gone = weakref.ref(task)
    del task
    await asyncio.sleep(0)  # the loop lets go of a finished task on its next turn
    gc.collect()

    assert gone() is None, "a finished job's task is not held until its slice's timer fires"


async def test_a_job_still_running_at_its_limit_is_cancelled_and_marked_expired() -> None:
    deadlines = Deadlines(resolution=0.01)
    started = asyncio.Event()

    async def hangs() -> None:
        started.set()
        await asyncio.Event().wait()

    task = asyncio.create_task(hangs())
    await started.wait()
    limit = deadlines.start(task, 0.02)
    await asyncio.gather(task, return_exceptions=True)

    assert task.cancelled()
    assert limit.expired


async def test_slices_whose_jobs_all_finished_are_dropped_with_their_timers() -> None:
    deadlines = Deadlines(resolution=0.05)
    running = asyncio.current_task()
    assert running is not None

    kept = deadlines.start(running, 60)
    later = [deadlines.start(running, 120 + i) for i in range(3)]
    assert deadlines.pending == 4  # the running job's slice, and three later ones

    for limit in later:
        limit.done()
    kept.done()

    # The newest slice stays, empty, for the jobs that keep joining it; the others went.
    assert deadlines.pending == 1, "an emptied slice kept its timer until it fired"


async def test_jobs_starting_together_share_one_slice_even_when_it_empties_between_them() -> None:
    deadlines = Deadlines(resolution=60)  # every limit below lands in one slice
    running = asyncio.current_task()
    assert running is not None

    for _ in range(100):
        deadlines.start(running, 1).done()

    assert deadlines.pending == 1


async def test_an_empty_slice_goes_once_a_newer_one_takes_the_new_jobs() -> None:
    deadlines = Deadlines(resolution=0.05)
    running = asyncio.current_task()
    assert running is not None

    deadlines.start(running, 60).done()
    assert deadlines.pending == 1  # empty, but new jobs may still join it
    live = deadlines.start(running, 120)

    assert deadlines.pending == 1, "the empty slice stayed after a newer one took over"
    live.done()
