# SPDX-License-Identifier: MIT
"""Wake idle workers in this process when a job is pushed, from any thread or loop.

A push may come from a web request's event loop, from the blocking facade's
private loop thread, or from a worker's own loop; the waiting worker may be
on yet another. An `asyncio.Event` belongs to one loop, so waiters register
a future on their own loop and a push resolves each one thread-safely.

A waiter that looks for work and then waits would miss a push that lands
between the two, so `heard` counts the signals sent, and `wait(since=...)`
returns at once when one was sent after the count the waiter took before it
looked.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from datetime import timedelta


class Wakeup:
    """A broadcast "something changed" signal that crosses threads and loops."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiters: set[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = set()
        self._heard = 0

    @property
    def heard(self) -> int:
        """How many signals were sent so far: take it before looking, pass it to `wait`."""
        return self._heard

    def notify(self) -> None:
        """Wake everyone waiting now."""
        with self._lock:
            self._heard += 1
            waiters, self._waiters = self._waiters, set()
        for loop, fut in waiters:
            with contextlib.suppress(RuntimeError):  # the waiter's loop already closed
                loop.call_soon_threadsafe(_resolve, fut)

    async def wait(self, timeout: timedelta, *, since: int | None = None) -> None:
        """Return on the next `notify`, or after `timeout`; at once if `since` (a `heard`
        taken earlier) is behind, since a signal was sent after it was taken."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        entry = (loop, fut)
        with self._lock:
            if since is not None and since != self._heard:
                return
            self._waiters.add(entry)
        try:
            await asyncio.wait_for(fut, timeout.total_seconds())
        except TimeoutError:
            pass
        finally:
            with self._lock:
                self._waiters.discard(entry)


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)
