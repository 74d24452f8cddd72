# SPDX-License-Identifier: MIT
"""The scheduler's passes, on the memory queue and store, driven by a stepped clock."""

from __future__ import annotations

import asyncio
import base64
import os
from collections.abc import AsyncIterator
from datetime import datetime, timedelta

import pytest

from rainier_queue import LockManager, QueueManager
from rainier_queue.cache.memory import MemoryCache
from rainier_queue.drivers.memory import MemoryQueue
from rainier_queue.encryption import key_ring_from_config
from rainier_queue.errors import BrokerUnavailable
from rainier_queue.queue import Reservation
from rainier_queue.scheduling import TICK_HEADER, Schedule, Scheduler

from .clock import SteppedClock, at
from .jobs import Purge, Report, registry


@pytest.fixture
async def manager() -> AsyncIterator[QueueManager]:
    built = QueueManager(
        MemoryQueue(), registry=registry(), locks=LockManager(MemoryCache()).declared_shared()
    )
    yield built
    await built.aclose()


def scheduler(manager: QueueManager, schedule: Schedule, clock: SteppedClock) -> Scheduler:
    return Scheduler(manager, schedule, clock=clock)


async def waiting(manager: QueueManager, queue: str = "reports") -> list[Reservation]:
    return await manager.queue.reserve(queue, limit=1000)


def ticks_of(reservations: list[Reservation]) -> list[str]:
    return sorted(r.job.headers[TICK_HEADER] for r in reservations)


async def test_a_due_tick_is_enqueued_once_with_its_tick_in_the_headers(
    manager: QueueManager,
) -> None:
    schedule = Schedule()
    schedule.job(Report(team="sales")).daily_at("07:30")
    clock = SteppedClock(at("2026-05-17 07:30:02"))
    first = scheduler(manager, schedule, clock)
    outcomes = await first.run_pending()
    assert [o.status for o in outcomes] == ["enqueued"]
    assert await first.run_pending() == []
    jobs = await waiting(manager)
    assert ticks_of(jobs) == ["2026-05-17T07:30:00.000000Z"]
    assert jobs[0].job.payload == {"team": "sales"}


async def test_a_tick_is_enqueued_once_across_three_schedulers(manager: QueueManager) -> None:
    schedule = Schedule()
    schedule.job(Report()).every(seconds=1).catch_up("all")
    clock = SteppedClock(at("2026-05-17 10:00:00"))
    schedulers = [scheduler(manager, schedule, clock) for _ in range(3)]
    for _ in range(30):
        for each in schedulers:
            await each.run_pending()
        clock.advance(timedelta(milliseconds=700))
    ticks = ticks_of(await waiting(manager))
    assert len(ticks) == len(set(ticks))
    assert len(ticks) == 21  # 10:00:00 to 10:00:20, each once


async def test_catch_up_latest_runs_once_for_every_missed_tick(manager: QueueManager) -> None:
    schedule = Schedule()
    schedule.job(Report()).hourly()
    clock = SteppedClock(at("2026-05-17 10:00:05"))
    await scheduler(manager, schedule, clock).run_pending()
    clock.set(at("2026-05-17 15:20"))  # down from 10:00 to 15:20: five ticks missed
    await scheduler(manager, schedule, clock).run_pending()
    assert ticks_of(await waiting(manager)) == [
        "2026-05-17T10:00:00.000000Z",
        "2026-05-17T15:00:00.000000Z",
    ]


async def test_catch_up_all_runs_each_missed_tick_up_to_its_limit(manager: QueueManager) -> None:
    schedule = Schedule()
    schedule.job(Report()).hourly().catch_up("all", limit=3)
    clock = SteppedClock(at("2026-05-17 10:00:05"))
    await scheduler(manager, schedule, clock).run_pending()
    clock.set(at("2026-05-17 15:20"))
    await scheduler(manager, schedule, clock).run_pending()
    assert ticks_of(await waiting(manager)) == [
        "2026-05-17T10:00:00.000000Z",
        "2026-05-17T13:00:00.000000Z",
        "2026-05-17T14:00:00.000000Z",
        "2026-05-17T15:00:00.000000Z",
    ]


async def test_catch_up_skip_runs_none_of_the_missed_ticks_and_says_why(
    manager: QueueManager,
) -> None:
    schedule = Schedule()
    schedule.job(Report()).hourly().catch_up("skip")
    clock = SteppedClock(at("2026-05-17 10:00:05"))
    await scheduler(manager, schedule, clock).run_pending()
    clock.set(at("2026-05-17 15:20"))
    later = scheduler(manager, schedule, clock)
    outcomes = await later.run_pending()
    assert [(o.status, "catch_up=skip" in o.reason) for o in outcomes] == [("skipped", True)]
    clock.set(at("2026-05-17 16:00:30"))
    await later.run_pending()
    assert ticks_of(await waiting(manager)) == [
        "2026-05-17T10:00:00.000000Z",
        "2026-05-17T16:00:00.000000Z",
    ]


