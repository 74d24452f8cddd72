# SPDX-License-Identifier: MIT
"""Turning a `Job` into a `QueuedJob`, and the `PendingDispatch` builder.

Everything that can be wrong with a dispatch is checked here, before any
lock is taken or any backend is touched: the payload fits the job's fields,
the queue name is sane, the connection is declared. A web request that
dispatches a bad job fails in that request, with nothing half-done.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, cast

from ._clock import utcnow
from .envelope import QueuedJob, new_job_id
from .job import Job

if TYPE_CHECKING:
    from .manager import QueueManager

MAX_QUEUE_NAME = 191
"""The longest queue name every driver stores: MySQL's indexed `VARCHAR(191)` (191 four-byte
characters fit an InnoDB index key) is the tightest."""


def check_queue_name(name: str) -> str:
    """A queue name must be non-empty, printable and of reasonable length."""
    if not str(name).strip():
        raise ValueError("a queue name must be a non-empty string")
    if len(name) > MAX_QUEUE_NAME:
        raise ValueError(f"a queue name is at most {MAX_QUEUE_NAME} characters, got {len(name)}")
    if not name.isprintable():
        raise ValueError(f"queue name {name!r} contains control characters")
    return name


def unique_lock_name(job_name: str, unique_id: str) -> str:
    """The lock that makes dispatches of (job name, unique id) unique.

    The job's name is part of it, so equal ids of different job types never
    collide. Stored in the envelope as `unique_key`, so the worker can give
    the lock back without rebuilding the job.
    """
    return f"unique:{job_name}:{unique_id}"


@dataclass(slots=True, kw_only=True)
class DispatchOptions:
    """What a dispatch may override about a job."""

    queue: str | None = None
    connection: str | None = None
    delay: timedelta | None = None
    at: datetime | None = None
    tries: int | None = None
    headers: dict[str, str] = field(default_factory=dict)


def build_envelope(job: Job, options: DispatchOptions) -> QueuedJob:
    """The envelope for `job`: payload checked, queue and attempts decided, not yet locked."""
    now = utcnow()
    queue = check_queue_name(options.queue or job.queue_name())
    if options.at is not None:
        available = options.at if options.at.tzinfo else options.at.replace(tzinfo=now.tzinfo)
    elif options.delay is not None:
        if options.delay < timedelta(0):
            raise ValueError("a dispatch delay cannot be negative")
        available = now + options.delay
    else:
        available = now
    tries = options.tries if options.tries is not None else type(job).tries
    for key, value in cast(dict[object, object], options.headers).items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise TypeError("job headers map strings to strings")
    return QueuedJob(
        id=new_job_id(),
        name=type(job).name,
        payload=job.to_payload(),
        queue=queue,
        max_attempts=max(1, tries),
        available_at=available,
        created_at=now,
        headers=dict(options.headers),
    )


class PendingDispatch:
    """A dispatch being configured: `manager.pending(job).delay(...).on_queue(...).send()`.

    Builds nothing and locks nothing until `send()`, so a builder that is
    configured and dropped leaves no trace.
    """

    def __init__(self, manager: QueueManager, job: Job) -> None:
        self._manager = manager
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
        return await self._manager._send(self._job, self._options)
