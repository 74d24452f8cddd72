# SPDX-License-Identifier: MIT
"""`OneThread`: calls run in order on one thread of their own, each result handed to its loop.

Every claim and settle of the SQLite queue hops to the connection's thread
and back. Through `loop.run_in_executor` a hop cost about 65 us of CPU
(a concurrent future, its condition and lock, a callback chain back to an
asyncio future, and a pool thread still busy with its own bookkeeping while
the loop wants the interpreter lock); this hands the call over on a
`queue.SimpleQueue` and the result back with one `call_soon_threadsafe`,
about 28 us (20,000 hops of a no-op in a row, CPU of both threads). A busy
worker makes a hop for every batch of jobs: an in-process worker draining
20,000 no-op jobs at concurrency 8 spent about a sixth less CPU per job.

What the executor promised is kept: calls run one at a time in the order
they were made; a call whose caller was cancelled still runs to its end
(only its result is dropped); the thread starts on the first call; and a
call made before the interpreter exits is finished before it does (the
thread is a daemon, stopped and joined by an exit hook, so a program that
never closes its queue still exits).
"""

from __future__ import annotations

import asyncio
import atexit
import queue
import threading
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")
A = TypeVar("A")

_Call = tuple[asyncio.AbstractEventLoop, "asyncio.Future[Any]", Callable[[Any], Any], Any]


class OneThread:
    """A thread of its own that runs `fn(arg)` calls one after another."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._calls: queue.SimpleQueue[_Call | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._stopped = False

    def submit(self, fn: Callable[[A], T], arg: A) -> asyncio.Future[T]:
        """Run `fn(arg)` on the thread; a future of the running loop for its result."""
        if self._stopped:
            raise RuntimeError("this thread was stopped")
        if self._thread is None:
            self._start()
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._calls.put((loop, future, fn, arg))
        return future

    def stop(self) -> None:
        """Take no more calls; the thread ends once those already made have run."""
        if not self._stopped:
            self._stopped = True
            self._calls.put(None)

    def join(self) -> None:
        """Wait for the thread to end (after `stop`)."""
        if self._thread is not None:
            self._thread.join()

    def _start(self) -> None:
        self._thread = threading.Thread(target=self._serve, name=self._name, daemon=True)
        self._thread.start()
        _LIVE.add(self)

    def _serve(self) -> None:
        calls = self._calls
        while (call := calls.get()) is not None:
            loop, future, fn, arg = call
            del call  # hold nothing of a finished call while waiting for the next
            try:
                result = fn(arg)
            except BaseException as exc:
                _hand_over(loop, _fail, future, exc)
            else:
                _hand_over(loop, _succeed, future, result)
            del loop, future, fn, arg


def _hand_over(loop: asyncio.AbstractEventLoop, how: Callable[..., None], *args: object) -> None:
    try:  # noqa: SIM105 (once per call: a plain try costs nothing here, suppress() a frame)
        loop.call_soon_threadsafe(how, *args)
    except RuntimeError:
        pass  # the loop is closed: nobody waits for the outcome any more


def _succeed(future: asyncio.Future[Any], result: object) -> None:
    if not future.cancelled():
        future.set_result(result)


def _fail(future: asyncio.Future[Any], error: BaseException) -> None:
    if not future.cancelled():
        future.set_exception(error)


_LIVE: weakref.WeakSet[OneThread] = weakref.WeakSet()
"""Threads started and not yet stopped and joined at exit."""


@atexit.register
def _finish_at_exit() -> None:
    """Let each thread run the calls already made, then end, before the interpreter does."""
    threads = list(_LIVE)
    for thread in threads:
        thread.stop()
    for thread in threads:
        thread.join()


__all__ = ["OneThread"]
