# SPDX-License-Identifier: MIT
"""Leases: they lapse and are reclaimed, renew extends them, stale settles are refused."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from rainier_queue.errors import ConfigurationError, LeaseLost
from rainier_queue.queue import Queue

from .conftest import SHORT_LEASE, OpenQueue
from .jobs import a_job, reserve_eventually, reserve_one

LAPSE = SHORT_LEASE.total_seconds() * 1.5


async def test_a_lapsed_lease_is_reclaimed_by_the_next_reserve_and_counts_an_attempt(
    short_lease_queue: Queue,
) -> None:
    queue = short_lease_queue
    await queue.push(a_job())
    first = await reserve_one(queue)
    await asyncio.sleep(LAPSE)

    got = await queue.reserve("default")

    if queue.capabilities.reclaims_lapsed_leases:
        assert [r.job.id for r in got] == [first.job.id]
        assert got[0].job.attempts == 2, "a delivery to a worker that went quiet still counts"
    else:
        assert got == [], f"{queue.name} says it never reclaims a reservation"


async def test_a_settle_with_a_stale_reservation_is_refused_and_changes_nothing(
    short_lease_queue: Queue,
) -> None:
    queue = short_lease_queue
    if not queue.capabilities.reclaims_lapsed_leases:
        pytest.skip(f"{queue.name} never reclaims, so no reservation goes stale")
    await queue.push(a_job())
    stale = await reserve_one(queue)
    await asyncio.sleep(LAPSE)
    current = await reserve_eventually(queue)

    with pytest.raises(LeaseLost):
        await queue.acknowledge(stale)
    with pytest.raises(LeaseLost):
        await queue.release(stale)
    with pytest.raises(LeaseLost):
        await queue.fail(stale, "late")
    with pytest.raises(LeaseLost):
        await queue.renew(stale)

    # The current holder is untouched: its own acknowledge works, and the job is gone.
    await queue.acknowledge(current)
    await asyncio.sleep(LAPSE)
    assert await queue.reserve("default") == []


async def test_renewing_a_lease_keeps_the_job_from_a_second_worker(
    open_queue: OpenQueue,
) -> None:
    # A lease of its own, long beside a renewal's round trip (Kafka's is the lock
    # store's compare-and-set): a renewal late by a whole short lease on a loaded
    # machine would fail the driver for the machine's sake.
    lease = timedelta(seconds=1)
    queue = open_queue(lease=lease)
    await queue.push(a_job())
    held = await reserve_one(queue)

    for _ in range(4):  # four renewals span two lease lengths
        await asyncio.sleep(lease.total_seconds() / 2)
        await queue.renew(held)
    other = await queue.reserve("default")

    if queue.capabilities.renews_leases:
        assert other == [], "a renewed lease must not lapse"
        await queue.acknowledge(held)
    elif queue.capabilities.reclaims_lapsed_leases:
        assert len(other) == 1, f"{queue.name} says renew does nothing, so the lease lapsed"


async def test_an_acknowledged_job_never_comes_back(short_lease_queue: Queue) -> None:
    queue = short_lease_queue
    await queue.push(a_job())
    reservation = await reserve_one(queue)

    await queue.acknowledge(reservation)
    await asyncio.sleep(LAPSE)

    assert await queue.reserve("default") == []
    assert await queue.size("default") == 0


async def test_acknowledging_twice_is_refused(queue: Queue) -> None:
    await queue.push(a_job())
    reservation = await reserve_one(queue)
    await queue.acknowledge(reservation)

    with pytest.raises(LeaseLost):
        await queue.acknowledge(reservation)


async def test_acknowledge_many_settles_each_and_reports_the_stale_one(queue: Queue) -> None:
    names = ["default"] * 3
    if not queue.capabilities.reserved_job_steps_aside:
        names = ["default", "a", "b"]  # a held job blocks its partition: one per queue
    for i, name in enumerate(names):
        await queue.push(a_job(queue=name, payload=i))
    batch = [r for name in dict.fromkeys(names) for r in await queue.reserve(name, limit=3)]
    await queue.acknowledge(batch[1])

    results = await queue.acknowledge_many(batch)

    assert results[0] is None
    assert results[2] is None
    assert isinstance(results[1], LeaseLost)
    for name in set(names):
        assert await queue.size(name) == 0


def test_a_lease_of_zero_is_refused_when_the_queue_is_opened(open_queue: OpenQueue) -> None:
    # A lease that lapses at once would hand every running job to another worker.
    with pytest.raises(ConfigurationError, match="`lease` must be longer than zero"):
        open_queue(lease=timedelta(0))
