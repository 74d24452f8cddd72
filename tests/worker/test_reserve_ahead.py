# SPDX-License-Identifier: MIT
"""Reserving ahead: a busy worker with quick jobs holds the next batch before its slots free.

The broker here is the memory driver with reserves slowed down, as a
broker across a network is: jobs that take no time then finish well before
a reserve comes back, which is when holding ahead pays.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator, Sequence
from datetime import timedelta

import pytest
from typing_extensions import override

from rainier_queue import Job, JobContext
from rainier_queue.drivers.memory import MemoryQueue
from rainier_queue.instrument import JobRun
from rainier_queue.queue import Reservation
from rainier_queue.worker.pace import Pace

from .jobs import Held, Journal, Note, eventually, push, quick, worker_for

RESERVE_DELAY = 0.01
"""Seconds a reserve takes on the slowed broker: far more than a `Note` job takes."""


class SlowBroker(MemoryQueue):
    """The memory driver, with every reserve taking `RESERVE_DELAY`; remembers the most held."""

    def __init__(self) -> None:
        super().__init__()
        self.most_held = 0
        self.reserved_ids: list[str] = []

    @override
    async def reserve(self, queue: str, *, limit: int = 1) -> list[Reservation]:
        await asyncio.sleep(RESERVE_DELAY)
        got = await super().reserve(queue, limit=limit)
        self.reserved_ids += [r.job.id for r in got]
        self.most_held = max(self.most_held, self.reserved_count())
        return got


class Counted(Job):
    """Records how many handlers ran at once, at most."""

    name = "counted"
    tries = 1

    async def handle(self, ctx: JobContext) -> None:
        box = ctx.resolve(Journal)
        box.arrived += 1
        box.attempts.append(("running", box.arrived, 0))
        await asyncio.sleep(0)
        box.arrived -= 1


async def test_quick_jobs_on_a_slow_broker_are_held_ahead_but_never_run_beyond_concurrency() -> (
    None
):
    queue = SlowBroker()
    journal = Journal()
    for n in range(200):
        await push(queue, Note(text=f"job {n}"))
    options = quick(concurrency=2, reserve_ahead=3, stop_when_empty=True, batch_wait=timedelta(0))

    stats = await worker_for(queue, journal, options).run()

    assert stats.processed == 200
    assert sorted(journal.ran) == sorted(f"job {n}" for n in range(200))
    assert queue.most_held > 2, "the worker never held a job beyond its running ones"
    assert queue.most_held <= 2 * 2 + 3


async def test_held_jobs_never_run_more_handlers_at_once_than_concurrency() -> None:
    queue = SlowBroker()
    journal = Journal()
    worker = worker_for(queue, journal, quick(concurrency=2, reserve_ahead=4, stop_when_empty=True))
    worker.registry.register(Counted)
    for _ in range(120):
        await push(queue, Counted())

    stats = await worker.run()

    assert stats.processed == 120
    assert max(running for _, running, _ in journal.attempts) <= 2
    assert queue.most_held > 2


async def test_with_reserve_ahead_off_nothing_is_held_beyond_the_running_jobs() -> None:
    queue = SlowBroker()
    journal = Journal()
    for n in range(100):
        await push(queue, Note(text=f"job {n}"))
    options = quick(concurrency=2, reserve_ahead=0, stop_when_empty=True, batch_wait=timedelta(0))

    stats = await worker_for(queue, journal, options).run()

    assert stats.processed == 100
    # Two running, and at most two more whose acknowledgements are on their way.
    assert queue.most_held <= 4


async def test_a_stop_hands_held_jobs_back_unstarted_with_their_attempt_refunded() -> None:
    queue = SlowBroker()
    journal = Journal()
    for n in range(40):
        await push(queue, Note(text=f"quick {n}"))
    first = await push(queue, Held(text="first"))
    second = await push(queue, Held(text="second"))
    worker = worker_for(queue, journal, quick(concurrency=1, reserve_ahead=1))
    running = asyncio.create_task(worker.run())

    # The quick jobs teach the worker that its jobs outrun its reserves, so
    # the second held job is reserved while the first one runs.
    await eventually(lambda: journal.started.is_set(), "the first held job to start")
    await eventually(lambda: second.id in queue.reserved_ids, "the second to be held ahead")
    worker.stop()
    journal.gate.set()
    stats = await asyncio.wait_for(running, 5)

    assert [text for text, _, _ in journal.attempts] == ["first"]
    assert journal.ran[-1] == "first"
    # Nothing was cut short: a graceful stop that only hands back what it held ahead is a
    # clean one (the CLI exits 0 on it, not 130).
    assert (stats.interrupted, stats.returned_unstarted) == (0, 1)
    assert await queue.size("default") == 1
    again = await queue.reserve("default")
    assert [r.job.id for r in again] == [second.id]
    assert again[0].job.attempts == 1, "the held job's attempt was not refunded"
    assert first.id not in [r.job.id for r in again]


class SlowBrokerSlowAcks(SlowBroker):
    """`SlowBroker`, whose acknowledgements also wait until the test opens `gate`."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = asyncio.Event()

    @override
    async def acknowledge_many(self, reservations: Sequence[Reservation]) -> list[Exception | None]:
        await self.gate.wait()
        return await super().acknowledge_many(reservations)


