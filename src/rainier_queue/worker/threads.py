# SPDX-License-Identifier: MIT
"""Plain `def` handlers in threads, and what the worker does when one overruns.

Python cannot kill a thread. The worker used to settle a timed-out plain
`def` job at its timeout and free its slot while the thread ran on, so the
retry could start beside the first attempt, and the worker ran more
handlers than its concurrency. Now the thread is the attempt: until it
returns, the job's slot stays taken and its lease renewed, and the
attempt's outcome is settled only after it returns.

To make it return sooner, the worker raises `HandlerTimedOut` (or, at a
stop, `HandlerInterrupted`) inside the thread with
`PyThreadState_SetAsyncExc`. What that can and cannot reach:

- It is raised at the thread's next bytecode boundary, so Python code, a
  busy loop included, stops at once (a `finally` block still runs, and an
  `except BaseException:` can catch it).
- A thread blocked in a call into C (`time.sleep`, a socket or file read,
  a lock or `Event.wait`, a database driver's query, a C extension's
  computation) gets it only when that call returns; the call is not cut
  short.
- A handler that catches it and carries on keeps running; the worker
  delivers it again each time it reports the thread still running
  (`REPORT_EVERY`).
- A thread that never returns (an endless call into C) holds its slot for
  good, and the worker says so at ERROR every `REPORT_EVERY`, naming the
  job and how long it has run. At a stop, such a thread is given
  `STOP_WAIT` to return after the grace period; if it does not, its job is
  left reserved, not handed back, so no other worker can start it while
  the thread may still run: its lease is no longer renewed, it lapses, and
  the job's next delivery counts as an attempt. The worker reports the
  thread in `WorkerStats.threads_left_running`, and `rainier-queue work`
  then exits without waiting for it, which ends it.

Nothing here is paid per job by an `async def` handler, and a plain `def`
handler that returns in time pays only the call object that replaces the
`functools.partial` it had before.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import ctypes
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any, Generic, TypeVar

from ..envelope import QueuedJob
from ..errors import HandlerInterrupted, HandlerTimedOut
from .accounts import job_fields

log = logging.getLogger("rainier_queue.worker")

T = TypeVar("T")

REPORT_EVERY = timedelta(seconds=30)
"""How often the worker reports (and interrupts again) a thread that runs past its timeout."""

STOP_WAIT = timedelta(seconds=2)
"""How long after a stop's interrupt a thread may take to return before it is left running."""

_set_async_exc = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_ulong, ctypes.py_object)(
    ("PyThreadState_SetAsyncExc", ctypes.pythonapi)
)
_clear_async_exc = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p)(
    ("PyThreadState_SetAsyncExc", ctypes.pythonapi)
)
"""The same C function with NULL for the exception: withdraws one not yet raised."""

_WAITING, _RUNNING, _OVER = 0, 1, 2


class ThreadCall(Generic[T]):
    """One call of a function in the pool, which the worker may interrupt while it runs."""

    __slots__ = (
        "_args",
        "_delivered",
        "_fn",
        "_ident",
        "_state",
        "_threads",
        "_wanted",
        "abandoned",
        "future",
    )

    def __init__(self, threads: Threads, fn: Callable[..., T], args: tuple[Any, ...]) -> None:
        self._threads = threads
        self._fn = fn
        self._args = args
        self._state = _WAITING
        self._ident = 0
        self._wanted: type[BaseException] | None = None
        """An interrupt asked for before the call began: it begins by raising it."""
        self._delivered = False
        self.future: concurrent.futures.Future[T] | None = None
        self.abandoned = False
        """Still running after a stop interrupted it and `STOP_WAIT` passed (see `see_out`)."""

    def __call__(self) -> T:
        """Run the function; in a pool thread."""
        threads = self._threads
        with threads.lock:
            if self._wanted is not None:
                self._state = _OVER
                raise self._wanted()
            threads.busy += 1
            self._ident = threading.get_ident()
            self._state = _RUNNING
        try:
            return self._fn(*self._args)
        finally:
            # From here on nothing is delivered, and what was delivered but not
            # yet raised is withdrawn: it must not land in the pool's next call.
            with threads.lock:
                threads.busy -= 1
                self._state = _OVER
            if self._delivered:
                _clear_async_exc(self._ident, None)

    def interrupt(self, kind: type[BaseException]) -> None:
        """Raise `kind` in the thread at its next bytecode boundary (see the module's docstring)."""
        with self._threads.lock:
            if self._state == _WAITING:
                self._wanted = kind
            elif self._state == _RUNNING:
                self._delivered = True
                if _set_async_exc(self._ident, kind) > 1:  # cannot happen; undo it if it did
                    _clear_async_exc(self._ident, None)

    @property
    def is_over(self) -> bool:
        """Whether the function has returned (or raised), or will never run."""
        future = self.future
        return future is not None and future.done()


