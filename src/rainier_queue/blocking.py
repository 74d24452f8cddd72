# SPDX-License-Identifier: MIT
"""Dispatch from code that has no event loop (Django or Flask views, scripts).

The core is asyncio. Rather than a hand-written blocking twin of every
method, one private event loop runs on a daemon thread and each blocking
call submits its coroutine there and waits for the answer. The connections
a manager opens belong to the loop that first uses them, so a manager is
used either from async code or through this facade, not both, and it has
one facade: `manager.blocking()` answers the same one every time.

A web application builds it once, where it builds its manager (at import
of a module, or lazily), and calls it from every request thread: calls from
many threads meet on the one loop, which owns the connections. The loop
thread starts on the first call, not when the facade is built, so a facade
built before a fork (gunicorn's `--preload`) works in each child as long as
nothing used it before the fork; one that was used is refused in the child
with an error saying so, since its loop thread and connections stayed in
the parent.

`close()` (or leaving a `with` block) lets the calls in flight finish,
closes the manager's connections, ends the loop's tasks and stops the
thread. An exit hook does the same for a facade nobody closed, so a program
ends without "Task was destroyed but it is pending!". A call after close is
refused, and nothing is sent.

The facade knows the manager only by the few methods it calls
(`Dispatcher`), so the manager can build one without the two modules
importing each other.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import logging
import os
import threading
import weakref
from collections.abc import Callable, Coroutine, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, Protocol, TypeVar

from . import batches, cancelling, lookup
from .batches import Batch
from .batchstate import BatchProgress
from .cancelling import Cancellation
from .context import Dependencies
from .dispatch import PendingDispatch
from .errors import OutcomeUnknown
from .job import Job
from .jobstate import JobState, WorkerBeat
from .queue import Queue

T = TypeVar("T")

log = logging.getLogger("rainier_queue.dispatch")

CLOSE_GRACE = 10.0
"""Seconds `close()` waits, by default, for the calls in flight and then for the
connections to close, before it cancels what is left."""


class Dispatcher(Protocol):
    """What the facade calls on a `QueueManager`."""

    async def dispatch(
        self,
        job: Job,
        *,
        queue: str | None = None,
        delay: timedelta | float | None = None,
        at: datetime | None = None,
        connection: str | None = None,
        tries: int | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> str | None: ...

    async def dispatch_many(
        self,
        jobs: Sequence[Job],
        *,
        connection: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> list[str | None]: ...

    async def dispatch_now(self, job: Job, *, dependencies: Dependencies | None = None) -> str: ...

    async def release_uniqueness(self, job_or_key: Job | str) -> bool: ...

    def has_connection(self, name: str) -> bool: ...

    def connection(self, name: str | None = None) -> Queue: ...

    async def aclose(self) -> None: ...


class LoopThread:
    """An event loop on a daemon thread that runs coroutines for blocking callers."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        """The process the thread runs in; a fork's child has no such thread."""
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="rainier-queue-blocking", daemon=True
        )
        self._thread.start()

    @property
    def is_current(self) -> bool:
        """Whether the caller runs on this loop's own thread."""
        return threading.current_thread() is self._thread

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Start `coro` on the private loop; a future for its outcome."""
        return asyncio.run_coroutine_threadsafe(coro, self._loop)

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run `coro` on the private loop and wait for its result (or its exception)."""
        return self.submit(coro).result(timeout)

    def close(self, timeout: float) -> None:
        """Cancel and end every task left on the loop, then stop it and its thread."""
        if self._loop.is_running():
            # A task that ignores cancellation: stop the loop regardless.
            with contextlib.suppress(
                concurrent.futures.TimeoutError, concurrent.futures.CancelledError
            ):
                self.run(_end_tasks(), timeout)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout)
        if not self._loop.is_running() and not self._loop.is_closed():
            self._loop.close()


async def _end_tasks() -> None:
    """Cancel the loop's other tasks (a driver's background reads) and wait for them."""
    current = asyncio.current_task()
    tasks = [task for task in asyncio.all_tasks() if task is not current]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    await asyncio.get_running_loop().shutdown_asyncgens()


