# SPDX-License-Identifier: MIT
"""Batches counted in a lock store (Kafka's; `drivers/cached_batches.py`), on every store a
lock store can be, with a worker that dies between any two of a record's writes.

A record is five writes (count, push the callbacks, mark them pushed, the done-marker,
leave the journal). For each gap, the job's first record dies there (the store refuses
every write from that point on, as a killed process makes none), and the job is then
recorded again, as its redelivery is, and once more, as a duplicate delivery is. The
counts must come out exact, the batch finished, and the callbacks queued: once, except
when the death fell between pushing them and marking them pushed, the one gap that
makes them at least once.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from datetime import timedelta

import pytest

from rainier_queue.batchstate import Callback, Member, Outcome, callback_id
from rainier_queue.cache import Cache
from rainier_queue.drivers.cached_batches import CacheBatches
from rainier_queue.envelope import QueuedJob

from ..contract.jobs import a_job


class Died(Exception):
    """The worker died here: nothing after this write happens."""


class Dying(Cache):
    """A real store, through which a worker makes `writes` writes and then dies."""

    def __init__(self, store: Cache, writes: int | None) -> None:
        self.store = store
        self.writes = writes
        """Writes left before the death; None: it never dies."""
        self.made = 0
        """Writes made so far (the broker's push among them)."""
        self.swaps = 0
        """Compare-and-sets made so far."""

    def write(self) -> None:
        self.made += 1
        if self.writes is not None:
            if self.writes == 0:
                raise Died
            self.writes -= 1

    @property
    def is_shared(self) -> bool:
        return self.store.is_shared

    async def get(self, key: str) -> bytes | None:
        return await self.store.get(key)

    async def put(self, key: str, value: bytes, ttl: timedelta | None = None) -> None:
        self.write()
        await self.store.put(key, value, ttl)

    async def add(self, key: str, value: bytes, ttl: timedelta | None = None) -> bool:
        self.write()
        return await self.store.add(key, value, ttl)

    async def replace_if(
        self, key: str, expected: bytes, value: bytes, ttl: timedelta | None = None
    ) -> bool:
        self.write()
        self.swaps += 1
        return await self.store.replace_if(key, expected, value, ttl)

    async def forget(self, key: str) -> bool:
        self.write()
        return await self.store.forget(key)

    async def forget_if(self, key: str, expected: bytes) -> bool:
        self.write()
        return await self.store.forget_if(key, expected)

    async def increment(self, key: str, by: int = 1, ttl: timedelta | None = None) -> int:
        self.write()
        return await self.store.increment(key, by, ttl)


class Worker:
    """One worker's view: its batches over a store it may die in, pushing to `pushed`."""

    def __init__(self, store: Cache, prefix: str, pushed: list[QueuedJob], writes: int | None):
        self.dying = Dying(store, writes)
        self.pushed = pushed
        self.batches = CacheBatches(self.dying, prefix, self.push)

    async def push(self, jobs: Sequence[QueuedJob]) -> None:
        self.dying.write()  # producing the callbacks is a write too, to the broker
        self.pushed.extend(jobs)


PUSH_GAP = 2
"""Dying with this many writes made falls between the push and marking it pushed."""

WRITES = 5
"""A finishing record's writes; one that does not finish the batch makes 3 (no push, no mark)."""

GAPS = [("first", after) for after in range(3)] + [("last", after) for after in range(WRITES)]


@pytest.mark.parametrize(("dies", "after"), GAPS)
async def test_a_worker_dying_between_any_two_writes_loses_no_count_and_no_callback(
    cache: Cache, dies: str, after: int
) -> None:
    prefix = f"t-{dies}-{after}:"
    pushed: list[QueuedJob] = []
    healthy = Worker(cache, prefix, pushed, None).batches
    called = a_job(name="batch-called", payload={"kind": "then"})
    then = Callback.of("then", called.with_changes(id=callback_id("b", "then")))
    await healthy.open_batch("b", 2, [then])
    one = Member("b", ("default",))
    jobs = ["job-1", "job-2"]
    if dies == "last":
        await healthy.record_in_batch(one, "job-1", Outcome.SUCCEEDED)
        jobs = ["job-2"]

    with pytest.raises(Died):
        await Worker(cache, prefix, pushed, after).batches.record_in_batch(
            one, jobs[0], Outcome.SUCCEEDED
        )
    for job_id in [jobs[0], *jobs, jobs[-1]]:  # its redelivery, the rest, a duplicate
        await healthy.record_in_batch(one, job_id, Outcome.SUCCEEDED)

    progress = await healthy.batch_progress("b")
    assert progress is not None
    assert (progress.succeeded, progress.failed, progress.pending) == (2, 0, 0)
    assert progress.finished
    assert progress.fired() == ("then",)
    assert {job.id for job in pushed} == {"b.then"}
    twice = dies == "last" and after == PUSH_GAP
    assert len(pushed) == (2 if twice else 1), "at least once, and twice only in that gap"


async def test_the_writes_counted_are_all_a_record_makes(cache: Cache) -> None:
    """The test above dies in every gap: a finishing record makes exactly `WRITES` writes."""
    pushed: list[QueuedJob] = []
    worker = Worker(cache, "count:", pushed, None)
    called = a_job(name="batch-called", payload={"kind": "finally"})
    await worker.batches.open_batch("b", 1, [Callback.of("finally", called)])
    worker.dying.writes = WRITES
    await worker.batches.record_in_batch(Member("b", ()), "job-1", Outcome.FAILED)
    assert worker.dying.writes == 0
    assert len(pushed) == 1


async def test_a_batch_id_is_opened_once(cache: Cache) -> None:
    batches = CacheBatches(cache, "twice:", _nowhere)
    await batches.open_batch("b", 1, [])
    with pytest.raises(ValueError, match="exists already"):
        await batches.open_batch("b", 1, [])
    assert await batches.record_in_batch(Member("other", ()), "j", Outcome.SUCCEEDED) is None


def _then(kind: str = "then") -> Callback:
    called = a_job(name="batch-called", payload={"kind": kind})
    return Callback.of(kind, called.with_changes(id=callback_id("b", kind)))


async def _journal(cache: Cache, prefix: str) -> list[str]:
    raw = await cache.get(f"{prefix}batch:b:state")
    assert raw is not None
    journal: list[str] = json.loads(raw)["j"]
    return journal


async def test_many_records_of_one_batch_at_once_are_counted_together_and_exactly(
    cache: Cache,
) -> None:
    """A process's slots finishing one batch's jobs at once: each job counted once, one
    finisher pushing once, every caller told, the journal left empty, and fewer
    compare-and-sets than jobs (the records were grouped, not raced)."""
    pushed: list[QueuedJob] = []
    worker = Worker(cache, "many:", pushed, None)
    total = 40
    await worker.batches.open_batch("b", total, [_then(), _then("finally")])
    one = Member("b", ("default",))
    outcomes = [Outcome.FAILED if n % 5 == 0 else Outcome.SUCCEEDED for n in range(total)]
    answers = await asyncio.gather(
        *(worker.batches.record_in_batch(one, f"job-{n}", o) for n, o in enumerate(outcomes)),
        worker.batches.record_in_batch(one, "job-3", Outcome.SUCCEEDED),  # a duplicate
    )
    assert all(answer is not None for answer in answers)
    progress = await worker.batches.batch_progress("b")
    assert progress is not None
    assert (progress.succeeded, progress.failed, progress.pending) == (32, 8, 0)
    assert progress.finished
    assert [job.id for job in pushed] == ["b.finally"]
    assert await _journal(cache, "many:") == []
    assert worker.dying.swaps < total, "a compare-and-set per job or more: not grouped"


async def test_groups_of_two_processes_racing_on_one_batch_count_exactly(cache: Cache) -> None:
    """Two processes (two `CacheBatches` on one store) record one batch's jobs at once, in
    groups that race each other's compare-and-sets; some jobs are recorded by both (a
    duplicate delivery). Each job is counted once and the callback pushed once."""
    pushed: list[QueuedJob] = []
    one, other = (Worker(cache, "race:", pushed, None).batches for _ in range(2))
    total = 30
    await one.open_batch("b", total, [_then()])
    member = Member("b", ("default",))
    records = [
        (one if n % 2 else other).record_in_batch(member, f"job-{n}", Outcome.SUCCEEDED)
        for n in range(total)
    ] + [other.record_in_batch(member, f"job-{n}", Outcome.SUCCEEDED) for n in range(1, 9, 2)]
    await asyncio.gather(*records)
    progress = await one.batch_progress("b")
    assert progress is not None
    assert (progress.succeeded, progress.pending) == (total, 0)
    assert progress.finished
    assert [job.id for job in pushed] == ["b.then"]
    assert await _journal(cache, "race:") == []


async def test_a_group_finishes_a_member_found_in_the_journal_and_skips_one_done(
    cache: Cache,
) -> None:
    """In one group: job-1 was counted by a run that died after counting (it is in the
    journal), job-0 was recorded whole before; both are recorded again beside two new
    jobs. Only the new ones are counted, and the group makes one write of each kind:
    count, push, mark pushed, a marker each for the three not done, leave the journal."""
    pushed: list[QueuedJob] = []
    worker = Worker(cache, "group:", pushed, None)
    await worker.batches.open_batch("b", 4, [_then()])
    one = Member("b", ("default",))
    await worker.batches.record_in_batch(one, "job-0", Outcome.SUCCEEDED)
    with pytest.raises(Died):
        await Worker(cache, "group:", pushed, 1).batches.record_in_batch(
            one, "job-1", Outcome.SUCCEEDED
        )
    assert await _journal(cache, "group:") == ["job-1"]
    worker.dying.made = 0

    answers = await asyncio.gather(
        *(
            worker.batches.record_in_batch(one, job_id, Outcome.SUCCEEDED)
            for job_id in ["job-1", "job-0", "job-2", "job-3"]
        )
    )
    assert worker.dying.made == 7
    assert all(a is not None and a.finished and a.succeeded == 4 for a in answers)
    progress = await worker.batches.batch_progress("b")
    assert progress is not None
    assert (progress.succeeded, progress.pending) == (4, 0)
    assert [job.id for job in pushed] == ["b.then"]
    assert await _journal(cache, "group:") == []


@pytest.mark.parametrize("after", range(WRITES + 2))
async def test_an_error_in_a_groups_writes_reaches_every_member(cache: Cache, after: int) -> None:
    """A group of three dies after `after` of its writes (all of them when `after` is 7):
    each of its callers gets the error, so none would acknowledge its job; their
    redeliveries then count exactly and push the callback."""
    pushed: list[QueuedJob] = []
    healthy = Worker(cache, "fail:", pushed, None).batches
    await healthy.open_batch("b", 3, [_then()])
    one = Member("b", ("default",))
    dying = Worker(cache, "fail:", pushed, after).batches
    jobs = ["job-1", "job-2", "job-3"]
    answers = await asyncio.gather(
        *(dying.record_in_batch(one, j, Outcome.SUCCEEDED) for j in jobs),
        return_exceptions=True,
    )
    assert all(isinstance(answer, Died) for answer in answers), answers
    for job_id in jobs:
        await healthy.record_in_batch(one, job_id, Outcome.SUCCEEDED)
    progress = await healthy.batch_progress("b")
    assert progress is not None
    assert (progress.succeeded, progress.pending) == (3, 0)
    assert {job.id for job in pushed} == {"b.then"}
    assert await _journal(cache, "fail:") == []


async def _nowhere(jobs: Sequence[QueuedJob]) -> None:
    raise AssertionError("nothing to push")
