# SPDX-License-Identifier: MIT
"""Jobs and plumbing for the worker tests.

The jobs talk to the test through a `Journal` handed to the worker as a
dependency, so nothing is shared between tests through module globals.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, ClassVar

from rainier_queue import Dependencies, EventDispatcher, Job, JobContext, JobRegistry, Retry
from rainier_queue.dispatch import DispatchOptions, build_envelope
from rainier_queue.drivers.memory import MemoryQueue
from rainier_queue.envelope import QueuedJob
from rainier_queue.events import Event
from rainier_queue.queue import Queue
from rainier_queue.worker import Worker, WorkerOptions

PATIENCE = 5.0
"""Seconds a test waits for something that should happen almost at once, before failing."""


@dataclass
class Journal:
    """What the jobs did, and the switches that hold them."""

    ran: list[str] = field(default_factory=list)
    attempts: list[tuple[str, int, int]] = field(default_factory=list)
    hooks: list[tuple[str, int, BaseException]] = field(default_factory=list)
    threads: list[str] = field(default_factory=list)
    started: asyncio.Event = field(default_factory=asyncio.Event)
    gate: asyncio.Event = field(default_factory=asyncio.Event)
    cancelled: list[str] = field(default_factory=list)
    thread_gate: threading.Event = field(default_factory=threading.Event)
    arrived: int = 0
    all_arrived: asyncio.Event = field(default_factory=asyncio.Event)
    barrier: threading.Barrier | None = None


def journal_of(ctx: JobContext) -> Journal:
    return ctx.resolve(Journal)


class Note(Job):
    name = "note"
    tries = 3
    text: str

    async def handle(self, ctx: JobContext) -> None:
        journal_of(ctx).ran.append(self.text)


class Flaky(Job):
    """Fails its first `fail_times` attempts; waits 100 s + attempt before a retry."""

    name = "flaky"
    tries = 3
    fail_times: int

    async def handle(self, ctx: JobContext) -> None:
        journal = journal_of(ctx)
        journal.attempts.append((self.name, ctx.attempt, ctx.max_attempts))
        if ctx.attempt <= self.fail_times:
            raise RuntimeError(f"flaky failure {ctx.attempt}")
        journal.ran.append("flaky")

    def backoff(self, attempt: int) -> timedelta:
        return timedelta(seconds=100 + attempt)


class Retried(Job):
    """Fails its first `fail_times` attempts once the test opens the gate, each retried
    50 ms later; records attempts."""

    name = "retried"
    tries = 3
    text: str
    fail_times: int

    async def handle(self, ctx: JobContext) -> None:
        journal = journal_of(ctx)
        journal.attempts.append((self.text, ctx.attempt, ctx.max_attempts))
        if ctx.attempt <= self.fail_times:
            await journal.gate.wait()
            raise RuntimeError(f"failure {ctx.attempt} of {self.text}")
        journal.ran.append(self.text)

    def backoff(self, attempt: int) -> timedelta:
        return timedelta(milliseconds=50)


class Doomed(Job):
    """Always raises; retries at once; records its failed hook."""

    name = "doomed"
    tries = 2
    label: str = "doomed"

    async def handle(self, ctx: JobContext) -> None:
        journal_of(ctx).attempts.append((self.label, ctx.attempt, ctx.max_attempts))
        raise ValueError(f"boom from {self.label}")

    def backoff(self, attempt: int) -> timedelta:
        return timedelta(0)

    async def failed(self, ctx: JobContext, error: BaseException) -> None:
        journal_of(ctx).hooks.append((self.label, ctx.attempt, error))


class Hangs(Job):
    """Never finishes by itself; times out after 50 ms; records its (plain def) failed hook."""

    name = "hangs"
    tries = 1
    timeout: ClassVar[timedelta | float | None] = timedelta(milliseconds=50)

    async def handle(self, ctx: JobContext) -> None:
        await asyncio.Event().wait()

    def failed(self, ctx: JobContext, error: BaseException) -> None:
        journal_of(ctx).hooks.append((self.name, ctx.attempt, error))


class Stubborn(Job):
    """Swallows the cancellation its 50 ms timeout brings, then returns as if all went well."""

    name = "stubborn"
    tries = 1
    timeout: ClassVar[timedelta | float | None] = timedelta(milliseconds=50)

    async def handle(self, ctx: JobContext) -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            journal_of(ctx).cancelled.append(self.name)
        journal_of(ctx).ran.append(self.name)


class HangsForWorkersTimeout(Hangs):
    """`Hangs` without a timeout of its own, so the worker's applies."""

    name = "hangs-for-the-workers-timeout"
    timeout = None


class BrokenHook(Doomed):
    """Fails for good on its first attempt, and its failed hook raises too."""

    name = "broken-hook"
    tries = 1

    async def failed(self, ctx: JobContext, error: BaseException) -> None:
        raise RuntimeError("the hook itself broke")


class Patient(Job):
    """Takes a moment, inside a generous timeout of its own."""

    name = "patient"
    tries = 1
    timeout = timedelta(seconds=30)

    async def handle(self, ctx: JobContext) -> None:
        await asyncio.sleep(0.01)
        journal_of(ctx).ran.append("patient")


class HangsInThread(Job):
    """A plain def that blocks until the test lets its thread go."""

    name = "hangs-in-thread"
    tries = 1
    timeout: ClassVar[timedelta | float | None] = timedelta(milliseconds=50)

    def handle(self, ctx: JobContext) -> None:
        journal = journal_of(ctx)
        journal.threads.append(threading.current_thread().name)
        journal.thread_gate.wait(PATIENCE)

    async def failed(self, ctx: JobContext, error: BaseException) -> None:
        journal_of(ctx).hooks.append((self.name, ctx.attempt, error))


