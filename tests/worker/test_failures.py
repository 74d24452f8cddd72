# SPDX-License-Identifier: MIT
"""What the worker does with a job that raised, timed out, asked again, or cannot run."""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta

import pytest

from rainier_queue import EventDispatcher, JobFailed, JobReleased, JobTimeout, QueuedJob
from rainier_queue.drivers.memory import MemoryQueue
from rainier_queue.worker import DeliveryExhausted

from .jobs import (
    AsksAgain,
    BrokenHook,
    Doomed,
    Exits,
    Flaky,
    Hangs,
    HangsForWorkersTimeout,
    Journal,
    Note,
    Patient,
    Recorder,
    Stubborn,
    eventually_async,
    push,
    quick,
    worker_for,
)


async def test_a_failed_attempt_is_released_after_the_jobs_own_backoff() -> None:
    queue = MemoryQueue()
    envelope = await push(queue, Flaky(fail_times=1))
    recorder = Recorder()

    stats = await worker_for(
        queue, Journal(), quick(stop_when_empty=True), events=EventDispatcher([recorder])
    ).run()

    assert stats.released == 1
    [released] = recorder.of(JobReleased)
    assert released.delay == timedelta(seconds=101), "Flaky.backoff(1) is 101 s"
    assert released.job.id == envelope.id
    assert "flaky failure 1" in released.error
    assert await queue.size("default") == 1
    assert await queue.reserve("default") == [], "the retry is not due for 101 s"


async def test_a_retry_asked_for_by_the_handler_uses_its_delay_and_logs_no_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    queue = MemoryQueue()
    await push(queue, AsksAgain())
    recorder = Recorder()
    caplog.set_level(logging.INFO, logger="rainier_queue")

    options = quick(stop_when_empty=True, drain_wait=timedelta(0))
    stats = await worker_for(queue, Journal(), options, events=EventDispatcher([recorder])).run()

    assert stats.released == 1
    [released] = recorder.of(JobReleased)
    assert released.delay == timedelta(seconds=77)
    warned = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert [m for m in warned if not m.startswith("stopping with work left")] == []


async def test_a_retry_asked_for_on_the_last_attempt_fails_the_job() -> None:
    queue = MemoryQueue()
    await push(queue, AsksAgain(), max_attempts=1)

    stats = await worker_for(queue, Journal(), quick(stop_when_empty=True)).run()

    assert (stats.released, stats.failed) == (0, 1)
    [failed] = await queue.failed_jobs()
    assert "asked to be retried" in failed.error
    assert "the partner API said later" in failed.error


async def test_the_last_attempt_goes_to_the_failed_store_and_runs_the_failed_hook() -> None:
    queue = MemoryQueue()
    envelope = await push(queue, Doomed())
    journal = Journal()
    recorder = Recorder()

    stats = await worker_for(
        queue, journal, quick(stop_when_empty=True), events=EventDispatcher([recorder])
    ).run()

    assert (stats.released, stats.failed, stats.processed) == (1, 1, 0)
    [failed] = await queue.failed_jobs()
    assert failed.job.id == envelope.id
    assert failed.error.startswith("ValueError: boom from doomed")
    assert "Traceback" in failed.error, "the failed store keeps the handler's traceback"
    [(label, attempt, error)] = journal.hooks
    assert (label, attempt) == ("doomed", 2)
    assert isinstance(error, ValueError)
    [event] = recorder.of(JobFailed)
    assert event.error == "ValueError: boom from doomed"
    assert stats.by_name == {"doomed": 1}


async def test_a_timeout_on_the_last_attempt_fails_the_job_and_runs_the_failed_hook() -> None:
    queue = MemoryQueue()
    await push(queue, Hangs())
    journal = Journal()

    stats = await worker_for(queue, journal, quick(stop_when_empty=True)).run()

    assert stats.failed == 1
    [failed] = await queue.failed_jobs()
    assert "exceeded its 0.05s timeout" in failed.error
    [(_, attempt, error)] = journal.hooks
    assert attempt == 1
    assert isinstance(error, JobTimeout)


async def test_a_jobs_own_timeout_beats_the_workers() -> None:
    queue = MemoryQueue()
    await push(queue, Patient())
    options = quick(stop_when_empty=True, timeout=timedelta(microseconds=1))

    stats = await worker_for(queue, Journal(), options).run()

    assert (stats.processed, stats.failed) == (1, 0)


