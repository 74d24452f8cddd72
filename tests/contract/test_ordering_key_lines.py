# SPDX-License-Identifier: MIT
"""Ordering keys where a key's line meets the rest of a job's life: a lapsed lease, a stale
settle, a job dispatched with a delay, the failed store, `size` and `clear`. Each holds on
every driver that says it keeps ordering keys; the drivers that refuse them are held to
the refusal in test_ordering_keys.py."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path

import pytest

from rainier_queue._clock import utcnow
from rainier_queue.errors import LeaseLost
from rainier_queue.queue import FailedJobStore, Queue

from .backends import Backend
from .conftest import SHORT_LEASE, OpenQueue
from .test_ordering_keys import keyed, none_more, take

LAPSE = SHORT_LEASE.total_seconds() * 1.5


def ordered(queue: Queue) -> Queue:
    if not queue.capabilities.ordering_keys:
        pytest.skip(f"{queue.name} keeps no ordering keys (its refusal is tested beside this)")
    return queue


@pytest.fixture
def ordered_queue(backend: Backend, tmp_path: Path, namespace: str, queue: Queue) -> Queue:
    backend.setup(tmp_path, namespace, ["default"])
    return ordered(queue)


def keys_side_by_side(queue: Queue) -> None:
    """Skip where one partition hands out one job at a time, whatever its key."""
    if not queue.capabilities.reserved_job_steps_aside:
        pytest.skip(
            f"{queue.name} hands out one job at a time per partition: two keys that hash to "
            "one partition share its line, and a job without a key waits in it too "
            "(docs/flow-control.md)"
        )


@pytest.fixture
def short_lease_ordered(
    backend: Backend, tmp_path: Path, namespace: str, open_queue: OpenQueue
) -> Queue:
    backend.setup(tmp_path, namespace, ["default"])
    queue = ordered(open_queue(lease=SHORT_LEASE))
    if not queue.capabilities.reclaims_lapsed_leases:
        pytest.skip(f"{queue.name} never reclaims a reservation")
    return queue


async def test_a_keyed_job_whose_lease_lapsed_still_holds_its_key_when_reclaimed(
    short_lease_ordered: Queue,
) -> None:
    queue = short_lease_ordered
    first, second = keyed("crashed", "account-1"), keyed("after", "account-1")
    await queue.push(first)
    await queue.push(second)
    (dead,) = await take(queue, 1)
    assert dead.job.id == first.id
    await asyncio.sleep(LAPSE)  # its worker died: nothing renews the lease

    (again,) = await take(queue, 1)

    assert again.job.id == first.id, "the lapsed job came back before the next of its key"
    assert await none_more(queue) == [], "the next of the key still waits behind it"
    with pytest.raises(LeaseLost):
        await queue.acknowledge(dead)
    assert await none_more(queue) == [], "a stale settle let nothing of the key go"
    await queue.acknowledge(again)
    (after,) = await take(queue, 1)
    assert after.job.id == second.id


async def test_a_keyed_job_dispatched_with_a_delay_holds_its_key_until_it_has_run(
    ordered_queue: Queue,
) -> None:
    keys_side_by_side(ordered_queue)
    later = keyed("later", "account-2")
    later = later.with_changes(available_at=utcnow() + timedelta(milliseconds=500))
    now = keyed("now", "account-2")
    plain = keyed("plain", None)
    await ordered_queue.push(later)
    await ordered_queue.push(now)
    await ordered_queue.push(plain)

    came: list[str] = []
    while later.id not in came:  # the plain job at once, the delayed one once due
        got = await take(ordered_queue, 1)
        came += [r.job.id for r in got]
        assert now.id not in came, "the keyed job due now waits behind the delayed one"
        if later.id in came:
            assert await none_more(ordered_queue) == [], "and still while that one runs"
        for reservation in got:
            await ordered_queue.acknowledge(reservation)
    assert plain.id in came
    (last,) = await take(ordered_queue, 1)
    assert last.job.id == now.id


async def test_size_counts_the_jobs_held_behind_their_key(ordered_queue: Queue) -> None:
    if not ordered_queue.capabilities.deferred:
        pytest.skip(f"{ordered_queue.name} cannot count what waits (`size` says so)")
    keys_side_by_side(ordered_queue)
    for n in range(3):
        await ordered_queue.push(keyed(f"step {n}", "account-3"))
    await ordered_queue.push(keyed("plain", None))

    assert await ordered_queue.size("default") == 4
    got = await take(ordered_queue, 2)
    assert await ordered_queue.size("default") == 2, "two held jobs wait; two are running"
    for reservation in got:
        await ordered_queue.acknowledge(reservation)


async def test_a_failed_job_retried_joins_the_end_of_its_keys_line(
    ordered_queue: Queue,
) -> None:
    if not isinstance(ordered_queue, FailedJobStore):
        pytest.skip(f"{ordered_queue.name} keeps no failed store to retry from")
    first, second = keyed("failed once", "account-4"), keyed("next", "account-4")
    await ordered_queue.push(first)
    await ordered_queue.push(second)
    (attempt,) = await take(ordered_queue, 1)
    await ordered_queue.fail(attempt, "it could not be done")

    assert await ordered_queue.retry_failed(first.id) is True

    (now,) = await take(ordered_queue, 1)
    assert now.job.id == second.id, "the retry went to the end of its key's line"
    assert await none_more(ordered_queue) == []
    await ordered_queue.acknowledge(now)
    (retried,) = await take(ordered_queue, 1)
    assert retried.job.id == first.id


async def test_clearing_a_queue_lets_a_key_go_unless_its_job_runs(ordered_queue: Queue) -> None:
    if not ordered_queue.capabilities.deferred:
        pytest.skip(f"{ordered_queue.name} cannot clear a queue")
    keys_side_by_side(ordered_queue)
    running, behind = keyed("running", "busy-key"), keyed("behind", "busy-key")
    await ordered_queue.push(running)
    await ordered_queue.push(behind)
    (held,) = await take(ordered_queue, 1)
    assert held.job.id == running.id
    await ordered_queue.push(keyed("idle 1", "idle-key"))
    await ordered_queue.push(keyed("idle 2", "idle-key"))

    await ordered_queue.clear("default")

    fresh_idle, fresh_busy = keyed("fresh", "idle-key"), keyed("fresh", "busy-key")
    await ordered_queue.push(fresh_idle)
    await ordered_queue.push(fresh_busy)
    (first,) = await take(ordered_queue, 1)
    assert first.job.id == fresh_idle.id, "a key whose jobs were cleared is free again"
    assert await none_more(ordered_queue) == [], "a key whose job runs is still held by it"
    await ordered_queue.acknowledge(held)
    (last,) = await take(ordered_queue, 1)
    assert last.job.id == fresh_busy.id
