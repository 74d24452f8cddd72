# SPDX-License-Identifier: MIT
"""Retries as records: deliveries are counted per offset, and a released job is a new record.

A log cannot hand one record out again or hold it back. An unacknowledged
record is read again from the cursor once its lease lapses, so the driver
counts its deliveries per offset, and a job that kills its worker before any
settle still runs out of attempts. A released job is produced again at the end of its topic with a
`retry-of` header, carrying its attempts, after which only the retry can be
settled; a delayed retry blocks its partition until it is due, because a log
has nowhere for it to step aside; and a job handed back unrun keeps its place
and its attempt.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest

from rainier_queue.drivers.kafka import KafkaPosition
from rainier_queue.drivers.kafka.names import attempt_number
from rainier_queue.errors import LeaseLost

from ..kafka_broker import KafkaBroker
from .conftest import SHORT, Opener, a_job, records_of

# -- without a broker --------------------------------------------------------------------


def test_an_attempt_counts_what_the_record_carries_and_this_offsets_deliveries() -> None:
    assert attempt_number(0, 1) == 1, "a fresh job, delivered once"
    assert attempt_number(0, 2) == 2, "the same record again, after its worker died"
    assert attempt_number(1, 1) == 2, "a retry: a new record carrying one attempt"
    assert attempt_number(2, 1) == 3


# -- against the broker ------------------------------------------------------------------


async def test_an_unacknowledged_job_is_handed_out_again_and_counted(
    topics: Any, open_kafka: Opener
) -> None:
    queue = open_kafka(lease=SHORT)
    await queue.push(a_job())
    [first] = await queue.reserve("default")

    await asyncio.sleep(SHORT.total_seconds() * 1.5)
    [second] = await queue.reserve("default")

    assert second.job.id == first.job.id
    assert second.job.attempts == 2
    with pytest.raises(LeaseLost):
        await queue.acknowledge(first)


async def test_a_job_that_never_settles_uses_up_its_attempts_by_deliveries_alone(
    topics: Any, open_kafka: Opener
) -> None:
    # A poison pill kills its worker before any settle; only the per-offset count notices.
    queue = open_kafka(lease=SHORT)
    await queue.push(a_job(max_attempts=3))
    seen = []
    for _ in range(3):
        [got] = await queue.reserve("default")
        seen.append(got.job.attempts)
        await asyncio.sleep(SHORT.total_seconds() * 1.5)

    assert seen == [1, 2, 3]
    assert got.job.is_exhausted, "the worker now fails it instead of running it again"


async def test_a_released_job_is_a_new_record_that_keeps_its_attempts(
    tansu: KafkaBroker, topics: Any, open_kafka: Opener, prefix: str
) -> None:
    queue = open_kafka()
    await queue.push(a_job())
    [first] = await queue.reserve("default")

    await queue.release(first)
    [again] = await queue.reserve("default")

    assert (again.job.id, again.job.attempts) == (first.job.id, 2)
    assert isinstance(again.handle, KafkaPosition)
    assert isinstance(first.handle, KafkaPosition)
    assert again.handle.offset > first.handle.offset
    records = await records_of(tansu, prefix + "default")
    retry = next(r for r in records if r.offset == again.handle.offset)
    assert dict(retry.headers)["retry-of"] == str(first.handle).encode()


async def test_after_a_release_only_the_retry_can_be_settled(
    topics: Any, open_kafka: Opener
) -> None:
    queue = open_kafka()
    await queue.push(a_job())
    [first] = await queue.reserve("default")
    await queue.release(first)
    [retry] = await queue.reserve("default")

    with pytest.raises(LeaseLost):
        await queue.acknowledge(first)
    await queue.acknowledge(retry)
    assert await queue.size("default") == 0


async def test_a_job_released_with_a_delay_blocks_its_partition_until_due(
    topics: Any, open_kafka: Opener
) -> None:
    queue = open_kafka()
    await queue.push(a_job().with_changes(unique_key="k"))
    [first] = await queue.reserve("default")
    await queue.release(first, delay=timedelta(seconds=60))
    await queue.push(a_job().with_changes(unique_key="k"))  # behind it, on the same partition

    assert await queue.reserve("default", limit=5) == []
    assert await queue.size("default") == 2, "the delayed job and the one behind it"


async def test_a_job_handed_back_unrun_keeps_its_place_and_its_attempt(
    topics: Any, open_kafka: Opener
) -> None:
    queue = open_kafka()
    first, second = (a_job().with_changes(unique_key="k") for _ in range(2))
    await queue.push(first)
    await queue.push(second)
    [held] = await queue.reserve("default")

    await queue.release(held, count_attempt=False)
    [again] = await queue.reserve("default")

    assert (again.job.id, again.job.attempts) == (first.id, 1)
    assert again.handle == held.handle, "the same record, still ahead of the second job"
