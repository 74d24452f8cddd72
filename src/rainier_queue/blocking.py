# SPDX-License-Identifier: MIT
"""Dispatch from code that has no event loop (Django or Flask views, scripts).

The core is asyncio. Rather than a hand-written blocking twin of every
method, one private event loop runs on a daemon thread and each blocking
call submits its coroutine there and waits for the answer. The connections
a manager opens belong to that loop, so a manager is used either from async
code or through this facade, not both.

The facade knows the manager only by the few methods it calls
(`Dispatcher`), so the manager can build one without the two modules
importing each other.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine, Sequence
from typing import Any, Protocol, TypeVar

from .dispatch import PendingDispatch
from .job import Job
from .queue import Queue

T = TypeVar("T")


class Dispatcher(Protocol):
    """What the facade calls on a `QueueManager`."""

    async def dispatch(self, job: Job) -> str | None: ...

    async def dispatch_many(self, jobs: Sequence[Job]) -> list[str | None]: ...

    def connection(self, name: str | None = None) -> Queue: ...

    async def aclose(self) -> None: ...


class LoopThread:
    """An event loop on a daemon thread that runs coroutines for blocking callers."""

    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="rainier-queue-blocking", daemon=True
        )
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run `coro` on the private loop and wait for its result (or its exception)."""
        if threading.current_thread() is self._thread:
            raise RuntimeError("a blocking call cannot be made from the facade's own loop")
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def close(self) -> None:
        """Stop the loop and its thread."""
        if self._loop.is_running():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=5)
        if not self._loop.is_running():
            self._loop.close()


class BlockingManager:
    """The dispatch half of a `QueueManager`, callable without `await`."""

    def __init__(self, manager: Dispatcher) -> None:
        self.manager = manager
        self._runner = LoopThread()

    def dispatch(self, job: Job) -> str | None:
        """Dispatch `job`; the job id, or None for a dropped duplicate."""
        return self._runner.run(self.manager.dispatch(job))

    def dispatch_many(self, jobs: Sequence[Job]) -> list[str | None]:
        """Dispatch several jobs with one bulk push."""
        return self._runner.run(self.manager.dispatch_many(jobs))

    def send(self, pending: PendingDispatch) -> str | None:
        """Send a configured `PendingDispatch` (`manager.pending(job).delay(5)`)."""
        return self._runner.run(pending.send())

    def size(self, queue: str = "default", connection: str | None = None) -> int:
        """Jobs waiting on `queue`."""
        return self._runner.run(self.manager.connection(connection).size(queue))

    def close(self) -> None:
        """Close the manager's connections and stop the private loop."""
        try:
            self._runner.run(self.manager.aclose())
        finally:
            self._runner.close()

    def __enter__(self) -> BlockingManager:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
