# SPDX-License-Identifier: MIT
"""`InstrumentedQueue`: one place where instruments see every push, reserve and settle.

Metrics, tracing, the job-state view and the dashboard all need to see
the same few moments: a job pushed, a batch reserved, a job acknowledged,
released, renewed or failed. Written into each driver, that would be one
copy per driver, each a little different, and a new driver would arrive
without any. So the seam is at the port instead, as Oban emits telemetry
at its engine boundary: a wrapper around any `Queue` that passes each call
through, times it, and tells the registered observers what happened
(`PortCall`). The worker and the manager put it in front of their queue
when they are given observers (`Worker(..., observers=...)`,
`QueueManager(..., observers=...)`).

## What it costs

Nothing when nobody listens. `instrumented(queue, observers)` returns the
queue itself when there are no observers, so a worker or manager built
without them talks to the driver directly: no wrapper, no extra await, no
clock read. With observers, each port call costs one extra await, two
clock reads and a call per observer. Observers run inline, so they must be
quick (count, record, start or end a span); one that raises is logged and
ignored, never allowed to fail a push or a settle.

## Scopes: instruments that wrap, not only watch

Two instruments need more than to be told afterwards. Tracing must add its
context to a job's headers before the push and hold a span open across it,
and must run a handler inside a span so the handler's own spans are its
children. So there are two scopes, context managers the caller enters
around the moment itself:

- a `PushScope` is entered around each push with the jobs about to go, and
  gives back the jobs to push instead (the same, or copies with headers
  added); the manager takes them (`QueueManager(..., push_scopes=...)`);
- a `JobScope` is entered by the worker around each run of a handler, on
  the task that runs it (so context variables set on entering are the
  handler's), with a `JobRun` the worker fills in with the outcome before
  leaving (`Worker(..., job_scopes=...)`).

Both are entered and left quietly (`quietly`): a scope that raises is
logged and left out, never allowed to fail a push or a job. Without scopes
the worker and manager skip them with one test of an empty tuple per job.

The wrapper passes the port through, and only the port: a driver's own
extras (PostgreSQL's `push_in`, the failed store) are reached on the driver
itself, which the worker and manager still hold (`Worker.queue`,
`QueueManager.connection()`).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, ClassVar, Literal

from typing_extensions import override

from .envelope import QueuedJob
from .queue import Capabilities, Queue, Reservation

log = logging.getLogger("rainier_queue.instrument")

Operation = Literal["push", "reserve", "acknowledge", "release", "renew", "fail"]


@dataclass(frozen=True, slots=True, kw_only=True)
class PortCall:
    """One call through the port, as an instrument sees it."""

    operation: Operation
    jobs: tuple[QueuedJob, ...]
    """The jobs pushed, reserved or settled; empty for a reserve that found nothing."""
    seconds: float
    """How long the driver took. A call that did two things in one round trip
    (`acknowledge_and_reserve`) is told as two, each with the whole time."""
    queue: str | None = None
    """The queue a reserve asked (the jobs say where pushed and settled ones belong)."""
    error: BaseException | None = None
    """Why the call, or for these jobs its part, was not done; None when it was."""


QueueObserver = Callable[[PortCall], None]
"""An instrument: called once for each `PortCall`, on the caller's task."""

Outcome = Literal["succeeded", "retried", "failed", "interrupted", "lost", "cancelled"]
"""What the worker decided about one run: acknowledge it, release it for another attempt,
move it to the failed store, hand it back unfinished at a stop (or leave a thread that
would not stop to its lease), or record nothing because its lease was lost meanwhile."""


@dataclass(slots=True, kw_only=True, eq=False)
class JobRun:
    """One run of a handler, as a `JobScope` sees it; the worker fills in how it ended."""

    job: QueuedJob
    """The job as reserved: `attempts` counts this delivery."""
    outcome: Outcome | None = None
    """Set before the scope is left; None if the worker itself failed around the run."""
    error: BaseException | None = None
    """What the handler raised (or why it could not run), when it did not succeed."""


PushScope = Callable[[Sequence[QueuedJob]], AbstractContextManager[Sequence[QueuedJob]]]
"""Entered around a push of these jobs; gives the jobs to push (the same, or changed copies)."""

JobScope = Callable[[JobRun], AbstractContextManager[object]]
"""Entered around a handler's run, on its task; `JobRun.outcome` is set before it is left."""


def enter_quietly(
    scopes: Sequence[Callable[[Any], AbstractContextManager[Any]]], value: Any
) -> tuple[list[AbstractContextManager[Any]], Any]:
    """Enter `scopes` in order, each given what the one before it gave: those entered, and
    what the last gave (for a `JobRun`, the run itself, passed on as is).

    A scope that raises on entering is logged and left out.
    """
    entered: list[AbstractContextManager[Any]] = []
    for scope in scopes:
        try:
            manager = scope(value)
            given = manager.__enter__()
        except Exception:
            log.exception("an instrument's scope failed on entering; left out")
            continue
        entered.append(manager)
        if given is not None and not isinstance(value, JobRun):
            value = given
    return entered, value


