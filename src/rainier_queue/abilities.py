# SPDX-License-Identifier: MIT
"""The port's optional abilities: what some drivers can do beyond reserve and settle.

Why apart from `queue.py`: a `Queue` is the one thing every driver must be;
these are what only some are (rewrite stored jobs, keep a failed store,
count by state, tell the oldest job's age, provision, migrate, enqueue
inside an application's transaction, pause a queue, diagnose itself). Each
is a `Protocol` that a caller checks with `isinstance`, so a driver without
one is refused with a clear error instead of failing half-way. `queue.py`
exports every name here beside the port, so `from rainier_queue.queue
import Provisionable` keeps working.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol, runtime_checkable

from .envelope import QueuedJob


@dataclass(frozen=True, slots=True, kw_only=True)
class FailedJob:
    """A job that used up its attempts (or could not run at all), and why."""

    job: QueuedJob
    error: str
    failed_at: datetime


Rewrite = Callable[[QueuedJob], "QueuedJob | None"]
"""A stored job's replacement (same id and envelope, another payload), or None to keep it."""


@dataclass(frozen=True, slots=True)
class Rewritten:
    """What a `rewrite_payloads` did."""

    rewritten: int
    """Jobs whose payload was stored anew."""
    in_flight: int = 0
    """Jobs a worker held that the driver cannot change under it (Redis: a delivered stream
    entry), left as they were and not offered; a later rewrite, once they settle, finds
    those put back."""


@runtime_checkable
class RewritesStoredJobs(Protocol):
    """Rewriting the payload of jobs already stored, in place: what `reencrypt` needs.

    Drivers whose storage can change a stored job have it (the SQL tables,
    memory); a log or a broker, whose messages cannot be changed once
    written, has not (docs/encryption.md says what to do there instead).
    """

    async def rewrite_payloads(self, rewrite: Rewrite) -> Rewritten:
        """Offer every stored job (waiting, delayed, reserved, failed) to `rewrite`; store
        the payload of each it returns in place of the old one, unless the job changed or
        went meanwhile. `rewrite` must not raise."""
        ...


@runtime_checkable
class FailedJobListing(Protocol):
    """Listing failed jobs, entries that were not jobs included. Every failed store has it."""

    async def failed_jobs(self, *, queue: str | None = None, limit: int = 100) -> list[FailedJob]:
        """Failed jobs, newest first."""
        ...


@runtime_checkable
class FailedJobStore(FailedJobListing, Protocol):
    """Listing, retrying and forgetting failed jobs. Drivers with a failed store have it."""

    async def retry_failed(self, job_id: str) -> bool:
        """Put a failed job back on its queue with its full attempts; False if no such job.

        The job's `unique_key` is dropped: its lock was given back when it
        failed, and a worker finishing the retry must not release a lock
        that a newer dispatch holds.
        """
        ...

    async def forget_failed(self, job_id: str) -> bool:
        """Delete one failed job; False if no such job."""
        ...

    async def flush_failed(self, *, queue: str | None = None) -> int:
        """Delete every failed job (of one queue, or all) and return how many."""
        ...


@dataclass(frozen=True, slots=True)
class QueueCounts:
    """What one queue holds, by state: the answer to "is anything left to do?"."""

    waiting: int
    """Due now and free to reserve."""
    delayed: int
    """Not due yet (a delayed dispatch or a retry's backoff)."""
    reserved: int
    """Held by a worker under a lease, running or not: a dead worker's jobs count here
    until another worker reclaims them."""
    next_due: datetime | None = None
    """When the soonest delayed job falls due or held lease ends (None when there is
    neither); in the past for a lease that lapsed and was not reclaimed yet."""

    @property
    def total(self) -> int:
        """Every job still to be done on the queue."""
        return self.waiting + self.delayed + self.reserved


@runtime_checkable
class Countable(Protocol):
    """A backend that can count a queue's jobs by state (`rainier-queue size`, drains)."""

    async def counts(self, queue: str) -> QueueCounts:
        """`queue`'s jobs, waiting, delayed and reserved, and when the next one falls due."""
        ...