async def test_a_held_job_waits_while_the_broker_has_not_recorded_the_jobs_before_it() -> None:
    queue = SlowBrokerSlowAcks()
    journal = Journal()
    for n in range(6):
        await push(queue, Note(text=f"job {n}"))
    worker = worker_for(queue, journal, quick(concurrency=1, reserve_ahead=1, stop_when_empty=True))
    running = asyncio.create_task(worker.run())

    # One job done and unrecorded, one running, then one more done and unrecorded:
    # with a concurrency of one, two unrecorded jobs are the most the worker keeps.
    await eventually(lambda: len(journal.ran) == 2, "two jobs run while none is recorded")
    await eventually(lambda: queue.reserved_count() == 3, "a third job held ahead")
    await asyncio.sleep(0.05)  # give a wrongly started third job the time to run
    assert len(journal.ran) == 2, "a held job ran while two results were unrecorded"
    queue.gate.set()
    stats = await asyncio.wait_for(running, 5)

    assert stats.processed == 6
    assert sorted(journal.ran) == sorted(f"job {n}" for n in range(6))
    assert queue.reserved_count() == 0


def test_pace_holds_ahead_only_once_jobs_are_measured_quicker_than_reserves() -> None:
    pace = Pace()
    seen = [pace.holding_ahead_pays]
    pace.job_took(0.001)
    seen.append(pace.holding_ahead_pays)  # no reserve measured yet
    pace.reserve_took(0.005)
    seen.append(pace.holding_ahead_pays)
    for _ in range(50):
        pace.job_took(0.5)  # the workload turned slow
    seen.append(pace.holding_ahead_pays)
    assert seen == [False, False, True, False]


def test_pace_holds_short_jobs_ahead_however_quick_the_reserves() -> None:
    pace = Pace()
    pace.reserve_took(0.001)
    for _ in range(50):
        pace.job_took(0.02)  # an I/O-bound job: twenty reserves long, but brief
    short = pace.holding_ahead_pays
    for _ in range(50):
        pace.job_took(0.5)
    slow = pace.holding_ahead_pays
    assert (short, slow) == (True, False)


def test_a_negative_reserve_ahead_is_refused() -> None:
    with pytest.raises(ValueError, match="reserve_ahead cannot be negative"):
        quick(reserve_ahead=-1)


async def test_a_job_handed_back_unstarted_is_no_run_to_the_instruments() -> None:
    queue = SlowBroker()
    journal = Journal()
    for n in range(40):
        await push(queue, Note(text=f"quick {n}"))
    await push(queue, Held(text="first"))
    second = await push(queue, Held(text="second"))
    seen: list[tuple[str, str | None]] = []

    @contextlib.contextmanager
    def scope(run: JobRun) -> Iterator[None]:
        yield
        seen.append((run.job.id, run.outcome))

    worker = worker_for(queue, journal, quick(concurrency=1, reserve_ahead=1), job_scopes=[scope])
    running = asyncio.create_task(worker.run())
    await eventually(lambda: journal.started.is_set(), "the first held job to start")
    await eventually(lambda: second.id in queue.reserved_ids, "the second to be held ahead")
    worker.stop()
    journal.gate.set()
    stats = await asyncio.wait_for(running, 5)

    assert stats.returned_unstarted == 1
    # Every run a scope saw ended as a success; the held-back job is not among them.
    assert second.id not in {job_id for job_id, _ in seen}
    assert {outcome for _, outcome in seen} == {"succeeded"}