def leave_quietly(
    entered: Sequence[AbstractContextManager[Any]], error: BaseException | None = None
) -> None:
    """Leave what `enter_quietly` entered, in reverse, told of `error`; a scope that raises
    is logged and ignored (and never swallows `error`)."""
    for manager in reversed(entered):
        try:
            if error is None:
                manager.__exit__(None, None, None)
            else:
                manager.__exit__(type(error), error, error.__traceback__)
        except Exception:
            log.exception("an instrument's scope failed on leaving; ignored")


@contextlib.contextmanager
def quietly(
    scopes: Sequence[Callable[[Any], AbstractContextManager[Any]]], value: Any
) -> Iterator[Any]:
    """`enter_quietly` and `leave_quietly` around a block: an instrument never fails the
    push or the job it watches. For a `PushScope` the value is the jobs, and what the
    last scope gives is what is pushed; for a `JobScope` it is the `JobRun`."""
    entered, value = enter_quietly(scopes, value)
    try:
        yield value
    except BaseException as exc:
        leave_quietly(entered, exc)
        raise
    leave_quietly(entered)


def instrumented(
    queue: Queue,
    observers: Sequence[QueueObserver],
    push_scopes: Sequence[PushScope] = (),
) -> Queue:
    """`queue` behind an `InstrumentedQueue` that tells `observers` and enters `push_scopes`;
    `queue` itself if there are neither."""
    if not observers and not push_scopes:
        return queue
    return InstrumentedQueue(queue, observers, push_scopes)


