# SPDX-License-Identifier: MIT
"""The scheduler's per-tick claims hold on every store: one winner per tick across
processes, settled outcomes that stay, lapsed claims that can be taken over, and
unsettled ticks that any scheduler finds in the store, whoever claimed them."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from typing_extensions import override

from rainier_queue import LockManager, QueueManager
from rainier_queue.cache import Cache
from rainier_queue.drivers.memory import MemoryQueue
from rainier_queue.envelope import QueuedJob
from rainier_queue.scheduling import TICK_HEADER, Schedule, Scheduler
from rainier_queue.scheduling.claims import Claims, outcome

from ..scheduling.clock import SteppedClock, at
from ..scheduling.jobs import Report, registry
from .stores import open_store

TICK = datetime(2026, 5, 17, 10, 0, tzinfo=UTC)
# A claim's lease in these tests. A scheduler held in its push renews its claim on a
# cadence; at 200 ms a late renewal on a busy Redis Cluster let another scheduler take
# the tick over and be held in its push too, and the test waited for ever (seen once).
SHORT = timedelta(milliseconds=600)


async def test_a_tick_is_won_by_exactly_one_of_many_processes(cache_url: str) -> None:
    stores = [open_store(cache_url) for _ in range(4)]
    if not stores[0].is_shared:  # a memory store: four claimers in one process share it
        stores = [stores[0]] * 4
    try:
        claimers = [Claims(store, owner=f"p{n}") for n, store in enumerate(stores)]
        won = await asyncio.gather(*(c.claim("nightly", TICK) for c in claimers for _ in range(3)))
        assert sum(claim is not None for claim in won) == 1
    finally:
        for store in set(stores):
            await store.aclose()


async def test_a_settled_tick_keeps_its_outcome_and_cannot_be_claimed_again(
    cache: Cache,
) -> None:
    claims = Claims(cache, owner="a")
    claim = await claims.claim("nightly", TICK)
    assert claim is not None
    assert await claims.state("nightly", TICK) == "claimed"
    done = outcome("nightly", TICK, "enqueued", job_id="j-1")
    assert await claims.settle(claim, done, keep_for=timedelta(hours=1))
    assert await Claims(cache, owner="b").claim("nightly", TICK) is None
    assert await claims.state("nightly", TICK) == done
    assert await claims.last("nightly") == done


async def test_a_lapsed_claim_is_taken_over_and_its_old_owner_cannot_settle(
    cache: Cache,
) -> None:
    dead = Claims(cache, owner="dead", lease=SHORT)
    old = await dead.claim("nightly", TICK)
    assert old is not None
    survivor = Claims(cache, owner="alive")
    new = None
    for _ in range(100):
        await asyncio.sleep(SHORT.total_seconds() / 2)
        new = await survivor.claim("nightly", TICK)
        if new is not None:
            break
    assert new is not None
    late = outcome("nightly", TICK, "enqueued", job_id="late")
    assert await dead.settle(old, late, keep_for=timedelta(hours=1)) is False
    assert await survivor.state("nightly", TICK) == "claimed"


async def test_giving_up_a_claim_lets_the_tick_be_claimed_again(cache: Cache) -> None:
    claims = Claims(cache, owner="a")
    claim = await claims.claim("nightly", TICK)
    assert claim is not None
    await claims.give_up(claim)
    assert await claims.state("nightly", TICK) is None
    assert await Claims(cache, owner="b").claim("nightly", TICK) is not None


async def test_the_cursor_never_moves_backwards(cache: Cache) -> None:
    claims = Claims(cache, owner="a")
    assert await claims.cursor("nightly") is None
    await claims.advance("nightly", TICK)
    await claims.advance("nightly", TICK - timedelta(minutes=1))
    assert await claims.cursor("nightly") == TICK
    await claims.advance("nightly", TICK + timedelta(seconds=1))
    assert await claims.cursor("nightly") == TICK + timedelta(seconds=1)


async def test_a_cursor_or_outcome_that_is_not_a_time_reads_as_none_not_an_error(
    cache: Cache,
) -> None:
    await cache.put("schedule:nightly:cursor", b"yesterday-ish")
    await cache.put(
        "schedule:nightly:last",
        b'{"schedule": "nightly", "tick": "soon", "status": "enqueued", "at": "now"}',
    )
    claims = Claims(cache, owner="a")

    assert await claims.cursor("nightly") is None
    assert await claims.last("nightly") is None
    await claims.advance("nightly", TICK)  # and the next pass writes a cursor over it
    assert await claims.cursor("nightly") == TICK


async def test_unsettled_ticks_are_listed_in_the_store_for_a_process_started_later(
    cache_url: str, cache: Cache
) -> None:
    ticks = [TICK + timedelta(seconds=n) for n in range(6)]
    claimers = [Claims(cache, owner=f"p{n}") for n in range(3)]
    await asyncio.gather(*(c.register("nightly", t) for c in claimers for t in ticks))
    later = reopened(cache_url, cache)
    try:
        assert await Claims(later, owner="late").unsettled("nightly") == ticks
        await asyncio.gather(
            *(c.unregister("nightly", t) for c, t in zip(claimers, ticks[:3], strict=True))
        )
        assert await Claims(later, owner="late").unsettled("nightly") == ticks[3:]
        assert await Claims(later, owner="late").unsettled("other") == []
    finally:
        if later is not cache:
            await later.aclose()


# -- the scheduler over each store: a claimer that dies holding an unsettled claim --------


class HeldQueue(MemoryQueue):
    """A queue whose pushes wait while `held` is set, as behind a locked jobs table."""

    def __init__(self) -> None:
        super().__init__()
        self.held = True
        self.pushing = 0

    @override
    async def push(self, job: QueuedJob) -> str:
        if self.held:
            self.pushing += 1
            await asyncio.Event().wait()  # for ever: the test kills the scheduler here
        return await super().push(job)


def reopened(cache_url: str, cache: Cache) -> Cache:
    """The store as a second process would open it (the same object for a memory store)."""
    return open_store(cache_url) if cache.is_shared else cache


def a_manager(queue: HeldQueue, store: Cache) -> QueueManager:
    return QueueManager(queue, registry=registry(), locks=LockManager(store).declared_shared())


async def held_in_push(scheduler: Scheduler, queue: HeldQueue) -> asyncio.Task[object]:
    """A pass that claims the due tick and is held in its push; returns it running."""
    before = queue.pushing
    task: asyncio.Task[object] = asyncio.create_task(scheduler.run_pending())
    while queue.pushing == before:
        assert not task.done(), f"the pass ended without pushing: {task.result()}"
        await asyncio.sleep(0.005)
    return task


async def kill(*tasks: asyncio.Task[object]) -> None:
    """SIGKILL, as far as one event loop can: the passes stop where they are, no cleanup."""
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def until_lapsed(claims: Claims, schedule: str, *ticks: datetime) -> None:
    """Wait for the claims on `ticks` to lapse (the store's own clock; SHORT each)."""
    for _ in range(500):
        states = [await claims.state(schedule, tick) for tick in ticks]
        if all(state is None for state in states):
            return
        await asyncio.sleep(SHORT.total_seconds() / 4)
    raise AssertionError(f"the claims on {ticks} never lapsed: {states}")


async def enqueued_ticks(queue: HeldQueue) -> list[str]:
    reserved = await queue.reserve("reports", limit=1000)
    return sorted(r.job.headers[TICK_HEADER] for r in reserved)


async def test_a_fresh_scheduler_enqueues_the_tick_of_one_killed_holding_its_claim(
    cache_url: str, cache: Cache
) -> None:
    schedule = Schedule()
    schedule.job(Report()).hourly()
    clock = SteppedClock(at("2026-05-17 10:00:01"))
    queue = HeldQueue()
    winner = Scheduler(a_manager(queue, cache), schedule, clock=clock, claim_lease=SHORT)
    held = await held_in_push(winner, queue)
    # The others see the tick claimed and move on; then they, too, go away.
    for _ in range(2):
        other = reopened(cache_url, cache)
        await Scheduler(a_manager(queue, other), schedule, clock=clock).run_pending()
        clock.advance(timedelta(seconds=20))
        if other is not cache:
            await other.aclose()
    await kill(held)
    queue.held = False
    fresh_store = reopened(cache_url, cache)
    try:
        fresh = [Scheduler(a_manager(queue, fresh_store), schedule, clock=clock) for _ in range(2)]
        await until_lapsed(fresh[0].claims, "report", at("2026-05-17 10:00"))
        for each in fresh * 2:
            await each.run_pending()
        assert await enqueued_ticks(queue) == ["2026-05-17T10:00:00.000000Z"]
        assert await fresh[0].claims.unsettled("report") == []
    finally:
        if fresh_store is not cache:
            await fresh_store.aclose()


async def test_ticks_the_cursor_passed_while_every_scheduler_was_held_are_enqueued_later(
    cache_url: str, cache: Cache
) -> None:
    schedule = Schedule()
    schedule.job(Report()).every(seconds=1)
    clock = SteppedClock(at("2026-05-17 10:00:00.5"))
    queue = HeldQueue()
    stores = [reopened(cache_url, cache) for _ in range(3)]
    schedulers = [
        Scheduler(a_manager(queue, store), schedule, clock=clock, claim_lease=SHORT)
        for store in stores
    ]
    try:
        queue.held = False
        await schedulers[2].run_pending()  # the schedule's first pass, 10:00:00
        queue.held = True
        held = []
        for n in range(3):  # 10:00:01, :02 and :03, each held by one, the others moving on
            clock.advance(timedelta(seconds=1))
            held.append(await held_in_push(schedulers[n], queue))
            for other in schedulers[n + 1 :]:
                await other.run_pending()
        await kill(*held)
        queue.held = False
        ticks = [at("2026-05-17 10:00:0" + str(n)) for n in (1, 2, 3)]
        # Seven seconds later, catch_up="latest" picks 10:00:10 alone: the three held
        # ticks are found only because the store lists them as unsettled.
        clock.set(at("2026-05-17 10:00:10.5"))
        fresh = Scheduler(a_manager(queue, stores[0]), schedule, clock=clock)
        await until_lapsed(fresh.claims, "report", *ticks)
        await fresh.run_pending()
        await fresh.run_pending()
        assert await enqueued_ticks(queue) == [
            "2026-05-17T10:00:00.000000Z",
            "2026-05-17T10:00:01.000000Z",
            "2026-05-17T10:00:02.000000Z",
            "2026-05-17T10:00:03.000000Z",
            "2026-05-17T10:00:10.000000Z",
        ]
    finally:
        for store in stores:
            if store is not cache:
                await store.aclose()