class BlocksInThread(HangsInThread):
    """`HangsInThread` with no timeout: only a shutdown interrupts it."""

    name = "blocks-in-thread"
    timeout = None


class Held(Job):
    """Says it started, then waits for the test to open the gate."""

    name = "held"
    tries = 3
    text: str = "held"

    async def handle(self, ctx: JobContext) -> None:
        journal = journal_of(ctx)
        journal.attempts.append((self.text, ctx.attempt, ctx.max_attempts))
        journal.started.set()
        try:
            await journal.gate.wait()
        except asyncio.CancelledError:
            journal.cancelled.append(self.text)
            raise
        journal.ran.append(self.text)


class Staggered(Job):
    """Takes `turns` turns of the event loop, so jobs started together end apart."""

    name = "staggered"
    tries = 1
    turns: int

    async def handle(self, ctx: JobContext) -> None:
        for _ in range(self.turns):
            await asyncio.sleep(0)
        journal_of(ctx).ran.append(f"staggered {self.turns}")


class Meet(Job):
    """Finishes only once `expected` copies of it are running at the same time."""

    name = "meet"
    tries = 1
    expected: int

    async def handle(self, ctx: JobContext) -> None:
        journal = journal_of(ctx)
        journal.arrived += 1
        if journal.arrived == self.expected:
            journal.all_arrived.set()
        await asyncio.wait_for(journal.all_arrived.wait(), PATIENCE)
        journal.ran.append("meet")


class MeetInThread(Job):
    """The plain-def twin of `Meet`, on a threading barrier."""

    name = "meet-in-thread"
    tries = 1

    def handle(self, ctx: JobContext) -> None:
        journal = journal_of(ctx)
        assert journal.barrier is not None
        journal.barrier.wait()
        journal.threads.append(threading.current_thread().name)


class AsksAgain(Job):
    """Asks to be retried in 77 s."""

    name = "asks-again"
    tries = 3

    async def handle(self, ctx: JobContext) -> None:
        raise Retry(timedelta(seconds=77), reason="the partner API said later")


class Unique(Job):
    """Unique by `key`; fails its first `fail_times` attempts, then waits a minute to retry."""

    name = "unique-job"
    tries = 2
    key: str
    fail_times: int = 0

    def unique_id(self) -> str | None:
        return self.key

    async def handle(self, ctx: JobContext) -> None:
        if ctx.attempt <= self.fail_times:
            raise RuntimeError("unique job failed")

    def backoff(self, attempt: int) -> timedelta:
        return timedelta(minutes=1)


class Chain(Job):
    """Pushes the next link while it runs, so the queue is empty only for a moment."""

    name = "chain"
    tries = 1
    links: int

    async def handle(self, ctx: JobContext) -> None:
        journal_of(ctx).ran.append(f"link {self.links}")
        if self.links > 1:
            await push(ctx.resolve(MemoryQueue), Chain(links=self.links - 1))


class Exits(Job):
    name = "exits"
    tries = 1

    async def handle(self, ctx: JobContext) -> None:
        raise SystemExit(3)


ALL_JOBS: Sequence[type[Job]] = (
    Note,
    Flaky,
    Retried,
    Doomed,
    Hangs,
    Stubborn,
    HangsForWorkersTimeout,
    BrokenHook,
    Patient,
    HangsInThread,
    BlocksInThread,
    Held,
    Staggered,
    Meet,
    MeetInThread,
    AsksAgain,
    Unique,
    Chain,
    Exits,
)


def registry() -> JobRegistry:
    return JobRegistry(ALL_JOBS)


def quick(**overrides: Any) -> WorkerOptions:
    """Options for tests: short waits, so nothing in a test sits idle for long."""
    settings: dict[str, Any] = {
        "sleep": timedelta(milliseconds=5),
        "max_error_backoff": timedelta(milliseconds=20),
        "grace": timedelta(seconds=PATIENCE),
        # A drain stops at the first empty reserve unless a test says otherwise,
        # so a retry due in a minute does not hold a test up (see test_drain.py).
        "drain_wait": timedelta(0),
    }
    settings.update(overrides)
    return WorkerOptions(**settings)


async def push(target: Queue, job: Job, **changes: Any) -> QueuedJob:
    """Enqueue `job` as a dispatch would, with envelope fields overridden by `changes`."""
    envelope = build_envelope(job, DispatchOptions())
    if changes:
        envelope = envelope.with_changes(**changes)
    await target.push(envelope)
    return envelope


def worker_for(
    queue: Queue,
    journal: Journal,
    options: WorkerOptions | None = None,
    *,
    events: EventDispatcher | None = None,
    **kwargs: Any,
) -> Worker:
    dependencies = Dependencies([journal, queue])
    if isinstance(queue, MemoryQueue):
        dependencies.provide(queue, as_=MemoryQueue)
    return Worker(
        queue,
        registry(),
        options or quick(),
        events=events,
        dependencies=dependencies,
        **kwargs,
    )


class Recorder:
    """An event listener that keeps every event."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def __call__(self, event: Event) -> None:
        self.events.append(event)

    def of(self, kind: type[Any]) -> list[Any]:
        return [e for e in self.events if isinstance(e, kind)]


async def eventually(condition: Callable[[], bool], what: str) -> None:
    """Poll `condition()` until it is true, failing after PATIENCE seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + PATIENCE
    while not condition():
        assert loop.time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.002)


async def eventually_async(attempt: Callable[[], Awaitable[Sequence[object]]], what: str) -> None:
    """Call `attempt()` until it returns something, failing after PATIENCE seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + PATIENCE
    while not await attempt():
        assert loop.time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.002)
