# SPDX-License-Identifier: MIT
"""Plain `def` handlers that outlive their timeout or a stop: one attempt at a time, always.

Python cannot kill a thread, so a handler's thread is the attempt: until it
returns, its job keeps its slot and lease, and its outcome waits. These
tests record every start and end in a `Ledger` and assert on the order of
its rows, never on durations. The handlers wait on something the test or
the next attempt sets, so on a worker that freed the slot at the timeout
they end early and the ledger shows the overlap.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from typing import ClassVar

import pytest

from rainier_queue import Dependencies, Job, JobContext, JobRegistry
from rainier_queue.drivers.memory import MemoryQueue
from rainier_queue.worker import Worker, WorkerOptions
from rainier_queue.worker import threads as worker_threads

from .jobs import PATIENCE, eventually, push, quick

WAIT = 1.5
"""Seconds a handler blocks in C when nothing lets it go: long enough for a worker that
frees the slot at the timeout to start the retry meanwhile."""


@dataclass
class Ledger:
    """Rows of (event, label, attempt), in the order the handlers wrote them."""

    rows: list[tuple[str, str, int]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    retry_started: threading.Event = field(default_factory=threading.Event)
    hooked: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)
    caught: list[str] = field(default_factory=list)

    def write(self, event: str, label: str, attempt: int) -> None:
        with self.lock:
            self.rows.append((event, label, attempt))

    def events(self, label: str) -> list[tuple[str, int]]:
        return [(event, attempt) for event, name, attempt in self.rows if name == label]

    def most_at_once(self) -> int:
        """The most handlers that ran at once, from the start and end rows."""
        running = most = 0
        for event, _, _ in self.rows:
            if event == "start":
                running += 1
                most = max(most, running)
            elif event == "end":
                running -= 1
        return most


def ledger_of(ctx: JobContext) -> Ledger:
    return ctx.resolve(Ledger)


class Overruns(Job):
    """Attempt 1 blocks in C well past its timeout (until the retry starts, at most WAIT)."""

    name = "overruns"
    tries = 2
    timeout: ClassVar[timedelta | float | None] = timedelta(milliseconds=50)

    def handle(self, ctx: JobContext) -> None:
        ledger = ledger_of(ctx)
        ledger.write("start", self.name, ctx.attempt)
        try:
            if ctx.attempt == 1:
                ledger.retry_started.wait(WAIT)
            else:
                ledger.retry_started.set()
        finally:
            ledger.write("end", self.name, ctx.attempt)

    def backoff(self, attempt: int) -> timedelta:
        return timedelta(0)


class Quick(Job):
    """A plain `def` job that returns at once."""

    name = "quick"
    tries = 1

    def handle(self, ctx: JobContext) -> None:
        ledger = ledger_of(ctx)
        ledger.write("start", self.name, ctx.attempt)
        ledger.write("end", self.name, ctx.attempt)


class Spins(Job):
    """A pure-Python busy loop that only the exception raised in its thread ends."""

    name = "spins"
    tries = 1
    timeout: ClassVar[timedelta | float | None] = timedelta(milliseconds=50)
    swallow: int = 0
    """How many of the exceptions raised in it the loop catches and carries on after."""

    def handle(self, ctx: JobContext) -> None:
        ledger = ledger_of(ctx)
        ledger.write("start", self.name, ctx.attempt)
        swallowed = 0
        try:
            while not ledger.release.is_set():
                try:
                    while not ledger.release.is_set():
                        pass
                except BaseException as exc:
                    ledger.caught.append(type(exc).__name__)
                    if swallowed == self.swallow:
                        raise
                    swallowed += 1
        finally:
            ledger.write("end", self.name, ctx.attempt)


class TimesOutForGood(Job):
    """Blocks in C past its timeout on its only try (until its failed hook runs, at most WAIT)."""

    name = "times-out-for-good"
    tries = 1
    timeout: ClassVar[timedelta | float | None] = timedelta(milliseconds=50)

    def handle(self, ctx: JobContext) -> None:
        ledger = ledger_of(ctx)
        ledger.write("start", self.name, ctx.attempt)
        try:
            ledger.hooked.wait(WAIT)
        finally:
            ledger.write("end", self.name, ctx.attempt)

    def failed(self, ctx: JobContext, error: BaseException) -> None:
        ledger = ledger_of(ctx)
        ledger.write("hook", f"{type(error).__name__}: {error}", ctx.attempt)
        ledger.hooked.set()


class Sleeps(Job):
    """Sleeps in short naps until released, with no timeout: only a stop interrupts it."""

    name = "sleeps"
    tries = 3

    def handle(self, ctx: JobContext) -> None:
        ledger = ledger_of(ctx)
        ledger.write("start", self.name, ctx.attempt)
        try:
            while not ledger.release.is_set():
                time.sleep(0.005)
        except BaseException as exc:
            ledger.caught.append(type(exc).__name__)
            raise
        finally:
            ledger.write("end", self.name, ctx.attempt)


class Stuck(Job):
    """Blocked in C until released: a thread no exception reaches in time."""

    name = "stuck"
    tries = 3
    timeout: ClassVar[timedelta | float | None] = None

    def handle(self, ctx: JobContext) -> None:
        ledger = ledger_of(ctx)
        ledger.write("start", self.name, ctx.attempt)
        try:
            ledger.release.wait(PATIENCE)
        finally:
            ledger.write("end", self.name, ctx.attempt)


class StuckPastTimeout(Stuck):
    name = "stuck-past-timeout"
    tries = 1
    timeout = timedelta(milliseconds=50)


class StuckWithTimeout(Stuck):
    name = "stuck-with-timeout"
    timeout = timedelta(milliseconds=300)


REGISTRY = JobRegistry(
    [Overruns, Quick, Spins, TimesOutForGood, Sleeps, Stuck, StuckPastTimeout, StuckWithTimeout]
)


def worker(queue: MemoryQueue, ledger: Ledger, options: WorkerOptions) -> Worker:
    return Worker(queue, REGISTRY, options, dependencies=Dependencies([ledger]))


@pytest.fixture
def ledger() -> Iterator[Ledger]:
    made = Ledger()
    yield made
    made.release.set()  # no handler thread outlives its test


@pytest.fixture
def quick_reports(monkeypatch: pytest.MonkeyPatch) -> None:
    """Report (and interrupt again) an overrunning thread every 50 ms; give a stop 50 ms."""
    monkeypatch.setattr(worker_threads, "REPORT_EVERY", timedelta(milliseconds=50))
    monkeypatch.setattr(worker_threads, "STOP_WAIT", timedelta(milliseconds=50))


async def test_a_plain_def_job_past_its_timeout_is_retried_only_after_its_thread_returned(
    ledger: Ledger,
) -> None:
    queue = MemoryQueue()
    await push(queue, Overruns())
    await push(queue, Quick())
    options = quick(concurrency=1, stop_when_empty=True, drain_wait=timedelta(seconds=PATIENCE))

    stats = await worker(queue, ledger, options).run()

    assert ledger.events("overruns") == [("start", 1), ("end", 1), ("start", 2), ("end", 2)], (
        ledger.rows
    )
    assert ledger.most_at_once() == 1, f"more handlers than the concurrency: {ledger.rows}"
    assert (stats.processed, stats.released, stats.failed) == (2, 1, 0)
    assert stats.threads_left_running == 0


async def test_a_busy_python_handler_is_stopped_by_the_timeout_raised_in_its_thread(
    ledger: Ledger,
) -> None:
    queue = MemoryQueue()
    await push(queue, Spins())

    stats = await worker(queue, ledger, quick(stop_when_empty=True)).run()

    assert ledger.caught == ["HandlerTimedOut"]
    assert ledger.events("spins") == [("start", 1), ("end", 1)]
    assert stats.failed == 1
    [failed] = await queue.failed_jobs()
    assert "exceeded its 0.05s timeout" in failed.error


@pytest.mark.usefixtures("quick_reports")
async def test_a_handler_that_swallows_the_timeout_gets_it_again(
    ledger: Ledger, caplog: pytest.LogCaptureFixture
) -> None:
    queue = MemoryQueue()
    await push(queue, Spins(swallow=2))
    caplog.set_level(logging.WARNING, logger="rainier_queue")

    stats = await worker(queue, ledger, quick(stop_when_empty=True)).run()

    assert ledger.caught == ["HandlerTimedOut"] * 3
    assert stats.failed == 1
    again = [r for r in caplog.records if "still runs in its thread" in r.getMessage()]
    assert again, caplog.text
    assert all(r.levelno == logging.ERROR for r in again)
    assert all("`spins`" in r.getMessage() for r in again)


async def test_a_timeout_on_the_last_try_reaches_the_failed_hook_after_the_thread_returned(
    ledger: Ledger,
) -> None:
    queue = MemoryQueue()
    await push(queue, TimesOutForGood())

    stats = await worker(queue, ledger, quick(stop_when_empty=True)).run()

    assert [event for event, _, _ in ledger.rows] == ["start", "end", "hook"], ledger.rows
    [(_, said, _)] = [row for row in ledger.rows if row[0] == "hook"]
    assert said == "JobTimeout: job `times-out-for-good` exceeded its 0.05s timeout"
    assert stats.failed == 1
    [failed] = await queue.failed_jobs()
    assert "exceeded its 0.05s timeout" in failed.error


@pytest.mark.usefixtures("quick_reports")
async def test_a_thread_that_runs_on_past_its_timeout_is_reported_loudly_and_keeps_its_slot(
    ledger: Ledger, caplog: pytest.LogCaptureFixture
) -> None:
    queue = MemoryQueue()
    await push(queue, StuckPastTimeout())
    await push(queue, Quick())
    caplog.set_level(logging.WARNING, logger="rainier_queue")
    options = quick(concurrency=1, stop_when_empty=True)
    running = asyncio.create_task(worker(queue, ledger, options).run())

    def reported() -> bool:
        return any("still runs in its thread" in r.getMessage() for r in caplog.records)

    await eventually(reported, "the thread to be reported as still running")
    assert ledger.events("quick") == [], "the stuck job's slot was given to another job"
    ledger.release.set()
    stats = await asyncio.wait_for(running, PATIENCE)

    assert ledger.events("quick") == [("start", 1), ("end", 1)]
    assert ledger.most_at_once() == 1
    assert (stats.processed, stats.failed) == (1, 1)
    [failed] = await queue.failed_jobs()
    assert "exceeded its 0.05s timeout" in failed.error


async def test_a_plain_def_job_interrupted_at_a_stop_is_stopped_in_its_thread_and_handed_back(
    ledger: Ledger,
) -> None:
    queue = MemoryQueue()
    await push(queue, Sleeps())
    stopping = worker(queue, ledger, quick())
    running = asyncio.create_task(stopping.run())
    await eventually(lambda: bool(ledger.events("sleeps")), "the handler to start")

    stopping.stop(now=True)
    stats = await asyncio.wait_for(running, PATIENCE)

    assert ledger.caught == ["HandlerInterrupted"]
    assert ledger.events("sleeps") == [("start", 1), ("end", 1)]
    assert (stats.interrupted, stats.abandoned, stats.threads_left_running) == (1, 0, 0)
    assert await queue.size("default") == 1, "handed back once its thread had returned"


@pytest.mark.usefixtures("quick_reports")
async def test_a_thread_that_outlasts_a_stop_leaves_its_job_reserved_for_its_lease_to_lapse(
    ledger: Ledger, caplog: pytest.LogCaptureFixture
) -> None:
    queue = MemoryQueue()
    await push(queue, Stuck())
    caplog.set_level(logging.WARNING, logger="rainier_queue")
    stopping = worker(queue, ledger, quick())
    running = asyncio.create_task(stopping.run())
    await eventually(lambda: bool(ledger.events("stuck")), "the handler to start")

    stopping.stop(now=True)
    stats = await asyncio.wait_for(running, PATIENCE)

    assert ledger.events("stuck") == [("start", 1)], "the thread still runs"
    assert (stats.interrupted, stats.abandoned, stats.threads_left_running) == (0, 1, 1)
    counts = await queue.counts("default")
    assert (counts.waiting, counts.reserved) == (0, 1), "not handed back while its thread runs"
    said = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert any("`stuck`" in m and "lease is no longer renewed" in m for m in said), said


async def test_a_timeout_that_falls_while_a_stop_waits_for_the_thread_does_not_settle_it(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(worker_threads, "STOP_WAIT", timedelta(seconds=1))
    queue = MemoryQueue()
    await push(queue, StuckWithTimeout())
    stopping = worker(queue, ledger, quick())
    running = asyncio.create_task(stopping.run())
    await eventually(lambda: bool(ledger.events("stuck-with-timeout")), "the handler to start")

    stopping.stop(now=True)
    stats = await asyncio.wait_for(running, PATIENCE)

    assert (stats.released, stats.failed, stats.abandoned) == (0, 0, 1)
    counts = await queue.counts("default")
    assert (counts.waiting, counts.reserved) == (0, 1), "not settled while its thread runs"
