# SPDX-License-Identifier: MIT
"""The refusal of a job with an ordering key by a driver that cannot keep the order.

A job that says "run me after the earlier jobs of my key, never beside them"
and is queued anyway, unordered, fails in the worst way: silently, some of
the time, in production. So a driver whose `Capabilities.ordering_keys` is
False refuses the push outright, naming itself, why, and what keeps order,
before anything is stored. A job without a key costs one test of its
headers.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..envelope import QueuedJob
from ..errors import UnsupportedOperation
from ..job import ORDERING_KEY
from ..queue import Queue

ORDERED_DRIVERS = (
    "SQLite, PostgreSQL, MySQL/MariaDB, Redis, Kafka, SQS FIFO (`fifo=true`) or memory://"
)
"""The drivers that keep an ordering key's order, for the refusal's advice."""


def refuse_ordering_keys(queue: Queue, why: str, jobs: Iterable[QueuedJob]) -> None:
    """`UnsupportedOperation` if one of `jobs` carries an ordering key; `why` says why
    `queue`'s driver cannot keep the order."""
    for job in jobs:
        if job.headers and (key := job.headers.get(ORDERING_KEY)) is not None:
            raise UnsupportedOperation(
                f"job `{job.name}` {job.id} has the ordering key {key!r}, and the {queue.name} "
                f"driver ({queue.describe()}) cannot "
                f"run a key's jobs one at a time in dispatch order: {why}. Nothing was queued. "
                f"Dispatch it to a connection on {ORDERED_DRIVERS}, or give the job no "
                "ordering_key()"
            )


__all__ = ["ORDERED_DRIVERS", "refuse_ordering_keys"]
