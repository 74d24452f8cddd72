# SPDX-License-Identifier: MIT
"""Each declared capability, tested both ways, so a flag cannot lie."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from rainier_queue import _clock
from rainier_queue.errors import NotProvisioned, UnsupportedOperation
from rainier_queue.queue import Provisionable, Queue, TransactionalEnqueue

from .backends import Backend
from .conftest import OpenQueue
from .jobs import a_job

PUSH_FROM_ANOTHER_PROCESS = """
import asyncio, sys
from rainier_queue.connections import open_queue
from rainier_queue.envelope import QueuedJob

async def main():
    queue = open_queue(sys.argv[1])
    await queue.push(QueuedJob.create("from-elsewhere", {"pid": 1}))
    await queue.aclose()

asyncio.run(main())
"""


async def test_jobs_survive_a_restart_exactly_when_the_driver_says_so(
    open_queue: OpenQueue,
) -> None:
    first = open_queue()
    await first.push(a_job(payload="persisted"))
    await first.aclose()

    reopened = open_queue()
    got = await reopened.reserve("default")

    if first.capabilities.survives_restart:
        assert [r.job.payload for r in got] == ["persisted"]
    else:
        assert got == [], f"{first.name} says it keeps nothing across a restart"


async def test_another_process_sees_the_jobs_exactly_when_the_driver_says_so(
    backend: Backend, tmp_path: Path, namespace: str, queue: Queue
) -> None:
    url = backend.url(tmp_path, namespace)
    await queue.size("default")  # let the driver create what it needs first
    await asyncio.to_thread(
        subprocess.run, [sys.executable, "-c", PUSH_FROM_ANOTHER_PROCESS, url], check=True
    )

    got = await queue.reserve("default")

    if queue.capabilities.shared_between_processes:
        assert [r.job.name for r in got] == ["from-elsewhere"]
    else:
        assert got == [], f"{queue.name} says other processes cannot see its jobs"


async def test_a_raw_push_is_stored_only_where_the_driver_takes_raw_bodies(queue: Queue) -> None:
    if queue.capabilities.raw_push:
        await queue.push_raw("default", '{"foreign": true}')
        assert await queue.size("default") == 1
    else:
        with pytest.raises(UnsupportedOperation, match=queue.name) as refused:
            await queue.push_raw("default", '{"foreign": true}')
        assert "  " not in str(refused.value), "the upstream spaced this message wrongly"
        assert await queue.size("default") == 0


async def test_a_deferred_driver_does_not_run_the_job_when_it_is_pushed(queue: Queue) -> None:
    # Nothing is registered, so a driver that ran the job inside push would fail here.
    assert queue.capabilities.deferred
    await queue.push(a_job(name="not-registered-anywhere"))
    assert await queue.size("default") == 1


async def test_a_driver_offers_transactional_enqueue_exactly_when_it_says_so(queue: Queue) -> None:
    # What a commit and a rollback do is tested per driver, with the driver's own
    # connection type; here the flag and the method must agree.
    offers = isinstance(queue, TransactionalEnqueue)

    assert offers == queue.capabilities.transactional_enqueue, (
        f"{queue.name} declares transactional_enqueue={queue.capabilities.transactional_enqueue}"
    )


async def test_a_reserved_job_holds_up_the_ones_behind_it_exactly_when_the_driver_says_so(
    queue: Queue,
) -> None:
    # One unique key, so that on a log both are records of the same partition.
    first = a_job(payload="first").with_changes(unique_key="k")
    second = a_job(payload="second").with_changes(unique_key="k")
    await queue.push(first)
    await queue.push(second)

    held = await queue.reserve("default", limit=2)

    if queue.capabilities.reserved_job_steps_aside:
        assert sorted(r.job.payload for r in held) == ["first", "second"]
    else:
        assert [r.job.payload for r in held] == ["first"], (
            f"{queue.name} says the job behind a held one waits for it to be settled"
        )
        assert await queue.reserve("default") == []
        await queue.acknowledge(held[0])
        assert [r.job.payload for r in await queue.reserve("default")] == ["second"]


def skew_clock(monkeypatch: pytest.MonkeyPatch, offset: timedelta) -> None:
    """Make this process's clock run `offset` off, everywhere the package reads it."""
    real = _clock.utcnow

    def skewed() -> datetime:
        return real() + offset

    for name, module in list(sys.modules.items()):
        if name.startswith("rainier_queue") and getattr(module, "utcnow", None) is real:
            monkeypatch.setattr(module, "utcnow", skewed)


async def test_a_producer_clock_that_runs_ahead_holds_jobs_back_exactly_when_the_driver_says(
    queue: Queue, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not queue.capabilities.shared_between_processes:
        pytest.skip(f"{queue.name} lives in one process: no producer has another clock")
    await queue.size("default")  # connect and create first, on the true clock
    with monkeypatch.context() as skewed:
        skew_clock(skewed, timedelta(hours=1))
        now_job = a_job(payload="now")
        await queue.push(now_job)
        later_job = a_job(payload="later", delay=timedelta(hours=1))
        await queue.push(later_job)

    got = await queue.reserve("default", limit=5)

    if queue.capabilities.due_on_server_clock:
        assert [r.job.id for r in got] == [now_job.id], (
            "due by the server's clock: the job without a delay is due now, the other in an hour"
        )
    else:
        assert got == [], f"{queue.name} dates a job by the clock that pushed it"


async def test_a_producer_clock_that_runs_behind_lets_jobs_out_early_exactly_when_the_driver_says(
    queue: Queue, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not queue.capabilities.shared_between_processes:
        pytest.skip(f"{queue.name} lives in one process: no producer has another clock")
    await queue.size("default")
    with monkeypatch.context() as skewed:
        skew_clock(skewed, -timedelta(hours=1))
        job = a_job(delay=timedelta(minutes=30))
        await queue.push(job)

    got = await queue.reserve("default", limit=5)

    if queue.capabilities.due_on_server_clock:
        assert got == [], "due in 30 minutes by the server's clock, whatever the producer's says"
    else:
        assert [r.job.id for r in got] == [job.id], f"{queue.name} dates a job by its producer"


async def test_a_push_to_a_queue_nothing_provisioned_is_taken_exactly_when_the_driver_says_so(
    queue: Queue,
) -> None:
    fresh = "never-provisioned"
    job = a_job(payload="first", queue=fresh)

    if queue.capabilities.push_creates_resources:
        await queue.push(job)
        assert [r.job.id for r in await queue.reserve(fresh)] == [job.id]
        return
    assert isinstance(queue, Provisionable), (
        f"{queue.name} refuses a push to a queue nothing provisioned, so it must provision"
    )
    with pytest.raises(NotProvisioned, match="rainier-queue provision") as refused:
        await queue.push(job)
    assert refused.value.queue == fresh
    await queue.provision([fresh])
    assert await queue.size(fresh) == 0, "the refused push stored nothing"
    await queue.push(job)
    assert [r.job.id for r in await queue.reserve(fresh)] == [job.id]


async def test_provisioning_leaves_nothing_for_the_check_to_find_and_nothing_to_do_again(
    queue: Queue,
) -> None:
    if not isinstance(queue, Provisionable):
        assert queue.capabilities.push_creates_resources
        pytest.skip(f"{queue.name} makes what a queue needs when it is first used")
    fresh = ["provisioned-here"]

    missing = await queue.check_provisioned(fresh)
    made = await queue.provision(fresh)

    assert missing, "a namespace nothing used yet lacks what its queues need"
    assert made, "provisioning said nothing of what it made"
    assert await queue.check_provisioned(fresh) == []
    assert await queue.provision(fresh) == []