class BlockingManager:
    """The dispatch half of a `QueueManager`, callable without `await`, from any thread.

    Get it from `manager.blocking()`, which builds it once per manager. It
    owns the manager from then on: its connections live on the facade's
    loop, and `close()` closes them.
    """

    def __init__(self, manager: Dispatcher) -> None:
        self.manager = manager
        self._lock = threading.Lock()
        self._runner: LoopThread | None = None
        self._in_flight: set[concurrent.futures.Future[Any]] = set()
        self._closed = False
        _OPEN.add(self)

    @property
    def closed(self) -> bool:
        """Whether `close()` has been called (by the application or at exit)."""
        return self._closed

    # -- the calls -------------------------------------------------------------

    def dispatch(
        self,
        job: Job,
        *,
        queue: str | None = None,
        delay: timedelta | float | None = None,
        at: datetime | None = None,
        connection: str | None = None,
        tries: int | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> str | None:
        """Dispatch `job`; the job id, or None for a dropped duplicate.

        The keywords are `QueueManager.dispatch`'s: each overrides one of the
        job's own options for this dispatch.
        """
        return self._call(
            lambda: self.manager.dispatch(
                job,
                queue=queue,
                delay=delay,
                at=at,
                connection=connection,
                tries=tries,
                headers=headers,
            ),
            sends=True,
        )

    def dispatch_on(self, queue: str, job: Job) -> str | None:
        """Dispatch `job` to `queue` instead of its own."""
        return self.dispatch(job, queue=queue)

    def dispatch_after(self, delay: timedelta | float, job: Job) -> str | None:
        """Dispatch `job` due after `delay` (a timedelta or seconds)."""
        return self.dispatch(job, delay=delay)

    def dispatch_now(self, job: Job, *, dependencies: Dependencies | None = None) -> str:
        """Run `job` now, on the facade's loop, and queue nothing (`QueueManager.dispatch_now`).

        The caller waits for the job to finish; its error, after its `failed`
        hook ran, is raised here.
        """
        return self._call(
            lambda: self.manager.dispatch_now(job, dependencies=dependencies), sends=False
        )

    def release_uniqueness(self, job_or_key: Job | str) -> bool:
        """Give back a unique job's lock, whoever took it (`QueueManager.release_uniqueness`)."""
        return self._call(lambda: self.manager.release_uniqueness(job_or_key), sends=False)

    def has_connection(self, name: str) -> bool:
        """Whether a connection called `name` is declared (asks no server)."""
        return self.manager.has_connection(name)

    def dispatch_many(self, jobs: Sequence[Job]) -> list[str | None]:
        """Dispatch several jobs with one bulk push."""
        return self._call(lambda: self.manager.dispatch_many(jobs), sends=True)

    def dispatch_batch(self, jobs: Batch, *, connection: str | None = None) -> str:
        """Dispatch a batch (`batch([...]).then(...)`); its id (`Batch.dispatch`)."""
        return self._call(lambda: jobs.dispatch(self.manager, connection=connection), sends=True)

    def batch(self, batch_id: str, *, connection: str | None = None) -> BatchProgress:
        """Batch `batch_id`'s progress (`QueueManager.batch`)."""
        found = self._call(
            lambda: batches.progress(self.manager.connection(connection), batch_id), sends=False
        )
        if found is None:
            raise LookupError(f"no batch {batch_id} on that connection")
        return found

    def send(self, pending: PendingDispatch) -> str | None:
        """Send a configured `PendingDispatch` (`manager.pending(job).delay(5)`)."""
        return self._call(pending.send, sends=True)

    def size(self, queue: str = "default", connection: str | None = None) -> int:
        """Jobs waiting on `queue`."""
        return self._call(lambda: self.manager.connection(connection).size(queue), sends=False)

    def cancel(self, job_id: str, *, connection: str | None = None) -> Cancellation:
        """Cancel job `job_id` (`QueueManager.cancel`)."""
        return self._call(
            lambda: cancelling.cancel(self.manager.connection(connection), job_id), sends=False
        )

    def status(self, job_id: str, connection: str | None = None) -> JobState:
        """Where job `job_id` is (`QueueManager.status`)."""
        return self._call(
            lambda: lookup.status(self.manager.connection(connection), job_id), sends=False
        )

    def result(
        self,
        job_id: str,
        *,
        timeout: timedelta | float | None = None,
        connection: str | None = None,
    ) -> Any:
        """Job `job_id`'s recorded return value, waiting up to `timeout` (`QueueManager.result`)."""
        return self._call(
            lambda: lookup.result(self.manager.connection(connection), job_id, timeout=timeout),
            sends=False,
        )

    def workers(self, connection: str | None = None) -> list[WorkerBeat]:
        """The workers' heartbeats on a connection (`QueueManager.workers`)."""
        return self._call(lambda: lookup.workers(self.manager.connection(connection)), sends=False)

    def _call(self, make: Callable[[], Coroutine[Any, Any, T]], *, sends: bool) -> T:
        """Run the coroutine `make()` builds on the private loop and wait for its outcome.

        The coroutine is built only once the call is accepted, so a refused
        call leaves no coroutine behind that was never awaited.
        """
        _refuse_inside_a_loop()
        with self._lock:
            runner = self._usable_runner()
            future = runner.submit(make())
            self._in_flight.add(future)
        try:
            return future.result()
        except concurrent.futures.CancelledError:
            # Only `close()` cancels a call, and only once it has waited its grace.
            if not sends:
                raise RuntimeError(
                    "the blocking facade was closed while this call was in flight"
                ) from None
            raise OutcomeUnknown(
                "the blocking facade was closed while this dispatch was in flight, so it "
                "may or may not have been queued; look before dispatching it again"
            ) from None
        finally:
            with self._lock:
                self._in_flight.discard(future)

    def _usable_runner(self) -> LoopThread:
        """The loop thread, started on the first call; refuses after close or across a fork."""
        if self._closed:
            raise RuntimeError(
                "this blocking facade is closed (by close(), a `with` block or at exit), and "
                "its manager's connections with it; nothing was sent. Build a new manager "
                "(config.build(registry).blocking()) to dispatch again"
            )
        runner = self._runner
        if runner is None:
            runner = self._runner = LoopThread()
            _close_open_facades_at_exit()
        elif runner.pid != os.getpid():
            raise RuntimeError(
                f"this blocking facade was used in process {runner.pid} before this process "
                "was forked from it: its loop thread and its connections stayed in the "
                "parent, so nothing was sent. Build the manager in each process after the "
                "fork (gunicorn: in a post_fork hook, or without --preload), or make no call "
                "through it before the fork"
            )
        elif runner.is_current:
            raise RuntimeError("a blocking call cannot be made from the facade's own loop")
        return runner

    # -- lifecycle -------------------------------------------------------------

    def close(self, timeout: float = CLOSE_GRACE) -> None:
        """Close the manager's connections and stop the private loop.

        Calls in flight get up to `timeout` seconds to finish; one still
        running then is cancelled, and its caller gets `OutcomeUnknown` (the
        job may be queued). Later calls are refused. Closing twice is a no-op,
        and so is closing a facade no call went through (it opened nothing).
        """
        with self._lock:
            if self._closed:
                return
            self._closed = True
            runner = self._runner
            in_flight = list(self._in_flight)
        if runner is not None and runner.pid != os.getpid():
            return  # the parent's loop and connections: not this process's to close
        if runner is not None and runner.is_current:
            raise RuntimeError("the blocking facade cannot be closed from its own loop")
        if runner is None:
            return  # nothing went through the facade, so it opened nothing
        concurrent.futures.wait(in_flight, timeout)
        for future in in_flight:
            future.cancel()
        try:
            runner.run(self.manager.aclose(), timeout)
        finally:
            runner.close(timeout)

    def __enter__(self) -> BlockingManager:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "idle" if self._runner is None else "running"
        return f"BlockingManager({self.manager!r}, {state})"


def _refuse_inside_a_loop() -> None:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return
    raise RuntimeError(
        "a blocking dispatch was called inside a running event loop (an async view, task "
        "or test), where it would stall every other task; there, use `await "
        "manager.dispatch(job)` on a manager that async code owns (a manager is used from "
        "async code or through its blocking facade, not both)"
    )


_OPEN: weakref.WeakSet[BlockingManager] = weakref.WeakSet()
"""Facades not yet garbage: those left open are closed at exit."""

_exit_hook = False


def _close_open_facades_at_exit() -> None:
    """Register the exit hook, once, when the first loop starts.

    Registered then rather than at import, so it runs before the exit hooks
    of the drivers the manager opened before it (atexit runs the last
    registered first): the connections are closed while their drivers still
    work.
    """
    global _exit_hook
    if not _exit_hook:
        _exit_hook = True
        atexit.register(_close_at_exit)


def _close_at_exit() -> None:
    for facade in list(_OPEN):
        if facade._runner is not None and not facade.closed:
            try:
                facade.close(timeout=2.0)
            except Exception as exc:
                log.warning("closing the blocking facade at exit failed: %s", exc)


def _after_fork_in_child() -> None:
    # A lock held by another thread at the fork stays held for ever in the child.
    for facade in list(_OPEN):
        facade._lock = threading.Lock()


os.register_at_fork(after_in_child=_after_fork_in_child)
