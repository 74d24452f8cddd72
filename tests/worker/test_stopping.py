# SPDX-License-Identifier: MIT
"""Stopping: graceful by default, at once when asked, and never stranding a job."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import threading
from collections.abc import Sequence
from datetime import timedelta

import pytest

from rainier_queue.drivers.memory import MemoryQueue

from .jobs import BlocksInThread, Held, Journal, Note, eventually, push, quick, worker_for
from .test_acks import SlowAcks


async def test_a_graceful_stop_lets_the_running_job_finish_and_takes_no_new_one() -> None:
    queue = MemoryQueue()
    await push(queue, Held(text="running"))
    await push(queue, Note(text="waiting"))
    journal = Journal()
    worker = worker_for(queue, journal)
    running = asyncio.create_task(worker.run())
    await journal.started.wait()

    worker.stop()
    assert worker.is_stopping
    await asyncio.sleep(0.01)
    assert not running.done(), "a graceful stop waits for the running job"
    journal.gate.set()
    stats = await running

    assert (stats.processed, stats.interrupted) == (1, 0)
    assert journal.ran == ["running"]
    assert await queue.size("default") == 1, "the waiting job stays for the next worker"


async def test_a_job_still_running_after_the_grace_period_is_handed_back_with_its_attempt() -> None:
    queue = MemoryQueue()
    await push(queue, Held(text="too slow"))
    journal = Journal()
    worker = worker_for(queue, journal, quick(grace=timedelta(milliseconds=10)))
    running = asyncio.create_task(worker.run())
    await journal.started.wait()

    worker.stop()
    stats = await running

    assert (stats.processed, stats.failed, stats.interrupted) == (0, 0, 1)
    assert journal.cancelled == ["too slow"]
    [again] = await queue.reserve("default")
    assert again.job.attempts == 1, "the interrupted delivery did not cost an attempt"


async def test_stop_now_interrupts_running_jobs_at_once() -> None:
    queue = MemoryQueue()
    await push(queue, Held())
    journal = Journal()
    worker = worker_for(queue, journal, quick(grace=timedelta(hours=1)))
    running = asyncio.create_task(worker.run())
    await journal.started.wait()

    worker.stop(now=True)
    stats = await asyncio.wait_for(running, 5)

    assert stats.interrupted == 1
    assert await queue.size("default") == 1
    assert queue.reserved_count() == 0, "nothing waits for a lease to lapse"


async def test_stop_now_cuts_a_graceful_stop_short() -> None:
    queue = MemoryQueue()
    await push(queue, Held())
    journal = Journal()
    worker = worker_for(queue, journal, quick(grace=timedelta(hours=1)))
    running = asyncio.create_task(worker.run())
    await journal.started.wait()

    worker.stop()
    await asyncio.sleep(0.01)
    worker.stop(now=True)
    stats = await asyncio.wait_for(running, 5)

    assert stats.interrupted == 1


async def test_stop_may_be_called_from_another_thread() -> None:
    queue = MemoryQueue()
    worker = worker_for(queue, Journal(), quick(sleep=timedelta(seconds=30)))
    running = asyncio.create_task(worker.run())
    await eventually(lambda: worker.stats.idles >= 1, "the worker to go idle")

    threading.Thread(target=worker.stop).start()
    stats = await asyncio.wait_for(running, 5)

    assert stats.total == 0


async def test_the_first_signal_stops_gracefully_and_the_second_at_once() -> None:
    queue = MemoryQueue()
    await push(queue, Held())
    journal = Journal()
    worker = worker_for(queue, journal, quick(grace=timedelta(hours=1)))
    worker.install_signal_handlers()
    running = asyncio.create_task(worker.run())
    await journal.started.wait()

    os.kill(os.getpid(), signal.SIGTERM)
    await eventually(lambda: worker.is_stopping, "the first signal to be handled")
    assert not running.done()
    os.kill(os.getpid(), signal.SIGINT)
    stats = await asyncio.wait_for(running, 5)

    assert stats.interrupted == 1
    loop = asyncio.get_running_loop()
    assert not loop.remove_signal_handler(signal.SIGTERM), "run() removed its handlers"


async def test_the_first_signal_is_announced_at_warning_and_a_stranded_thread_is_named(
    caplog: pytest.LogCaptureFixture,
) -> None:
    queue = MemoryQueue()
    await push(queue, BlocksInThread())
    journal = Journal()
    caplog.set_level(logging.WARNING, logger="rainier_queue")
    try:
        worker = worker_for(queue, journal, quick(grace=timedelta(hours=1)))
        worker.install_signal_handlers()
        running = asyncio.create_task(worker.run())
        await eventually(lambda: bool(journal.threads), "the handler to start")
        os.kill(os.getpid(), signal.SIGINT)
        await eventually(lambda: worker.is_stopping, "the first signal to be handled")
        os.kill(os.getpid(), signal.SIGINT)
        stats = await asyncio.wait_for(running, 5)
        left_running = stats.threads_left_running
    finally:
        journal.thread_gate.set()

    said = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert any(m.startswith("received SIGINT: taking no new jobs") for m in said), said
    assert any("`blocks-in-thread`" in m and "still runs in its thread" in m for m in said), said
    assert (stats.processed, stats.abandoned, left_running) == (0, 1, 1)
    counts = await queue.counts("default")
    assert (counts.waiting, counts.reserved) == (0, 1), "left to its lease, not recorded as done"


def test_signal_handlers_need_the_running_loop() -> None:
    worker = worker_for(MemoryQueue(), Journal())

    with pytest.raises(RuntimeError, match="needs the running event loop"):
        worker.install_signal_handlers()


async def test_a_graceful_stop_waits_for_the_acknowledgement_of_a_job_that_returned() -> None:
    # The job's handler is over, but until the broker has recorded it the job is
    # still the worker's: stopping must not return, or drop it, before then.
    queue = SlowAcks()
    await push(queue, Note(text="done"))
    journal = Journal()
    worker = worker_for(queue, journal)
    running = asyncio.create_task(worker.run())
    await eventually(lambda: journal.ran == ["done"], "the job to run")

    worker.stop()
    await asyncio.sleep(0.05)
    assert not running.done(), "the stop returned before the acknowledgement was back"
    queue.gate.set()
    stats = await running

    assert stats.processed == 1
    assert queue.recorded == 1
    assert queue.reserved_count() == 0


class SwallowsCancellation(MemoryQueue):
    """A client library that, cancelled in the middle of a call, catches the cancellation and
    returns (redis-py's cluster client was seen to): its second read of the paused queues
    holds until cancelled, then answers as if nothing happened."""

    def __init__(self) -> None:
        super().__init__()
        self.holding = asyncio.Event()
        self.swallowed = 0
        self._reads = 0

    async def paused(self, queues: Sequence[str]) -> frozenset[str]:
        self._reads += 1
        if self._reads == 2:
            self.holding.set()
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                self.swallowed += 1
        return await super().paused(queues)


async def test_a_stop_ends_the_worker_even_when_a_read_swallows_its_cancellation() -> None:
    queue = SwallowsCancellation()
    await push(queue, Held(text="running"))
    journal = Journal()
    worker = worker_for(queue, journal, quick(pause_check=timedelta(milliseconds=20)))
    running = asyncio.create_task(worker.run())
    await journal.started.wait()
    await queue.holding.wait()

    worker.stop(now=True)
    # A liveness bound, not a timing: without the stop flag the pause watch goes round
    # again after the swallowed cancellation, reads again, and the run never ends.
    stats = await asyncio.wait_for(running, 30)

    assert queue.swallowed == 1, "the cancellation reached the held read"
    assert stats.interrupted == 1
