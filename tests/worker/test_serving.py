# SPDX-License-Identifier: MIT
"""Which jobs the worker takes, how many at once, and when it stops on its own."""

from __future__ import annotations

import asyncio
import threading
from datetime import timedelta

from typing_extensions import override

from rainier_queue.drivers.memory import MemoryQueue
from rainier_queue.queue import Reservation

from .jobs import (
    Chain,
    Doomed,
    Flaky,
    Held,
    Journal,
    Meet,
    MeetInThread,
    Note,
    Staggered,
    eventually,
    push,
    quick,
    worker_for,
)


class ReserveLog(MemoryQueue):
    """A memory queue that remembers what each reserve asked for and got."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, int, int]] = []

    @override
    async def reserve(self, queue: str, *, limit: int = 1) -> list[Reservation]:
        got = await super().reserve(queue, limit=limit)
        self.calls.append((queue, limit, len(got)))
        return got


async def test_queues_are_served_in_priority_order() -> None:
    queue = MemoryQueue()
    for text in ("low 1", "low 2"):
        await push(queue, Note(text=text), queue="low")
    for text in ("high 1", "high 2"):
        await push(queue, Note(text=text), queue="high")
    journal = Journal()

    stats = await worker_for(
        queue, journal, quick(queues=("high", "low"), stop_when_empty=True)
    ).run()

    assert journal.ran == ["high 1", "high 2", "low 1", "low 2"]
    assert stats.processed == 4


async def test_a_later_queue_is_asked_only_for_the_slots_an_earlier_one_left_free() -> None:
    queue = ReserveLog()
    await push(queue, Note(text="high"), queue="high")
    for text in ("low 1", "low 2", "low 3"):
        await push(queue, Note(text=text), queue="low")
    journal = Journal()

    await worker_for(
        queue, journal, quick(queues=("high", "low"), concurrency=3, stop_when_empty=True)
    ).run()

    assert queue.calls[:2] == [("high", 3, 1), ("low", 2, 2)]
    assert sorted(journal.ran) == ["high", "low 1", "low 2", "low 3"]


async def test_prefetch_caps_each_reserve_and_a_full_batch_is_followed_by_another() -> None:
    queue = ReserveLog()
    for n in range(3):
        await push(queue, Note(text=str(n)))

    await worker_for(queue, Journal(), quick(concurrency=4, prefetch=2, stop_when_empty=True)).run()

    assert queue.calls[:2] == [("default", 2, 2), ("default", 2, 1)]


async def test_concurrency_runs_that_many_jobs_at_the_same_time() -> None:
    queue = MemoryQueue()
    for _ in range(4):
        await push(queue, Meet(expected=4))
    journal = Journal()

    stats = await worker_for(queue, journal, quick(concurrency=4, stop_when_empty=True)).run()

    assert stats.processed == 4, "each job waits for the other three; all four must run at once"
    assert journal.arrived == 4


async def test_plain_def_handlers_run_side_by_side_in_threads() -> None:
    queue = MemoryQueue()
    for _ in range(3):
        await push(queue, MeetInThread())
    journal = Journal(barrier=threading.Barrier(3, timeout=5))

    stats = await worker_for(queue, journal, quick(concurrency=3, stop_when_empty=True)).run()

    assert stats.processed == 3, "each handler waits at a barrier for the other two"
    assert len(set(journal.threads)) == 3
    assert threading.current_thread().name not in journal.threads


async def test_max_jobs_stops_after_that_many_finished_jobs_even_with_free_slots() -> None:
    queue = MemoryQueue()
    for n in range(5):
        await push(queue, Note(text=str(n)))

    stats = await worker_for(queue, Journal(), quick(concurrency=4, max_jobs=2)).run()

    assert stats.processed == 2
    assert await queue.size("default") == 3
    assert queue.reserved_count() == 0


async def test_retries_do_not_count_towards_max_jobs() -> None:
    queue = MemoryQueue()
    await push(queue, Doomed())
    await push(queue, Note(text="after"))

    stats = await worker_for(queue, Journal(), quick(max_jobs=2)).run()

    assert (stats.released, stats.failed, stats.processed) == (1, 1, 1)
    assert stats.total == 2


async def test_stop_when_empty_waits_for_running_jobs_that_may_add_work() -> None:
    queue = MemoryQueue()
    await push(queue, Chain(links=3))
    journal = Journal()

    stats = await worker_for(queue, journal, quick(concurrency=2, stop_when_empty=True)).run()

    assert journal.ran == ["link 3", "link 2", "link 1"]
    assert stats.processed == 3
    assert stats.idles >= 1


async def test_stop_when_empty_does_not_wait_for_a_retry_that_is_not_due() -> None:
    queue = MemoryQueue()
    await push(queue, Flaky(fail_times=1))

    stats = await worker_for(queue, Journal(), quick(stop_when_empty=True)).run()

    assert (stats.released, stats.total) == (1, 0)
    assert await queue.size("default") == 1


async def test_a_run_past_max_time_takes_no_new_work() -> None:
    queue = MemoryQueue()
    await push(queue, Note(text="never"))

    stats = await worker_for(queue, Journal(), quick(max_time=timedelta(0))).run()

    assert stats.total == 0
    assert await queue.size("default") == 1


async def test_a_worker_stopped_before_it_starts_runs_nothing() -> None:
    queue = MemoryQueue()
    for n in range(3):
        await push(queue, Note(text=str(n)))
    worker = worker_for(queue, Journal(), quick(stop_when_empty=True))

    worker.stop()
    stats = await worker.run()

    assert (stats.total, stats.idles) == (0, 0)
    assert await queue.size("default") == 3


async def test_the_tries_floor_raises_a_jobs_attempts_and_never_lowers_them() -> None:
    queue = MemoryQueue()
    await push(queue, Doomed(label="one try"), max_attempts=1)
    await push(queue, Doomed(label="five tries"), max_attempts=5)
    journal = Journal()

    await worker_for(queue, journal, quick(tries=3, stop_when_empty=True)).run()

    assert [a for a in journal.attempts if a[0] == "one try"] == [
        ("one try", 1, 3),
        ("one try", 2, 3),
        ("one try", 3, 3),
    ]
    assert len([a for a in journal.attempts if a[0] == "five tries"]) == 5
    assert [(label, attempt) for label, attempt, _ in journal.hooks] == [
        ("one try", 3),
        ("five tries", 5),
    ]


async def test_a_busy_worker_with_a_backlog_reserves_in_batches_not_one_job_at_a_time() -> None:
    queue = ReserveLog()
    for n in range(64):
        await push(queue, Staggered(turns=n % 8))
    journal = Journal()
    # A long batch wait, so that only the jobs ending (never the clock) ends each wait.
    options = quick(concurrency=8, stop_when_empty=True, batch_wait=timedelta(seconds=30))

    stats = await worker_for(queue, journal, options).run()

    assert stats.processed == 64
    taken = [got for _, _, got in queue.calls if got]
    assert sum(taken) == 64
    # The last reserve may find fewer jobs left than it had room for.
    assert min(taken[:-1]) >= 4, f"each reserve waited for half the slots: {taken}"


async def test_the_batch_wait_never_keeps_a_free_slot_idle_for_long() -> None:
    queue = MemoryQueue()
    for n in range(3):
        await push(queue, Held(text=f"held {n}"))
    await push(queue, Note(text="quick"))
    await push(queue, Note(text="also quick"))
    journal = Journal()
    # Three of four slots stay busy, so half the slots never free; the wait must end anyway.
    options = quick(concurrency=4, prefetch=3, batch_wait=timedelta(milliseconds=20))
    worker = worker_for(queue, journal, options)
    running = asyncio.create_task(worker.run())

    await eventually(lambda: len(journal.ran) == 2, "both quick jobs, beside three held ones")
    assert journal.ran == ["quick", "also quick"]
    assert len(journal.attempts) == 3, "the held jobs are still running"
    journal.gate.set()
    await eventually(lambda: len(journal.ran) == 5, "the held jobs, once let go")
    worker.stop()
    stats = await running
    assert stats.processed == 5