async def test_a_new_schedule_does_not_run_a_tick_long_past(manager: QueueManager) -> None:
    schedule = Schedule()
    schedule.job(Report()).daily_at("07:30")
    clock = SteppedClock(at("2026-05-17 12:00"))
    outcomes = await scheduler(manager, schedule, clock).run_pending()
    assert [o.status for o in outcomes] == ["skipped"]
    assert await waiting(manager) == []


async def test_a_spring_forward_day_enqueues_the_0230_job_once(manager: QueueManager) -> None:
    schedule = Schedule()
    schedule.job(Report()).daily_at("02:30").in_zone("America/New_York")
    clock = SteppedClock(at("2026-03-07 02:30", "America/New_York"))
    each = scheduler(manager, schedule, clock)
    while clock.now < at("2026-03-09 12:00", "America/New_York"):
        await each.run_pending()
        clock.advance(timedelta(minutes=5))
    assert ticks_of(await waiting(manager)) == [
        "2026-03-07T07:30:00.000000Z",
        "2026-03-08T07:00:00.000000Z",  # 03:00 EDT: the gap swallowed 02:30
        "2026-03-09T06:30:00.000000Z",
    ]


async def test_a_fall_back_day_enqueues_the_0130_job_once_not_twice(
    manager: QueueManager,
) -> None:
    schedule = Schedule()
    schedule.job(Report()).daily_at("01:30").in_zone("America/New_York")
    clock = SteppedClock(at("2026-10-31 01:30", "America/New_York"))
    each = scheduler(manager, schedule, clock)
    while clock.now < at("2026-11-02 12:00", "America/New_York"):
        await each.run_pending()
        clock.advance(timedelta(minutes=5))
    assert ticks_of(await waiting(manager)) == [
        "2026-10-31T05:30:00.000000Z",
        "2026-11-01T05:30:00.000000Z",
        "2026-11-02T06:30:00.000000Z",
    ]


async def test_overlap_skip_looks_at_the_previous_runs_job_not_at_the_enqueue(
    manager: QueueManager,
) -> None:
    schedule = Schedule()
    schedule.job(Report()).every_minute().overlap("skip")
    clock = SteppedClock(at("2026-05-17 10:00:01"))
    each = scheduler(manager, schedule, clock)
    await each.run_pending()
    clock.advance(timedelta(minutes=1))
    skipped = await each.run_pending()
    assert [(o.status, o.reason) for o in skipped] == [
        ("skipped", "the previous run's job is still queued or running")
    ]
    # A worker runs the first job and gives its uniqueness key back, as Worker does.
    (first,) = await waiting(manager)
    await manager.queue.acknowledge(first)
    assert manager.locks is not None
    assert first.job.unique_key is not None
    await manager.locks.force_release(first.job.unique_key)
    clock.advance(timedelta(minutes=1))
    assert [o.status for o in await each.run_pending()] == ["enqueued"]


async def test_overlap_queue_holds_the_tick_until_the_previous_job_settles(
    manager: QueueManager,
) -> None:
    schedule = Schedule()
    schedule.job(Report()).every_minute().overlap("queue")
    clock = SteppedClock(at("2026-05-17 10:00:01"))
    each = scheduler(manager, schedule, clock)
    await each.run_pending()
    clock.advance(timedelta(seconds=30))
    (first,) = await waiting(manager)
    clock.advance(timedelta(seconds=40))  # 10:01:11, the 10:01 run is due but held back
    assert await each.run_pending() == []
    await manager.queue.acknowledge(first)
    assert manager.locks is not None
    assert first.job.unique_key is not None
    await manager.locks.force_release(first.job.unique_key)
    outcomes = await each.run_pending()
    assert [(o.status, o.tick) for o in outcomes] == [("enqueued", at("2026-05-17 10:01"))]