@runtime_checkable
class OldestWaiting(Protocol):
    """A backend that can tell how long a queue's longest-waiting job has been due.

    For the metrics' "oldest job age" (`telemetry/depth.py`): a queue whose
    depth holds steady may still be stuck, and the age of what waits says
    so. Only a backend that can answer from what it stores (a row's due
    time, a list in memory) declares it; a log or a broker that would have
    to read every message does not, and the metric is absent for it.
    """

    async def oldest_wait(self, queue: str) -> timedelta | None:
        """How long the job due longest ago on `queue`, and free to reserve, has been due
        (on the backend's clock); None when no job is due."""
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class Finding:
    """Something a queue needs on its server that is missing or not as asked.

    The driver says what and why; whoever shows it (`rainier-queue doctor`)
    turns `provisioning_fixes` into the command to run, with the connection
    and queue it knows about.
    """

    subject: str
    """What it is about, as the server names it: "topic `app.emails`", "tables `rq_*`"."""
    problem: str
    """What is wrong, as the rest of a sentence: "does not exist", "has 1 partition, and
    `partitions` asks for 3"."""
    queue: str | None = None
    """The queue it belongs to; None for what every queue of the connection shares."""
    provisioning_fixes: bool = True
    """Whether `provision` puts it right. False: a person must, as `fix` says (a topic's
    replication, a queue of the wrong type that holds jobs)."""
    fix: str = ""
    """What else to do or know: the step a person takes when provisioning cannot, or what
    provisioning's fix costs."""
    fixed_on_first_use: bool = False
    """The driver puts it right itself the first time the connection is used (a schema
    under `migrate = true`): worth doing beforehand, not wrong."""

    def describe(self) -> str:
        """The finding as one sentence, without the command that fixes it."""
        text = f"{self.subject} {self.problem}"
        return f"{text}; {self.fix}" if self.fix else text


@runtime_checkable
class Provisionable(Protocol):
    """A backend whose queues need something made on the server first (`rainier-queue provision`).

    Tables and migrations for SQL; topics with their partitions, and the
    failed topic, for Kafka; queues, streams, consumers and dead-letter
    targets for a broker. Both calls are idempotent and safe beside running
    workers: provisioning only creates and grows, never deletes, empties or
    recreates anything that holds jobs; what it cannot put right without
    that comes back as a `Finding` with `provisioning_fixes` False.
    """

    async def provision(self, queues: Sequence[str]) -> list[str]:
        """Make what `queues` need, or bring it up to date; one line per change made.

        Empty when everything was in place. A refusal by the server (no
        permission, a broker that cannot do it) raises `BrokerRejected`.
        """
        ...

    async def check_provisioned(self, queues: Sequence[str]) -> list[Finding]:
        """What `queues` need that is missing or not as asked; empty when all is in place.

        Reads only: it never creates anything, even on a broker that makes a
        topic when asked about one.
        """
        ...


@runtime_checkable
class Migratable(Protocol):
    """A backend with a schema version, read and upgraded (the SQL drivers).

    Its `Provisionable` side is what the commands use; this one says which
    version the database has, for `doctor`'s report and the upgrade tests.
    """

    async def migrate(self) -> list[str]:
        """Apply pending migrations; return the names of those applied."""
        ...

    async def schema_status(self) -> tuple[int, int]:
        """(applied version, version this code expects)."""
        ...

    @property
    def migrates_on_first_use(self) -> bool:
        """Whether a schema behind this code's is brought up to date on first use, or refused."""
        ...


@runtime_checkable
class TransactionalEnqueue(Protocol):
    """A backend that can push inside the application's own transaction.

    The connection's type is the driver's client's (a psycopg connection for
    PostgreSQL), so it is not spelled out here; the job exists exactly when
    that transaction commits.
    """

    async def push_in(self, connection: Any, job: Any) -> str:
        """Push `job` on `connection`'s open transaction; the job's id."""
        ...


@runtime_checkable
class Pausable(Protocol):
    """A backend whose queues can be paused: workers take nothing from a paused queue.

    The mark lives in the connection's own store, so a worker in any process
    sees it (workers look on a cadence, `WorkerOptions.pause_check`, never per
    job). A paused queue still takes pushes and still counts its jobs; only
    reserving from it stops, and only in workers, which read the mark: a
    direct `reserve` on the port is not refused.
    """

    async def pause(self, queue: str) -> bool:
        """Mark `queue` paused; True if it was not paused already."""
        ...

    async def resume(self, queue: str) -> bool:
        """Take the mark off `queue`; True if it was paused."""
        ...

    async def paused(self, queues: Sequence[str]) -> frozenset[str]:
        """Which of `queues` are paused now (one read, however many are asked about)."""
        ...


@runtime_checkable
class Diagnosable(Protocol):
    """A backend that can say how safely its server is set up (`rainier-queue doctor`)."""

    async def health_warnings(self) -> list[str]:
        """Sentences about settings that put accepted jobs at risk; empty when all is well."""
        ...


@runtime_checkable
class HealthNotes(Protocol):
    """A backend that can say how its server is set up, beyond warnings (`doctor`)."""

    async def health_notes(self) -> list[str]:
        """Plain facts worth showing (a replication role), each a sentence."""
        ...


__all__ = [
    "Countable",
    "Diagnosable",
    "FailedJob",
    "FailedJobListing",
    "FailedJobStore",
    "Finding",
    "HealthNotes",
    "Migratable",
    "OldestWaiting",
    "Pausable",
    "Provisionable",
    "QueueCounts",
    "Rewrite",
    "RewritesStoredJobs",
    "Rewritten",
    "TransactionalEnqueue",
]