class Threads:
    """The pool plain `def` handlers and hooks run in, and how many of its threads are busy."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._executor: ThreadPoolExecutor | None = None
        self.lock = threading.Lock()
        self.busy = 0

    def start(self, fn: Callable[..., T], *args: Any) -> ThreadCall[T]:
        """Begin `fn(*args)` in the pool, with the caller's context variables."""
        if self._executor is None:
            self._executor = ThreadPoolExecutor(
                max_workers=self._size, thread_name_prefix="rainier-queue-job"
            )
        call: ThreadCall[T] = ThreadCall(self, contextvars.copy_context().run, (fn, *args))
        call.future = self._executor.submit(call)
        return call

    async def call(self, fn: Callable[..., T], *args: Any) -> T:
        """Run `fn(*args)` in the pool and return what it returns."""
        call = self.start(fn, *args)
        assert call.future is not None
        return await asyncio.wrap_future(call.future)

    @property
    def running(self) -> int:
        """Threads running a handler or hook right now."""
        with self.lock:
            return self.busy

    def close(self) -> None:
        """Let the pool's threads end when their calls return; do not wait for them."""
        if self._executor is not None:
            self._executor.shutdown(wait=False)
            self._executor = None


async def see_out(
    call: ThreadCall[Any],
    queued: QueuedJob,
    *,
    started: float,
    timeout: timedelta | None,
    interrupted: Callable[[], bool],
) -> bool:
    """Wait for a handler's thread that overran or was interrupted; True if it returned.

    The caller's task was cancelled by the job's time limit, or by the
    worker's stop (`interrupted()` says which, and may turn true while this
    waits: a stop cancels the task again). A timed-out thread is waited for
    as long as it runs, reported and interrupted again every `REPORT_EVERY`;
    an interrupted one gets `STOP_WAIT`, and False means it is still running.
    `started` is the `time.monotonic()` the attempt started at.
    """
    future = call.future
    assert future is not None
    waiter = asyncio.wrap_future(future)
    waiter.add_done_callback(_retrieve)
    reports = 0
    told_to_stop = False
    while not future.done():
        if interrupted():
            if told_to_stop:
                return False
            told_to_stop = True
            call.interrupt(HandlerInterrupted)
            wait = STOP_WAIT
        else:
            call.interrupt(HandlerTimedOut)
            _report(queued, time.monotonic() - started, timeout, reports)
            reports += 1
            wait = REPORT_EVERY
        try:
            await asyncio.wait({waiter}, timeout=wait.total_seconds())
        except asyncio.CancelledError:
            if interrupted() and not told_to_stop:
                continue  # a stop cut the wait short: tell the thread, and wait for it a little
            call.interrupt(HandlerInterrupted)
            raise
    return True


def _report(queued: QueuedJob, ran: float, timeout: timedelta | None, reports: int) -> None:
    limit = "" if timeout is None else f" (its timeout is {timeout.total_seconds():g}s)"
    if reports == 0:
        log.warning(
            "job `%s` %s ran past its timeout in a thread%s; HandlerTimedOut is raised in the "
            "thread, which Python does between bytecodes only (a call into C such as a sleep, "
            "a socket read or a C extension gets it when it returns); the job keeps its slot "
            "and lease, and is settled as timed out once the thread returns",
            queued.name,
            queued.id,
            limit,
            extra=job_fields(queued),
        )
        return
    log.error(
        "job `%s` %s still runs in its thread %.0fs after it started%s; it keeps its slot and "
        "lease until the thread returns, and HandlerTimedOut is raised in it again; a thread "
        "that never returns holds the slot until the worker is restarted",
        queued.name,
        queued.id,
        ran,
        limit,
        extra=job_fields(queued),
    )


def _retrieve(waiter: asyncio.Future[Any]) -> None:
    """Take the outcome of a thread nobody awaits, so asyncio does not report it as lost."""
    if not waiter.cancelled():
        waiter.exception()


__all__ = ["REPORT_EVERY", "STOP_WAIT", "ThreadCall", "Threads", "see_out"]