async def test_when_and_skip_conditions_see_the_tick_and_are_recorded(
    manager: QueueManager,
) -> None:
    schedule = Schedule()
    seen: list[datetime] = []

    def even_hours(tick: datetime) -> bool:
        seen.append(tick)
        return tick.hour % 2 == 0

    schedule.job(Report()).hourly().when(even_hours).skip(lambda: False)
    clock = SteppedClock(at("2026-05-17 10:00:01"))
    each = scheduler(manager, schedule, clock)
    await each.run_pending()
    clock.advance(timedelta(hours=1))
    outcomes = await each.run_pending()
    assert [o.status for o in outcomes] == ["skipped"]
    assert seen == [at("2026-05-17 10:00"), at("2026-05-17 11:00")]
    last = await each.claims.last("report")
    assert last is not None
    assert last.describe() == "skipped: a when/skip condition said no"


async def test_job_options_choose_the_queue_and_delay(manager: QueueManager) -> None:
    schedule = Schedule()
    schedule.job(Purge()).every_minute().on_queue("maintenance").delay(timedelta(minutes=5))
    clock = SteppedClock(at("2026-05-17 10:00:01"))
    await scheduler(manager, schedule, clock).run_pending()
    assert await manager.queue.size("maintenance") == 1


async def test_a_unique_run_is_dropped_while_a_job_with_its_id_waits(
    manager: QueueManager,
) -> None:
    schedule = Schedule()
    schedule.job(Report()).every_minute().unique("nightly")
    clock = SteppedClock(at("2026-05-17 10:00:01"))
    each = scheduler(manager, schedule, clock)
    await each.run_pending()
    clock.advance(timedelta(minutes=1))
    outcomes = await each.run_pending()
    assert [o.status for o in outcomes] == ["skipped"]
    assert "unique id" in outcomes[0].reason


class RefusingQueue(MemoryQueue):
    refuse = True

    async def push(self, job):  # type: ignore[no-untyped-def]
        if self.refuse:
            raise BrokerUnavailable("the broker is down")
        return await super().push(job)


async def test_a_failed_enqueue_is_recorded_and_tried_again_next_pass() -> None:
    queue = RefusingQueue()
    manager = QueueManager(queue, registry=registry(), locks=LockManager(MemoryCache()))
    schedule = Schedule()
    schedule.job(Report()).hourly()
    clock = SteppedClock(at("2026-05-17 10:00:01"))
    each = scheduler(manager, schedule, clock)
    assert [o.status for o in await each.run_pending()] == ["failed"]
    last = await each.claims.last("report")
    assert last is not None
    assert "the broker is down" in last.reason
    queue.refuse = False
    clock.advance(timedelta(seconds=10))
    assert [o.status for o in await each.run_pending()] == ["enqueued"]
    assert ticks_of(await queue.reserve("reports", limit=10)) == ["2026-05-17T10:00:00.000000Z"]


async def test_a_tick_whose_claimer_died_is_taken_over_once_the_claim_lapses(
    manager: QueueManager,
) -> None:
    schedule = Schedule()
    schedule.job(Report()).hourly()
    clock = SteppedClock(at("2026-05-17 10:00:01"))
    survivor = Scheduler(manager, schedule, clock=clock, claim_lease=timedelta(seconds=60))
    # The dead scheduler claimed 10:00 and never enqueued it: its claim is all that is left.
    assert manager.locks is not None
    await manager.locks.cache.put(
        survivor.claims.tick_key("report", at("2026-05-17 10:00")),
        b"claimed dead-host:1",
        timedelta(milliseconds=50),
    )
    assert await survivor.run_pending() == []
    for _ in range(500):  # the memory store's expiry is real time (50 ms here)
        if await survivor.claims.state("report", at("2026-05-17 10:00")) != "claimed":
            break
        await asyncio.sleep(0.01)
    outcomes = await survivor.run_pending()
    assert [(o.status, o.tick) for o in outcomes] == [("enqueued", at("2026-05-17 10:00"))]


async def test_schedule_test_enqueues_now_and_records_it(manager: QueueManager) -> None:
    schedule = Schedule()
    schedule.job(Report()).yearly()
    clock = SteppedClock(at("2026-05-17 10:00:01"))
    each = scheduler(manager, schedule, clock)
    made = await each.trigger("report")
    assert (made.status, made.reason) == ("enqueued", "by hand")
    overview = await each.overview()
    assert overview[0].last == made
    assert overview[0].upcoming == [at("2027-01-01"), at("2028-01-01"), at("2029-01-01")]
    assert len(await waiting(manager)) == 1


def test_the_scheduler_refuses_a_manager_without_a_shared_store() -> None:
    from rainier_queue.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match="shared store for its claims"):
        Scheduler(QueueManager(MemoryQueue(), registry=registry()), Schedule())


class OneQueueRefusing(MemoryQueue):
    async def push(self, job):  # type: ignore[no-untyped-def]
        if job.queue == "reports":
            raise BrokerUnavailable("the reports broker is down")
        return await super().push(job)


