# SPDX-License-Identifier: MIT
"""Running one reservation: from an envelope to a verdict, touching no broker.

Everything between "a job was reserved" and "here is what became of it" is
here, and nothing that talks to the queue is, so the rules for what counts
as a success, a retry or a failure sit in one place and the settling code
(`settle.py`) only carries them out.

Before the handler runs, two things can rule it out: a name no handler is
registered under (or a payload that no longer fits the job's fields), and
a job delivered more often than it may be. Deliveries are counted when a
job is reserved, so attempts beyond the limit mean earlier deliveries went
to workers that died without settling them; running it again would likely
kill this worker too.

Timeouts: the job's own `timeout` wins, else the worker's. An `async def`
handler that overruns is cancelled (it runs in the worker's task for its
job, so no extra task or wait is paid per job; a handler that swallows the
cancellation keeps its slot until it returns, and is still recorded as
timed out). A plain `def` handler runs in a thread of a pool
(`threads.py`), and Python cannot stop a thread: `HandlerTimedOut` is
raised in it, and until the thread really returns the job keeps its slot
and its lease, so its retry cannot start beside it and the worker never
runs more handlers than its concurrency. Only then is the attempt settled
as timed out.

The same holds at shutdown: a plain `def` handler interrupted when the
grace period ends, or by a second signal, gets `HandlerInterrupted` and
`threads.STOP_WAIT` to return; then it is handed back with its attempt
refunded. One still running after that is left reserved (ABANDONED): its
lease lapses and its next delivery counts an attempt, because handing it
back would let another worker start it beside the thread.
`threads_running` lets the process that owns the worker decide not to
wait for the thread (the CLI exits without it, which ends it where it stands).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
import types
from collections.abc import Callable, Generator
from dataclasses import dataclass
from datetime import timedelta
from types import CoroutineType
from typing import Any, TypeVar

from ..context import Dependencies, JobContext
from ..envelope.model import QueuedJob
from ..envelope.sealing import SEALED, KeyRing, SealedPayloadError, sealed_key_id
from ..errors import (
    DeliveryExhausted,
    HandlerInterrupted,
    JobTimeout,
    PayloadError,
    Retry,
    UnknownJob,
)
from ..job import Job, is_async_handler
from ..queue import Reservation
from ..registry import JobRegistry
from .deadlines import Deadline, Deadlines
from .interrupts import Interruptible
from .options import WorkerOptions
from .threads import ThreadCall, Threads, see_out
from .verdicts import Attempt, Verdict

log = logging.getLogger("rainier_queue.worker")

T = TypeVar("T")

CANCEL_GRACE = timedelta(seconds=2)
"""How long a cancelled handler may take to unwind before the worker stops waiting."""


@dataclass(frozen=True, slots=True, kw_only=True)
class _ClassFacts:
    """What the runner asks of a job class for every job, asked once."""

    handle: object
    """The `handle` the answers were given for (a class may replace it)."""
    timeout_setting: object
    """The class's `timeout` as set, likewise."""
    is_async: bool
    timeout: timedelta | None
    """The limit its jobs run under: their own, else the worker's."""
    seconds: float | None
    """`timeout` in seconds."""


