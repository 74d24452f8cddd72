# SPDX-License-Identifier: MIT
"""`PendingDispatch`: one dispatch, configured step by step, then sent.

`manager.pending(job).delay(60).on_queue("slow").send()` reads as the
sentence it is. The builder only gathers options; packing the job
(`packing.py`) and taking its lock are the manager's, which hands the
builder the one function that sends. The builder never holds the manager
itself, so the manager can build it without the two importing each other.

The packing names (`DispatchOptions`, `build_envelope`, `check_queue_name`,
`unique_lock_name`) are re-exported here, where they used to live.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime, timedelta

from .envelope.packing import (
    MAX_QUEUE_NAME,
    DispatchOptions,
    build_envelope,
    check_queue_name,
    unique_lock_name,
)
from .job import Job

Send = Callable[[Job, DispatchOptions], Awaitable[str | None]]
"""Dispatch one job with these options: its id, or None for a dropped duplicate."""


class PendingDispatch:
    """A dispatch being configured: `manager.pending(job).delay(...).on_queue(...).send()`.

    Builds nothing and locks nothing until `send()`, so a builder that is
    configured and dropped leaves no trace.
    """

    def __init__(self, send: Send, job: Job) -> None:
        self._send = send
        self._job = job
        self._options = DispatchOptions()

    def on_queue(self, queue: str) -> PendingDispatch:
        """Send to `queue` instead of the job's own."""
        self._options.queue = check_queue_name(queue)
        return self

    def on_connection(self, name: str) -> PendingDispatch:
        """Send through the named connection (which backend; orthogonal to the queue)."""
        self._options.connection = name
        return self

    def delay(self, delay: timedelta | float) -> PendingDispatch:
        """Make the job due after `delay` (a timedelta or seconds)."""
        self._options.delay = delay if isinstance(delay, timedelta) else timedelta(seconds=delay)
        return self

    def at(self, moment: datetime) -> PendingDispatch:
        """Make the job due at `moment` (naive times are UTC)."""
        self._options.at = moment
        return self

    def tries(self, tries: int) -> PendingDispatch:
        """Override the job's `tries` (at least 1)."""
        self._options.tries = max(1, tries)
        return self

    def with_headers(self, headers: Mapping[str, str]) -> PendingDispatch:
        """Add headers (trace context and the like) to the envelope."""
        self._options.headers.update(headers)
        return self

    async def send(self) -> str | None:
        """Dispatch now; the job id, or None when a duplicate of a unique job was dropped."""
        return await self._send(self._job, self._options)


__all__ = [
    "MAX_QUEUE_NAME",
    "DispatchOptions",
    "PendingDispatch",
    "Send",
    "build_envelope",
    "check_queue_name",
    "unique_lock_name",
]
