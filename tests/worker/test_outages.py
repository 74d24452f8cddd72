# SPDX-License-Identifier: MIT
"""Broker outages: ridden out with backoff, given up on after too many in a row."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from rainier_queue.errors import BrokerUnavailable

from .faults import AckOutage, Outage, WaitOutage, failing_for_ever
from .jobs import Journal, Note, eventually, push, quick, worker_for


async def test_a_broker_outage_is_ridden_out_and_the_job_then_runs() -> None:
    queue = Outage([True, True, True])
    await push(queue, Note(text="after the outage"))
    journal = Journal()

    stats = await worker_for(queue, journal, quick(stop_when_empty=True)).run()

    assert (stats.broker_errors, stats.processed) == (3, 1)
    assert journal.ran == ["after the outage"]
    assert await queue.size("default") == 0


async def test_the_worker_gives_up_after_max_consecutive_errors_with_the_brokers_error() -> None:
    queue = Outage(failing_for_ever())
    worker = worker_for(queue, Journal(), quick(max_consecutive_errors=4))

    with pytest.raises(BrokerUnavailable, match="the broker is down"):
        await worker.run()

    assert queue.reserve_calls == 4
    assert worker.stats.broker_errors == 4


async def test_only_an_unbroken_run_of_errors_ends_the_worker() -> None:
    queue = Outage([True, True, False, True, True])
    await push(queue, Note(text="between outages"))

    stats = await worker_for(
        queue, Journal(), quick(max_consecutive_errors=3, stop_when_empty=True)
    ).run()

    assert (stats.broker_errors, stats.processed) == (4, 1)


async def test_a_stop_during_a_broker_backoff_ends_the_run() -> None:
    queue = Outage(failing_for_ever())
    options = quick(sleep=timedelta(seconds=30), max_error_backoff=timedelta(seconds=30))
    worker = worker_for(queue, Journal(), options)
    running = asyncio.create_task(worker.run())

    await eventually(lambda: worker.stats.broker_errors == 1, "the first broker error")
    worker.stop()
    stats = await asyncio.wait_for(running, 5)

    assert stats.broker_errors == 1


async def test_an_acknowledgement_the_broker_refused_is_tried_again() -> None:
    queue = AckOutage(failures=2)
    await push(queue, Note(text="done once"))
    journal = Journal()

    stats = await worker_for(queue, journal, quick(stop_when_empty=True)).run()

    assert (stats.broker_errors, stats.processed) == (2, 1)
    assert journal.ran == ["done once"], "the job is not run again while its result waits"
    assert queue.reserved_count() == 0


async def test_a_broker_that_never_takes_the_acknowledgement_ends_the_run_with_its_error() -> None:
    queue = AckOutage(failures=1_000)
    await push(queue, Note(text="done, never recorded"))
    worker = worker_for(queue, Journal(), quick(max_consecutive_errors=3, stop_when_empty=True))

    with pytest.raises(BrokerUnavailable):
        await worker.run()

    assert worker.stats.broker_errors == 3
    assert worker.stats.processed == 0
    assert queue.reserved_count() == 1, "left reserved: it runs again once its lease lapses"


async def test_an_idle_worker_rides_out_a_broker_that_fails_while_it_waits_for_work() -> None:
    queue = WaitOutage(failures=3)
    journal = Journal()
    worker = worker_for(queue, journal, quick(max_consecutive_errors=10))
    running = asyncio.create_task(worker.run())

    await eventually(lambda: queue.failures == 0, "the three failed waits")
    await push(queue, Note(text="after the outage"))
    await eventually(lambda: journal.ran == ["after the outage"], "the job pushed after it")
    worker.stop()
    stats = await running

    assert stats.broker_errors == 3
    assert stats.processed == 1


async def test_one_blip_that_fails_every_running_jobs_acknowledgement_counts_once() -> None:
    # 24 jobs finish in the moment the broker blips: 24 failed acknowledgements,
    # one outage. Counted one by one, they passed the limit of 20 and ended the worker.
    queue = AckOutage(failures=24)
    for n in range(24):
        await push(queue, Note(text=f"job {n}"))
    journal = Journal()
    options = quick(concurrency=24, max_consecutive_errors=20, stop_when_empty=True)

    stats = await worker_for(queue, journal, options).run()

    assert stats.processed == 24
    assert sorted(journal.ran) == sorted(f"job {n}" for n in range(24)), "each ran once"
    assert queue.reserved_count() == 0
