# SPDX-License-Identifier: MIT
"""An outbox row: the envelope bound for the target, carried whole inside a job row.

Why a row of its own shape: the outbox lives in a SQL database queue's
tables (so it inherits their claims, leases, wake-ups and migrations), but
what waits there is not a job for a worker. Each row is addressed to its
target connection (the row's queue is the connection's name, so one outbox
table can feed several targets, each relay draining its own), due at once
(a delayed job's delay is the target's business), and carries the target's
envelope unchanged, id included, in its documented JSON form. The row's id
is the job's id, so the id the application got back is the one the target
sees, and the one a target that can drops duplicates by.
"""

from __future__ import annotations

from .._clock import utcnow
from ..envelope import QueuedJob
from ..errors import MalformedEntry

ROW_NAME = "rainier-queue.outbox"
"""The name every outbox row carries, so a row is never mistaken for a job (or run as one)."""


def outbox_row(job: QueuedJob, target: str) -> QueuedJob:
    """`job` as the outbox row that carries it to the `target` connection."""
    now = utcnow()
    return QueuedJob.fresh(job.id, ROW_NAME, job.to_dict(), target, 1, now, job.created_at, {})


def carried(row: QueuedJob) -> QueuedJob:
    """The envelope an outbox row carries, as the application packed it.

    `MalformedEntry` naming what is wrong when the row is not an outbox row
    (another program's row in the outbox table, or one written by hand).
    """
    if row.name != ROW_NAME:
        raise MalformedEntry("name", f"is {row.name!r}, not an outbox row ({ROW_NAME!r})")
    job = QueuedJob.from_dict(row.payload)
    if job.id != row.id:
        raise MalformedEntry("id", f"the row's id {row.id!r} differs from its job's {job.id!r}")
    return job


__all__ = ["ROW_NAME", "carried", "outbox_row"]