class Runner:
    """Builds, runs and times one job; owns the thread pool for plain `def` handlers."""

    def __init__(
        self,
        registry: JobRegistry,
        options: WorkerOptions,
        dependencies: Dependencies,
        keys: KeyRing | None = None,
    ) -> None:
        self._registry = registry
        self._keys = keys
        """The connection's key ring, which opens sealed payloads (docs/encryption.md)."""
        self._options = options
        self._dependencies = dependencies
        # Handlers never take more than `concurrency` threads, since a slot is
        # held until its thread returns; the rest is for `failed` hooks, which
        # run after their handler's slot freed.
        self._threads = Threads(2 * options.concurrency)
        self._deadlines = Deadlines()
        self._floor = max(options.tries or 0, 1)
        """The fewest attempts any job gets (`WorkerOptions.attempts_for`)."""
        self._classes: dict[type[Job], _ClassFacts] = {}
        """What each job class's handler is, asked once per class rather than once per job."""

    # -- threads -----------------------------------------------------------------

    async def in_thread(self, fn: Callable[..., T], *args: Any) -> T:
        """Call `fn(*args)` in the pool, with the caller's context variables."""
        return await self._threads.call(fn, *args)

    @property
    def threads_running(self) -> int:
        """Threads running a handler or hook right now, abandoned ones included."""
        return self._threads.running

    def close(self) -> None:
        """Let the pool's threads end when their handlers return; do not wait for them."""
        self._threads.close()

    # -- one attempt ---------------------------------------------------------------

    def context_for(
        self, reservation: Reservation, control: Interruptible | None = None
    ) -> JobContext:
        queued = reservation.job
        floor = self._floor
        return JobContext(
            job_id=queued.id,
            name=queued.name,
            queue=queued.queue,
            attempt=queued.attempts,
            max_attempts=queued.max_attempts if queued.max_attempts > floor else floor,
            headers=queued.headers,
            dependencies=self._dependencies,
            asked_to_stop=None if control is None else control.asked_to_stop,
        )

    def timeout_for(self, job_class: type[Job]) -> timedelta | None:
        """The job's own timeout, else the worker's."""
        own = job_class.timeout_delta()
        return own if own is not None else self._options.timeout

    def _facts(self, job_class: type[Job]) -> _ClassFacts:
        """`job_class`'s handler kind and time limit, kept until the class changes them."""
        facts = self._classes.get(job_class)
        if (
            facts is None
            or facts.handle is not job_class.handle
            or facts.timeout_setting is not job_class.timeout
        ):
            timeout = self.timeout_for(job_class)
            facts = self._classes[job_class] = _ClassFacts(
                handle=job_class.handle,
                timeout_setting=job_class.timeout,
                is_async=is_async_handler(job_class),
                timeout=timeout,
                seconds=None if timeout is None else timeout.total_seconds(),
            )
        return facts

    def _build(self, queued: QueuedJob) -> Job:
        """The job of `queued`, its payload opened first if it is sealed.

        A payload that will not open raises `SealedPayloadError` (a
        `PayloadError`), so the job goes to the failed store as it is, still
        sealed, to be retried once its key is in the ring again.
        """
        payload = queued.payload
        if type(payload) is not dict or SEALED not in payload:
            return self._registry.get(queued.name).from_payload(payload)
        job_class = self._registry.get(queued.name)  # an unknown name says so first
        if self._keys is None:
            raise SealedPayloadError(
                f"the payload of job `{queued.name}` {queued.id} is sealed with key "
                f"`{sealed_key_id(payload)}`, and this worker's connection has no `encryption` "
                "key ring: give it one (docs/encryption.md), then retry the job from the "
                "failed store",
                key_id=sealed_key_id(payload),
            )
        return job_class.from_payload(self._keys.open(queued))

    async def run(
        self,
        reservation: Reservation,
        control: Interruptible,
        task: asyncio.Task[Any] | None = None,
    ) -> Attempt:
        """Run `reservation`'s job once and say what became of it. Never raises for the job.

        `task` is the task this is awaited from, when the caller has it at hand.
        """
        queued = reservation.job
        ctx = self.context_for(reservation, control)
        started = time.monotonic()
        try:
            job = self._build(queued)
        except (UnknownJob, PayloadError) as exc:
            return Attempt(
                reservation=reservation,
                verdict=Verdict.UNRUNNABLE,
                context=ctx,
                error=exc,
                started=started,
            )
        except Exception as exc:
            # The job's own validation (its __post_init__) refused the stored payload.
            error = PayloadError(
                f"job `{queued.name}` could not be rebuilt from its payload: {exc}"
            )
            error.__cause__ = exc
            return Attempt(
                reservation=reservation,
                verdict=Verdict.UNRUNNABLE,
                context=ctx,
                error=error,
                started=started,
            )
        job_class = type(job)
        facts = self._classes.get(job_class)  # `_facts`, its check written out: once a job
        if (
            facts is None
            or facts.handle is not job_class.handle
            or facts.timeout_setting is not job_class.timeout
        ):
            facts = self._facts(job_class)
        timeout = facts.timeout
        made = (reservation, ctx, job, timeout, started)
        if queued.attempts > ctx.max_attempts:
            return _ended(
                made,
                Verdict.EXHAUSTED,
                DeliveryExhausted(queued.name, queued.id, queued.attempts, ctx.max_attempts),
            )
        if control.is_interrupted():  # a stop (or a pause) came before it started
            unstarted = _ended(made, Verdict.INTERRUPTED)
            unstarted.before_start = True
            return unstarted
        if control.asked_to_stop():  # cancelled before it started: it never runs
            never_ran = _ended(made, Verdict.CANCELLED)
            never_ran.before_start = True
            return never_ran

        # The handler runs in this task, not in one of its own: a task and a
        # wait per job were a fifth of the worker's cost per job. A time limit
        # (see deadlines.py) or an interrupt cancels this task while the handler
        # runs, and only then. An `async def` handler is stepped first, before
        # either is set up: one that returns without suspending (most short
        # jobs) cannot be cancelled by anyone meanwhile, and pays for neither.
        limit: Deadline | None = None
        thread: ThreadCall[Any] | None = None
        value: object = None
        watched = False
        try:
            try:
                if facts.is_async:  # called here, not in a coroutine of its own
                    try:
                        value = job.handle(ctx)
                        if type(value) is CoroutineType:
                            try:
                                yielded = value.send(None)
                            except StopIteration as returned:
                                value = returned.value
                            else:
                                watched = True
                                task, limit = self._watch(task, control, facts, started)
                                value = await _resumed(value, yielded)
                        elif inspect.isawaitable(value):
                            watched = True
                            task, limit = self._watch(task, control, facts, started)
                            value = await value
                    except SystemExit as exc:
                        raise _exit_refused(exc) from exc
                else:
                    watched = True
                    task, limit = self._watch(task, control, facts, started)
                    thread = self._threads.start(job.handle, ctx)
                    value = await self._thread_returned(thread, made, limit, control)
            finally:
                if watched:
                    control.detach()
                    if limit is not None:
                        limit.done()
        except asyncio.CancelledError:
            # Take back the cancellations the limit and the stop made, and only those.
            if task is None:
                task = asyncio.current_task()
                assert task is not None  # run() is always awaited from a task
            expired = limit is not None and limit.expired
            for _ in range(expired + control.cancelled + control.stop_cancels):
                task.uncancel()
            if task.cancelling():
                raise  # the worker itself is being cancelled
            if thread is not None and thread.abandoned:
                return _ended(made, Verdict.ABANDONED)
            if expired:
                return self._timed_out(made, timeout)
            if control.cancelled:
                return _ended(made, Verdict.INTERRUPTED)
            if control.stop_asked:
                return _ended(made, Verdict.CANCELLED)
            return _ended(made, Verdict.RAISED, RuntimeError("the handler cancelled itself"))
        except Retry as exc:
            if control.stop_asked:
                return _ended(made, Verdict.CANCELLED)
            return _ended(made, Verdict.RETRY, exc, exc.delay)
        except (Exception, HandlerInterrupted) as exc:
            if control.stop_asked:  # it stopped because it was asked to, however it said so
                return _ended(made, Verdict.CANCELLED, exc)
            return _ended(made, Verdict.RAISED, exc)
        if control.stop_asked:
            # Cancelled while it ran: whatever it returned, the job ends cancelled.
            if task is not None:
                for _ in range(control.stop_cancels):
                    task.uncancel()  # an `async def` handler that swallowed the cancellation
            return _ended(made, Verdict.CANCELLED)
        if limit is not None and limit.expired:
            # The handler swallowed the cancellation and returned anyway.
            assert task is not None  # a limit is set up for a task
            task.uncancel()
            return self._timed_out(made, timeout)
        return Attempt(
            reservation=reservation,
            verdict=Verdict.SUCCEEDED,
            context=ctx,
            job=job,
            timeout=timeout,
            started=started,
            value=value,
        )

    def _watch(
        self,
        task: asyncio.Task[Any] | None,
        control: Interruptible,
        facts: _ClassFacts,
        started: float,
    ) -> tuple[asyncio.Task[Any], Deadline | None]:
        """The handler is about to wait: its task, put under its time limit (counted from
        `started`) and where a stop can cancel it."""
        if task is None:
            task = asyncio.current_task()
            assert task is not None  # run() is always awaited from a task
        seconds = facts.seconds
        limit = None
        if seconds is not None:
            limit = self._deadlines.start(task, seconds - (time.monotonic() - started))
        control.attach(task, is_async=facts.is_async)
        return task, limit

    def _timed_out(self, made: _Made, timeout: timedelta | None) -> Attempt:
        assert timeout is not None  # only a limited run can time out
        return _ended(made, Verdict.TIMED_OUT, JobTimeout(made[0].job.name, timeout))

    async def _thread_returned(
        self,
        thread: ThreadCall[Any],
        made: _Made,
        limit: Deadline | None,
        control: Interruptible,
    ) -> object:
        """Wait for a plain `def` handler's thread; past a time limit or a stop, until it returns.

        The task is cancelled when the limit passes or a stop interrupts the
        job. The thread cannot be cancelled, so the job holds its slot and
        its lease until the thread returns (`threads.see_out`), and only
        then does the cancellation go on to settle the attempt.
        """
        future = thread.future
        assert future is not None
        try:
            result = await asyncio.wrap_future(future)
            if inspect.isawaitable(result):
                result = await result
        except asyncio.CancelledError:
            if not thread.is_over:
                if (limit is not None and limit.expired) or control.is_interrupted():
                    if limit is not None:
                        limit.done()  # a stop came first: the limit must not cut its wait short
                    queued = made[0].job
                    thread.abandoned = not await see_out(
                        thread,
                        queued,
                        started=made[4],
                        timeout=made[3],
                        interrupted=control.is_interrupted,
                    )
                else:
                    thread.interrupt(HandlerInterrupted)  # the worker itself is being cancelled
            raise
        except SystemExit as exc:
            raise _exit_refused(exc) from exc
        return result

    async def call_failed_hook(self, attempt: Attempt) -> None:
        """Run the job's `failed(ctx, error)` hook; its errors are logged, never raised."""
        job, error = attempt.job, attempt.error
        if job is None or error is None or type(job).failed is Job.failed:
            return
        name, job_id = attempt.context.name, attempt.context.job_id

        hook_fn: Callable[[JobContext, BaseException], object] = job.failed
        hook_is_async = inspect.iscoroutinefunction(hook_fn)

        async def hook() -> None:
            if hook_is_async:
                result = hook_fn(attempt.context, error)
            else:
                result = await self.in_thread(hook_fn, attempt.context, error)
            if inspect.isawaitable(result):
                await result

        task = asyncio.create_task(hook(), name=f"rainier-queue failed hook {job_id}")
        limit = attempt.timeout
        done, _ = await asyncio.wait(
            {task}, timeout=None if limit is None else limit.total_seconds()
        )
        if not done:
            task.cancel()
            await _unwind(task, name, job_id)
            log.error("the failed() hook of job `%s` %s ran past its timeout", name, job_id)
        elif not task.cancelled() and (hook_error := task.exception()) is not None:
            log.error(
                "the failed() hook of job `%s` %s raised; ignored",
                name,
                job_id,
                exc_info=hook_error,
            )


