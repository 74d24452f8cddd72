# SPDX-License-Identifier: MIT
"""A batch of jobs packed at once: shared clock and randomness, each job still checked."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest

from rainier_queue import Job, JobContext, PayloadError, QueueManager
from rainier_queue.cache.memory import MemoryCache
from rainier_queue.connections import open_queue
from rainier_queue.envelope import QueuedJob, new_job_ids
from rainier_queue.locks import LockManager
from rainier_queue.packing import DEFAULTS, DispatchOptions, build_envelopes

UUID7 = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")


class Count(Job):
    name = "bulk-count"
    n: int

    async def handle(self, ctx: JobContext) -> None:
        pass


class Routed(Job):
    name = "bulk-routed"
    target: str

    def queue(self) -> str:  # type: ignore[override]
        return self.target

    async def handle(self, ctx: JobContext) -> None:
        pass


def test_a_batch_shares_one_creation_time_and_gets_distinct_version_7_ids() -> None:
    envelopes = build_envelopes([(Count(n=n), DEFAULTS) for n in range(2000)])

    assert len({e.id for e in envelopes}) == 2000
    assert all(UUID7.match(e.id) for e in envelopes)
    assert len({e.created_at for e in envelopes}) == 1
    assert [e.payload for e in envelopes[:2]] == [{"n": 0}, {"n": 1}]


def test_ids_minted_together_use_all_their_random_bits() -> None:
    ids = new_job_ids(4000)
    # The variant digit takes two random bits, the rest four each: all values show up.
    assert {i[19] for i in ids} == set("89ab")
    assert {i[15] for i in ids} == set("0123456789abcdef")


def test_options_still_apply_per_job_in_a_batch() -> None:
    later = DispatchOptions(delay=timedelta(minutes=5), tries=7, headers={"k": "v"})
    plain, delayed = build_envelopes([(Count(n=1), DEFAULTS), (Count(n=2), later)])

    assert delayed.available_at - plain.available_at == timedelta(minutes=5)
    assert (plain.max_attempts, delayed.max_attempts) == (3, 7)
    assert (dict(plain.headers), dict(delayed.headers)) == ({}, {"k": "v"})
    assert plain.attempts == 0
    assert plain.unique_key is None
    assert plain == QueuedJob(**{f: getattr(plain, f) for f in QueuedJob.__dataclass_fields__})


def test_every_queue_name_in_a_batch_is_checked_and_a_bad_one_refused() -> None:
    with pytest.raises(ValueError, match="control characters"):
        build_envelopes([(Routed(target="fine"), DEFAULTS), (Routed(target="bad\n"), DEFAULTS)])


async def test_a_bad_job_anywhere_in_dispatch_many_leaves_nothing_pushed() -> None:
    manager = QueueManager(open_queue("memory://"))
    good = [Count(n=n) for n in range(3)]
    bad = Count(n=4)
    bad.n = "four"  # type: ignore[assignment]

    with pytest.raises(PayloadError, match="`n`"):
        await manager.dispatch_many([*good, bad])
    assert await manager.queue.size("default") == 0
    assert len(await manager.dispatch_many(good)) == 3


async def test_a_job_class_that_defines_unique_id_is_still_deduplicated_in_bulk() -> None:
    class Once(Count):
        name = "bulk-once"

        def unique_id(self) -> str:
            return str(self.n)

    manager = QueueManager(open_queue("memory://"), locks=LockManager(MemoryCache()))
    ids = await manager.dispatch_many([Once(n=1), Count(n=1), Once(n=1)])

    assert ids[0] is not None
    assert ids[1] is not None
    assert ids[2] is None
    assert await manager.queue.size("default") == 2
