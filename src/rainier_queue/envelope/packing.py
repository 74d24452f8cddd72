# SPDX-License-Identifier: MIT
"""Packing a `Job` into the envelope (`QueuedJob`) a backend stores.

Packing needs only the job and the few things a dispatch may override, so
it sits below the drivers and the manager alike: the manager packs what it
dispatches, and a driver that pushes inside the application's own
transaction (PostgreSQL's `push_in`) packs a job it is handed, without
either reaching for the other.

Everything that can be wrong with a job is found while packing, before any
lock is taken or any backend is touched: the payload fits the job's fields,
the queue name is sane, the headers are strings. A web request that
dispatches a bad job fails in that request, with nothing half-done.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import cast

from .._clock import utcnow
from ..job import LIMIT_KEY, ORDERING_KEY, ORDERING_KEY_LENGTH, Job
from .model import QueuedJob, new_job_ids

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


DEFAULTS = DispatchOptions()
"""The options of a plain dispatch: read, never changed, by `build_envelope`."""


def build_envelope(job: Job, options: DispatchOptions = DEFAULTS) -> QueuedJob:
    """The envelope for `job`: payload checked, queue and attempts decided, not yet locked."""
    [envelope] = build_envelopes([(job, options)])
    return envelope


def build_envelopes(items: Sequence[tuple[Job, DispatchOptions]]) -> list[QueuedJob]:
    """The envelopes for a batch of jobs, in order; the first bad job raises, as one would.

    Made together, they share what does not differ between them: the clock
    is read once (every job of one dispatch is created at the same moment),
    the ids come from one call for randomness, and each queue name is
    checked once.
    """
    now = utcnow()
    ids = new_job_ids(len(items))
    queues: dict[str, str] = {}
    fixed: dict[type[Job], str | None] = {}  # a class's queue, when it is a constant
    envelopes: list[QueuedJob] = []
    for job_id, (job, options) in zip(ids, items, strict=True):
        cls = type(job)
        queue = options.queue
        if not queue:
            if cls not in fixed:
                fixed[cls] = None if callable(cls.queue) else job.queue_name()
            queue = fixed[cls] or job.queue_name()
        if queue not in queues:
            queues[queue] = check_queue_name(queue)
        if options is DEFAULTS:
            available, tries, headers = now, cls.tries, {}
        else:
            available = _available_at(options, now)
            tries = options.tries if options.tries is not None else cls.tries
            headers = _checked_headers(options.headers)
        if cls.rate_limit is not None or cls.concurrency_limit is not None:
            headers = _with_limit_key(job, headers)
        if cls.ordering_key is not Job.ordering_key:
            headers = _with_ordering_key(job, headers)
        envelopes.append(
            QueuedJob.fresh(
                job_id,
                cls.name,
                job.packed_payload(),
                queue,
                tries if tries > 1 else 1,
                available,
                now,
                headers,
            )
        )
    return envelopes


def _with_limit_key(job: Job, headers: dict[str, str]) -> dict[str, str]:
    """`headers` and the job's limit key, which the worker reads without building the job."""
    key = job.limit_key()
    if key is None:
        return headers
    if not isinstance(key, str):
        raise TypeError(f"{type(job).__qualname__}.limit_key() returns a string or None")
    return {**headers, LIMIT_KEY: key}


def _with_ordering_key(job: Job, headers: dict[str, str]) -> dict[str, str]:
    """`headers` and the job's ordering key, which the driver keeps the order of."""
    key: object = job.ordering_key()
    if key is None:
        return headers
    if not isinstance(key, str) or not key:
        raise TypeError(
            f"{type(job).__qualname__}.ordering_key() returns a non-empty string or None"
        )
    if len(key) > ORDERING_KEY_LENGTH:
        raise ValueError(
            f"{type(job).__qualname__}.ordering_key() gave {len(key)} characters, over the "
            f"limit of {ORDERING_KEY_LENGTH}: return a shorter key (an id, or a hash of a "
            "long one)"
        )
    return {**headers, ORDERING_KEY: key}


def _available_at(options: DispatchOptions, now: datetime) -> datetime:
    if options.at is not None:
        return options.at if options.at.tzinfo else options.at.replace(tzinfo=now.tzinfo)
    if options.delay is not None:
        if options.delay < timedelta(0):
            raise ValueError("a dispatch delay cannot be negative")
        return now + options.delay
    return now


def _checked_headers(headers: dict[str, str]) -> dict[str, str]:
    for key, value in cast(dict[object, object], headers).items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise TypeError("job headers map strings to strings")
    return dict(headers)


def envelope_of(job: QueuedJob | Job) -> QueuedJob:
    """`job` as an envelope: as given, or packed with the job's own options."""
    return job if isinstance(job, QueuedJob) else build_envelope(job)


__all__ = [
    "DEFAULTS",
    "MAX_QUEUE_NAME",
    "DispatchOptions",
    "build_envelope",
    "build_envelopes",
    "check_queue_name",
    "envelope_of",
    "unique_lock_name",
]