async def test_the_workers_timeout_applies_to_a_job_without_its_own() -> None:
    queue = MemoryQueue()
    await push(queue, HangsForWorkersTimeout())
    options = quick(stop_when_empty=True, timeout=timedelta(milliseconds=20))

    stats = await worker_for(queue, Journal(), options).run()

    assert stats.failed == 1
    [failed] = await queue.failed_jobs()
    assert "0.02s timeout" in failed.error


async def test_an_unknown_job_name_is_failed_at_once_with_a_clear_error() -> None:
    queue = MemoryQueue()
    await queue.push(QueuedJob.create("not-deployed-yet", {}, max_attempts=5))
    recorder = Recorder()

    stats = await worker_for(
        queue, Journal(), quick(stop_when_empty=True), events=EventDispatcher([recorder])
    ).run()

    assert (stats.failed, stats.released) == (1, 0)
    [failed] = await queue.failed_jobs()
    assert failed.job.attempts == 1
    assert "no job is registered under the name `not-deployed-yet`" in failed.error
    assert "retry the job from the failed store" in failed.error
    assert len(recorder.of(JobFailed)) == 1


async def test_a_payload_that_no_longer_fits_the_job_is_failed_at_once() -> None:
    queue = MemoryQueue()
    await queue.push(QueuedJob.create("note", {"text": 42}, max_attempts=5))

    stats = await worker_for(queue, Journal(), quick(stop_when_empty=True)).run()

    assert (stats.failed, stats.released) == (1, 0)
    [failed] = await queue.failed_jobs()
    assert "diverged" in failed.error


async def test_a_job_whose_deliveries_died_with_their_workers_is_failed_with_the_reason() -> None:
    lease = timedelta(milliseconds=30)
    queue = MemoryQueue(lease=lease)
    envelope = await push(queue, Doomed(label="crashes its worker"), max_attempts=2)
    for _ in range(2):
        # A worker takes the job and dies without settling it.
        await abandon(queue)
    await asyncio.sleep(2 * lease.total_seconds())  # the last dead worker's lease lapses
    journal = Journal()

    stats = await worker_for(queue, journal, quick(stop_when_empty=True)).run()

    assert stats.failed == 1
    assert journal.attempts == [], "the handler is not run a third time"
    [failed] = await queue.failed_jobs()
    assert failed.job.id == envelope.id
    assert "delivered 3 times without being settled" in failed.error
    assert "a worker crashed or was killed while running it" in failed.error
    [(label, attempt, error)] = journal.hooks
    assert (label, attempt) == ("crashes its worker", 3)
    assert isinstance(error, DeliveryExhausted)


async def abandon(queue: MemoryQueue) -> None:
    """Reserve the job (waiting for an earlier lease to lapse) and never settle it."""
    await eventually_async(lambda: queue.reserve("default"), "the job to be handed out again")


async def test_a_handler_calling_sys_exit_fails_only_its_own_job() -> None:
    queue = MemoryQueue()
    await push(queue, Exits())
    await push(queue, Note(text="still served"))
    journal = Journal()

    stats = await worker_for(queue, journal, quick(stop_when_empty=True)).run()

    assert (stats.failed, stats.processed) == (1, 1)
    [failed] = await queue.failed_jobs()
    assert "sys.exit(3)" in failed.error
    assert journal.ran == ["still served"]


async def test_a_failed_hook_that_raises_is_logged_and_changes_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    queue = MemoryQueue()
    await push(queue, BrokenHook())
    await push(queue, Note(text="next"))

    stats = await worker_for(queue, Journal(), quick(stop_when_empty=True)).run()

    assert (stats.failed, stats.processed) == (1, 1)
    assert len(await queue.failed_jobs()) == 1
    assert any("failed() hook" in r.getMessage() for r in caplog.records)


async def test_a_handler_that_swallows_its_timeout_is_still_recorded_as_timed_out() -> None:
    queue = MemoryQueue()
    await push(queue, Stubborn())
    journal = Journal()

    stats = await worker_for(queue, journal, quick(stop_when_empty=True)).run()

    assert journal.cancelled == ["stubborn"], "the timeout reached the handler as a cancellation"
    assert journal.ran == ["stubborn"]
    assert stats.failed == 1
    assert stats.processed == 0
    [failed] = await queue.failed_jobs()
    assert "exceeded its 0.05s timeout" in failed.error