_Made = tuple[Reservation, JobContext, Job, timedelta | None, float]
"""What every attempt of a built job shares: reservation, context, job, limit, start."""


def _ended(
    made: _Made,
    verdict: Verdict,
    error: BaseException | None = None,
    retry_delay: timedelta | None = None,
) -> Attempt:
    """The attempt of a built job that ended with `verdict`."""
    reservation, ctx, job, timeout, started = made
    return Attempt(
        reservation=reservation,
        verdict=verdict,
        context=ctx,
        job=job,
        error=error,
        retry_delay=retry_delay,
        timeout=timeout,
        started=started,
    )


@types.coroutine
def _resumed(coro: CoroutineType[Any, Any, T], yielded: Any) -> Generator[Any, Any, T]:
    """Await the rest of `coro`, which was stepped by hand and yielded `yielded`.

    The task gets what the coroutine yielded (the future it waits for), as
    if it had awaited the coroutine from the start; what the task throws in
    (a cancellation) goes on into the coroutine, and once the coroutine
    resumes, `yield from` hands it the rest of the way.
    """
    while True:
        try:
            yield yielded
        except BaseException as exc:
            try:
                yielded = coro.throw(exc)
            except StopIteration as returned:
                value: T = returned.value
                return value
            continue
        return (yield from coro.__await__())


def _exit_refused(exc: SystemExit) -> RuntimeError:
    """A handler must not be able to end the worker and every job beside it."""
    return RuntimeError(f"the handler called sys.exit({exc.code!r})")


async def _unwind(task: asyncio.Task[None], name: str, job_id: str) -> None:
    """Wait a little for a cancelled task to finish its cleanup."""
    done, _ = await asyncio.wait({task}, timeout=CANCEL_GRACE.total_seconds())
    if done:
        if not task.cancelled():
            task.exception()  # retrieved, so asyncio does not report it as lost
        return
    task.add_done_callback(_retrieve)
    log.warning(
        "job `%s` %s did not stop within %gs of being cancelled; it runs on unsupervised",
        name,
        job_id,
        CANCEL_GRACE.total_seconds(),
    )


def _retrieve(task: asyncio.Task[None]) -> None:
    if not task.cancelled():
        task.exception()


__all__ = ["Runner"]