class InstrumentedQueue(Queue):
    """Passes every port call to `inner` and tells the observers what it did."""

    name: ClassVar[str] = "instrumented"

    def __init__(
        self,
        inner: Queue,
        observers: Sequence[QueueObserver],
        push_scopes: Sequence[PushScope] = (),
    ) -> None:
        self.inner = inner
        self._observers = tuple(observers)
        self.payload_keys = inner.payload_keys
        self._push_scopes = tuple(push_scopes)

    @property
    def capabilities(self) -> Capabilities:  # type: ignore[override]  # a ClassVar on drivers
        """The driver's flags: a wrapper promises exactly what the queue inside it promises."""
        return self.inner.capabilities

    def _tell(self, call: PortCall) -> None:
        for observer in self._observers:
            try:
                observer(call)
            except Exception:
                log.exception("an instrument failed on a %s call; ignored", call.operation)

    def _told(
        self,
        operation: Operation,
        jobs: Sequence[QueuedJob],
        began: float,
        *,
        queue: str | None = None,
        error: BaseException | None = None,
    ) -> None:
        seconds = time.perf_counter() - began
        self._tell(
            PortCall(
                operation=operation, jobs=tuple(jobs), seconds=seconds, queue=queue, error=error
            )
        )

    # -- pushing -------------------------------------------------------------------------

    @override
    async def push(self, job: QueuedJob) -> str:
        if self._push_scopes:
            with quietly(self._push_scopes, (job,)) as scoped:
                return await self._push(scoped[0])
        return await self._push(job)

    async def _push(self, job: QueuedJob) -> str:
        began = time.perf_counter()
        try:
            job_id = await self.inner.push(job)
        except BaseException as exc:
            self._told("push", [job], began, error=exc)
            raise
        self._told("push", [job], began)
        return job_id

    @override
    async def push_many(self, jobs: Sequence[QueuedJob]) -> list[str]:
        if self._push_scopes:
            with quietly(self._push_scopes, tuple(jobs)) as scoped:
                return await self._push_many(scoped)
        return await self._push_many(jobs)

    async def _push_many(self, jobs: Sequence[QueuedJob]) -> list[str]:
        began = time.perf_counter()
        try:
            ids = await self.inner.push_many(jobs)
        except BaseException as exc:
            self._told("push", jobs, began, error=exc)
            raise
        self._told("push", jobs, began)
        return ids

    @override
    async def push_raw(self, queue: str, body: str) -> None:
        await self.inner.push_raw(queue, body)  # no envelope, so nothing an instrument can name

    # -- reserving -----------------------------------------------------------------------

    @override
    async def reserve(self, queue: str, *, limit: int = 1) -> list[Reservation]:
        began = time.perf_counter()
        try:
            batch = await self.inner.reserve(queue, limit=limit)
        except BaseException as exc:
            self._told("reserve", [], began, queue=queue, error=exc)
            raise
        self._told("reserve", [r.job for r in batch], began, queue=queue)
        return batch

    @override
    async def wait_for_work(self, queues: Sequence[str], timeout: timedelta) -> None:
        await self.inner.wait_for_work(queues, timeout)

    @override
    async def wait_and_reserve(
        self, queue: str, timeout: timedelta, *, limit: int
    ) -> list[Reservation]:
        began = time.perf_counter()
        try:
            batch = await self.inner.wait_and_reserve(queue, timeout, limit=limit)
        except BaseException as exc:
            self._told("reserve", [], began, queue=queue, error=exc)
            raise
        self._told("reserve", [r.job for r in batch], began, queue=queue)
        return batch

    @override
    async def hand_back_unstarted(self, reservations: Sequence[Reservation]) -> None:
        await self.inner.hand_back_unstarted(reservations)

    @property
    @override
    def reserves_behind_wait(self) -> bool:
        return self.inner.reserves_behind_wait

    # -- settling ------------------------------------------------------------------------

    @override
    async def acknowledge(self, reservation: Reservation) -> None:
        await self._settle("acknowledge", reservation, self.inner.acknowledge(reservation))

    @override
    async def acknowledge_many(self, reservations: Sequence[Reservation]) -> list[Exception | None]:
        began = time.perf_counter()
        try:
            outcomes = await self.inner.acknowledge_many(reservations)
        except BaseException as exc:
            self._told("acknowledge", [r.job for r in reservations], began, error=exc)
            raise
        self._acknowledged(reservations, outcomes, began)
        return outcomes

    @override
    async def acknowledge_and_reserve(
        self, reservations: Sequence[Reservation], queue: str, *, limit: int
    ) -> tuple[list[Exception | None], list[Reservation]]:
        began = time.perf_counter()
        try:
            outcomes, batch = await self.inner.acknowledge_and_reserve(
                reservations, queue, limit=limit
            )
        except BaseException as exc:
            self._told("acknowledge", [r.job for r in reservations], began, error=exc)
            self._told("reserve", [], began, queue=queue, error=exc)
            raise
        self._acknowledged(reservations, outcomes, began)
        self._told("reserve", [r.job for r in batch], began, queue=queue)
        return outcomes, batch

    def _acknowledged(
        self,
        reservations: Sequence[Reservation],
        outcomes: Sequence[Exception | None],
        began: float,
    ) -> None:
        """Tell the acknowledged jobs as one call, and the refused ones (stale) as another."""
        done = [r.job for r, outcome in zip(reservations, outcomes, strict=True) if outcome is None]
        refused = [(r.job, o) for r, o in zip(reservations, outcomes, strict=True) if o is not None]
        if done:
            self._told("acknowledge", done, began)
        if refused:
            self._told("acknowledge", [job for job, _ in refused], began, error=refused[0][1])

    @property
    @override
    def combines_acknowledge_and_reserve(self) -> bool:
        return self.inner.combines_acknowledge_and_reserve

    @override
    async def release(
        self,
        reservation: Reservation,
        *,
        delay: timedelta = timedelta(0),
        count_attempt: bool = True,
    ) -> None:
        await self._settle(
            "release",
            reservation,
            self.inner.release(reservation, delay=delay, count_attempt=count_attempt),
        )

    @override
    async def renew(self, reservation: Reservation) -> None:
        await self._settle("renew", reservation, self.inner.renew(reservation))

    @override
    async def fail(self, reservation: Reservation, error: str) -> None:
        await self._settle("fail", reservation, self.inner.fail(reservation, error))

    async def _settle(
        self, operation: Operation, reservation: Reservation, call: Awaitable[None]
    ) -> None:
        began = time.perf_counter()
        try:
            await call
        except BaseException as exc:
            self._told(operation, [reservation.job], began, error=exc)
            raise
        self._told(operation, [reservation.job], began)

    # -- everything else passes straight through -----------------------------------------

    @override
    async def size(self, queue: str) -> int:
        return await self.inner.size(queue)

    @override
    async def clear(self, queue: str) -> int:
        return await self.inner.clear(queue)

    @override
    def on_worker_start(self) -> None:
        self.inner.on_worker_start()

    @override
    async def on_worker_stop(self) -> None:
        await self.inner.on_worker_stop()

    @override
    async def aclose(self) -> None:
        await self.inner.aclose()

    @property
    @override
    def lease(self) -> timedelta | None:
        return self.inner.lease

    @override
    def describe(self) -> str:
        return self.inner.describe()


__all__ = [
    "InstrumentedQueue",
    "JobRun",
    "JobScope",
    "Operation",
    "Outcome",
    "PortCall",
    "PushScope",
    "QueueObserver",
    "enter_quietly",
    "instrumented",
    "leave_quietly",
    "quietly",
]