async def test_a_failing_schedule_does_not_stop_the_others() -> None:
    queue = OneQueueRefusing()
    manager = QueueManager(queue, registry=registry(), locks=LockManager(MemoryCache()))
    schedule = Schedule()
    schedule.job(Report()).hourly()
    schedule.job(Purge()).hourly()
    clock = SteppedClock(at("2026-05-17 10:00:01"))
    outcomes = await scheduler(manager, schedule, clock).run_pending()
    assert [(o.schedule, o.status) for o in outcomes] == [
        ("report", "failed"),
        ("purge", "enqueued"),
    ]


async def test_a_false_condition_skips_before_any_lock_is_looked_at(
    manager: QueueManager,
) -> None:
    schedule = Schedule()
    schedule.job(Report()).every_minute().overlap("skip").when(lambda: False)
    assert manager.locks is not None
    held = await manager.locks.acquire("schedule:report:running", timedelta(hours=1))
    assert held is not None
    clock = SteppedClock(at("2026-05-17 10:00:01"))
    outcomes = await scheduler(manager, schedule, clock).run_pending()
    assert [o.reason for o in outcomes] == ["a when/skip condition said no"]


async def test_the_same_tick_looked_at_twice_runs_once(manager: QueueManager) -> None:
    schedule = Schedule()
    schedule.job(Report()).every_minute()
    clock = SteppedClock(at("2026-05-17 10:00:01"))
    each = scheduler(manager, schedule, clock)
    assert len(await each.run_pending()) == 1
    clock.advance(timedelta(seconds=30))
    assert await each.run_pending() == []
    assert await scheduler(manager, schedule, clock).run_pending() == []
    assert len(await waiting(manager)) == 1


def test_the_loop_wakes_at_the_next_tick_and_at_least_once_a_minute(
    manager: QueueManager,
) -> None:
    schedule = Schedule()
    schedule.job(Report()).daily()
    schedule.job(Purge()).every(seconds=20)
    clock = SteppedClock(at("2026-05-17 10:00:05"))
    each = scheduler(manager, schedule, clock)
    assert each.next_wake(clock.now) == at("2026-05-17 10:00:20")
    yearly = Schedule()
    yearly.job(Report()).yearly()
    assert scheduler(manager, yearly, clock).next_wake(clock.now) == at("2026-05-17 10:01:05")


async def test_the_loop_stops_between_passes_when_told(manager: QueueManager) -> None:
    schedule = Schedule()
    schedule.job(Report()).every(timedelta(milliseconds=20))
    each = Scheduler(manager, schedule)  # the real clock: it must really loop
    stop = asyncio.Event()
    running = asyncio.create_task(each.run(stop))
    for _ in range(1000):
        if await manager.queue.size("reports") >= 2:
            break
        await asyncio.sleep(0.01)
    stop.set()
    await running
    assert await manager.queue.size("reports") >= 2


async def test_a_worker_that_finishes_the_run_lets_the_next_tick_through(
    manager: QueueManager,
) -> None:
    from rainier_queue import Worker, WorkerOptions

    schedule = Schedule()
    schedule.job(Report()).every_minute().overlap("skip")
    clock = SteppedClock(at("2026-05-17 10:00:01"))
    each = scheduler(manager, schedule, clock)
    await each.run_pending()
    options = WorkerOptions(queues=("reports",), stop_when_empty=True)
    stats = await Worker(manager.queue, manager.registry, options, locks=manager.locks).run()
    assert stats.processed == 1
    clock.advance(timedelta(minutes=1))
    assert [o.status for o in await each.run_pending()] == ["enqueued"]


async def test_a_tick_is_enqueued_sealed_on_a_connection_with_a_key_ring(
    manager: QueueManager,
) -> None:
    """The scheduler pushes past the manager's dispatch, so it seals itself
    (docs/encryption.md): the stored job carries the key id, not the fields."""
    key = base64.urlsafe_b64encode(os.urandom(32)).decode()
    manager.queue.payload_keys = keys = key_ring_from_config({"keys": {"k1": key}})
    schedule = Schedule()
    schedule.job(Report(team="sales")).daily_at("07:30")
    outcomes = await scheduler(
        manager, schedule, SteppedClock(at("2026-05-17 07:30:02"))
    ).run_pending()
    assert [o.status for o in outcomes] == ["enqueued"]
    [job] = await waiting(manager)
    assert job.job.payload["key"] == "k1"
    assert "sales" not in job.job.to_json()
    assert keys.open(job.job) == {"team": "sales"}
