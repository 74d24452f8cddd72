# SPDX-License-Identifier: MIT
"""The `Queue` port: the one interface every backend implements.

Reserve, then settle; never pop. A worker that takes a job and dies must
not take the job with it, so taking a job only hides it for a while (a
*lease*), and the job is gone for good only when the worker says it
finished. Everything else follows:

- `reserve` hands out `Reservation`s: one delivery of a job to one worker,
  with the driver's handle, a lease deadline and a token unique to it.
- `acknowledge`, `release`, `fail` and `renew` are conditional on that
  token. A worker whose lease lapsed (and whose job another worker took)
  gets `LeaseLost`; its late settle is never applied.
- A lapsed lease is reclaimed by whichever worker reserves next, so no
  separate reaper has to run.
- `attempts` is counted at reserve time, so a delivery to a worker that was
  killed still counts, and a job that kills its worker every time reaches
  its last attempt and the failed store instead of looping forever.

What differs between backends is declared, not hidden: each driver carries
`Capabilities`, and the contract suite holds it to every flag, both ways.
"""

from __future__ import annotations

import abc
import asyncio
import itertools
import os
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from types import TracebackType
from typing import ClassVar, Self

from .abilities import (
    Countable,
    Diagnosable,
    FailedJob,
    FailedJobListing,
    FailedJobStore,
    Finding,
    HealthNotes,
    Migratable,
    OldestWaiting,
    Pausable,
    Provisionable,
    QueueCounts,
    Rewrite,
    RewritesStoredJobs,
    Rewritten,
    TransactionalEnqueue,
)
from .envelope import QueuedJob
from .envelope.sealing import KeyRing
from .errors import UnsupportedOperation

DEFAULT_LEASE = timedelta(seconds=90)
"""How long a reservation hides a job before another worker may take it.

The worker renews leases while a job runs, so this is not a cap on a job's
run time; it is how long the work of a worker that really died waits before
someone else picks it up. Ninety seconds, as upstream, so the default
60-second job timeout fits inside it.
"""


@dataclass(frozen=True, slots=True, kw_only=True)
class Capabilities:
    """What a driver promises. The contract suite holds it to each flag."""

    deferred: bool = True
    """False only for `InlineQueue`, which runs the job inside `push`."""
    survives_restart: bool
    """Accepted jobs are still there after the backend restarts."""
    shared_between_processes: bool
    """Workers in other processes (or on other machines) see the same jobs."""
    may_lose_accepted_job: bool = False
    """An acknowledged push can still vanish (Redis acknowledges before fsync)."""
    delayed_job_steps_aside: bool = True
    """A job that is not due lets the ones behind it run. False for a log (Kafka)."""
    reserved_job_steps_aside: bool = True
    """A job a worker holds lets the ones behind it be reserved. False for a log (Kafka),
    where a partition hands out one job at a time and the next waits for it to settle."""
    renews_leases: bool = True
    """`renew` really extends a reservation's lease."""
    reclaims_lapsed_leases: bool = True
    """A reservation whose lease lapsed is handed out again to the next reserve."""
    failed_store: bool = True
    """Failed jobs are kept and can be listed, retried and forgotten (`FailedJobStore`)."""
    failed_listing: bool = True
    """Failed jobs can be listed (`FailedJobListing`). Every failed store can; so can a
    driver that keeps failed jobs where they cannot be changed (Kafka's failed topics)."""
    raw_push: bool = False
    """`push_raw` stores a bare body for a consumer that is not this library."""
    transactional_enqueue: bool = False
    """A push can join the application's own database transaction."""
    fifo_within_queue: bool = True
    """Due jobs of one queue come out in the order they were pushed."""
    due_on_server_clock: bool = False
    """A job falls due by the server's clock: a push sends its delay, not a moment, so a
    producer whose clock runs ahead or behind neither holds a job back nor lets it out
    early. False where producer and queue share one clock (memory, SQLite) or where
    due times travel as moments (Kafka)."""
    push_creates_resources: bool = True
    """A push to a queue nothing provisioned is accepted, the driver making whatever the
    queue needs (a Redis stream, the SQL tables under `migrate = true`), and the job is
    reserved like any other. False: the push is refused with `NotProvisioned`, naming
    `rainier-queue provision`, and nothing is stored (Kafka, whose partition count is a
    decision a push cannot make). Such a driver is `Provisionable`."""
    pausable: bool = False
    """A queue can be paused and resumed (`Pausable`), the mark kept in the connection's
    own store (a table, a key, a KV entry, the lock store) so every worker on every
    machine sees it. False: `pause` is refused with `UnsupportedOperation`, naming the
    driver, and nothing is stored."""
    job_lookup: bool = False
    """`find_job` finds a job by id in the driver's own storage (`jobstate.JobLookup`):
    queued, delayed, reserved or failed. False for a log or broker that cannot look a
    message up; `QueueManager.status` then answers `unknown` and says why."""
    cancellable: bool = False
    """A job can be cancelled by id (`QueueManager.cancel`): a waiting or delayed one is
    removed where the driver can remove one job by id (`jobstate.JobRemover`), else
    marked; a running one is asked to stop through a mark in the connection's record
    store, which every worker reads on its `pause_check`. False: `cancel` is refused with
    `UnsupportedOperation`, naming the driver, and nothing is stored."""
    limits: bool = False
    """Rate and concurrency limits per key (`Job.rate_limit`, `Job.concurrency_limit`) are
    counted in a store every worker of the connection shares without further setup: its
    own database or Redis (a worker started by the CLI opens the cache store there),
    Kafka's lock store, this process's memory for `memory://`. False: a worker whose jobs
    declare limits needs `locks` set to a shared database or Redis, and refuses to start
    without it, naming it (docs/flow-control.md)."""
    batches: bool = False
    """Batches are kept in a store the connection's workers share (`batchstate.BatchStore`,
    the queue itself or one it holds: `batchstate.batch_store_of`): a job's end is recorded
    once per job id, and the callbacks are queued when the last is recorded
    (docs/workflows.md). An instance may say more than its class: an SQS or RabbitMQ
    connection keeps batches only when its `locks` option names a lock store. False:
    dispatching a batch is refused with `UnsupportedOperation`, naming the driver (and the
    option that would give it a store), and nothing is queued."""
    batch_callbacks_exactly_once: bool = True
    """With `batches`: the write that records a batch's last job also queues its callbacks
    (SQL, Redis, memory), so they are queued exactly once. False: the count lives in a
    lock store and the callbacks go to a broker, a second server (Kafka, NATS, SQS and
    RabbitMQ given `locks`: `drivers/cached_batches.py`): counts stay exact, but a worker
    that dies between producing the callbacks and marking them produced (or a finishing
    job run twice at once after its lease lapsed) queues them again under the same ids, so
    they run **at least once** and a callback handler should be idempotent
    (docs/workflows.md)."""
    ordering_keys: bool = False
    """Jobs that share an ordering key (`Job.ordering_key()`) run one at a time, in the order
    they were dispatched, while other keys' jobs run beside them: a job waits while an
    earlier one of its key is waiting, delayed (a retry's backoff) or running, and goes once
    that one has succeeded or failed. (On Kafka and SQS FIFO a retry with a backoff goes to
    the back of its key's line instead: the contract suite's `ordered_retries`. On Kafka,
    Redis and SQS FIFO a key's line is its queue's: `ordering_across_queues`.) False:
    a dispatch of a job with an ordering key is
    refused with `UnsupportedOperation`, naming the driver and what keeps order instead;
    never queued unordered (docs/flow-control.md)."""
    records: bool = False
    """Small records with a time to live are kept beside the jobs (`jobstate.RecordStore`):
    worker heartbeats, succeeded records and results. False: workers are not listed and
    results cannot be kept, and asking says so."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Reservation:
    """One delivery of a job to one worker.

    Not the job itself: a job redelivered after its worker died is the same
    job with a new reservation. `handle` belongs to the driver (a row id, a
    stream entry id, a receipt handle, a partition offset) and is never
    written into the job's payload.
    """

    job: QueuedJob
    """The job, with `attempts` already counting this delivery."""
    token: str
    """Unique to this delivery; every settle is conditional on it."""
    lease_until: datetime | None
    """When another worker may take the job. None: the driver never reclaims."""
    lease: timedelta | None
    """The lease's length, so the worker knows how often to renew."""
    handle: object = None
    """The driver's own reference to this delivery."""


class _Tokens:
    """Reservation tokens: this process's random prefix, then a count.

    A token fences the settles of one delivery: it must differ from every
    other delivery's, and nothing is guarded by keeping it secret (whoever
    can read the broker can settle anything). A random prefix of 96 bits
    per process, drawn again in a forked child, and a count behind it make
    every token unique, for a fraction of a random draw per token, which
    a reserve of many jobs paid per job.
    """

    def __init__(self) -> None:
        self.reseed()

    def reseed(self) -> None:
        self.prefix = secrets.token_hex(12)
        self.count = itertools.count(1)

    def next(self) -> str:
        return f"{self.prefix}{next(self.count):x}"


_TOKENS = _Tokens()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_TOKENS.reseed)


def new_token() -> str:
    """A fresh reservation token, unique to this delivery."""
    return _TOKENS.next()


class Queue(abc.ABC):
    """A queue backend. Reserve, then acknowledge; never pop.

    Drivers subclass this, so one that forgets a method fails when it is
    built, not when the method is first called.
    """

    name: ClassVar[str]
    """Diagnostic label: `memory`, `sync`, `sqlite`, `postgres`, ..."""
    capabilities: ClassVar[Capabilities]
    idle_wait: ClassVar[str] = "a sleep of the worker's `sleep` between two reserves"
    """How an idle worker waits for work on this driver (`wait_for_work`), in words, for
    the messages that explain an option the upstream had (`block_for`)."""

    payload_keys: KeyRing | None = None
    """The key ring this connection seals payloads with (docs/encryption.md), set by the
    connection layer when its config has `encryption`; None: payloads are stored as given.
    Whatever pushes to a queue seals through it (`sealed`); the worker opens with it."""

    def sealed(self, jobs: Sequence[QueuedJob]) -> Sequence[QueuedJob]:
        """`jobs` as this connection stores them: payloads sealed if it has a key ring."""
        keys = self.payload_keys
        return jobs if keys is None else [keys.seal(job) for job in jobs]

    @abc.abstractmethod
    async def push(self, job: QueuedJob) -> str:
        """Enqueue `job` and return its id (the job's, never a broker's message id)."""

    async def push_many(self, jobs: Sequence[QueuedJob]) -> list[str]:
        """Enqueue several jobs, in order, as cheaply as the backend allows.

        The default pushes one at a time; drivers with a bulk path override it.
        """
        return [await self.push(job) for job in jobs]

    async def push_raw(self, queue: str, body: str) -> None:
        """Store a bare body with no envelope, for a consumer that is not this library.

        Most drivers have nothing sensible to do with a body that is not a
        job, so the default refuses and stores nothing.
        """
        raise UnsupportedOperation(
            f"the {self.name} driver does not take a raw payload; push a job envelope instead"
        )

    @abc.abstractmethod
    async def reserve(self, queue: str, *, limit: int = 1) -> list[Reservation]:
        """Hide up to `limit` due jobs from other workers and hand them over.

        Jobs whose lease lapsed are handed out again, each delivery counting
        an attempt. Returns an empty list when nothing is due; it does not
        wait (see `wait_for_work`).
        """

    async def wait_for_work(self, queues: Sequence[str], timeout: timedelta) -> None:
        """Return when a job may be due on one of `queues`, or after `timeout`.

        An idle worker calls this instead of sleeping, so a driver that can
        hear about new work (LISTEN/NOTIFY, a blocking read, an in-process
        signal) wakes it within milliseconds. The default just sleeps.
        Returning early without work is allowed; the worker reserves again.
        """
        await asyncio.sleep(timeout.total_seconds())

    async def wait_and_reserve(
        self, queue: str, timeout: timedelta, *, limit: int
    ) -> list[Reservation]:
        """Wait for work on `queue` (as `wait_for_work`), then reserve up to `limit` from it.

        An idle worker serving one queue calls this. A driver that can
        queue the reserve behind its wait on the server itself overrides it
        and says so in `reserves_behind_wait`: the reserve then runs the
        moment the wait ends, and a job pushed to an idle worker costs it one
        round trip, not two. May return an empty list (nothing came in time).

        Cancelling it loses nothing: a reserve already under way finishes,
        and whatever it took is handed back with its attempt refunded before
        the cancellation goes on.
        """
        await self.wait_for_work([queue], timeout)
        return await self._reserve_handing_back(queue, limit)

    async def _reserve_handing_back(self, queue: str, limit: int) -> list[Reservation]:
        """`reserve`, finished even if the caller is cancelled, and then handed back."""
        reserving = asyncio.ensure_future(self.reserve(queue, limit=limit))
        try:
            return await asyncio.shield(reserving)
        except asyncio.CancelledError:
            await self.hand_back_unstarted(await _settled(reserving))
            raise

    async def hand_back_unstarted(self, reservations: Sequence[Reservation]) -> None:
        """Put reserved jobs that never started back at once, attempts refunded; best effort.

        A failure is left to the leases: the jobs come back when theirs lapse.
        """
        for reservation in reservations:
            try:
                await self.release(reservation, count_attempt=False)
            except Exception:
                continue  # its lease brings it back

    @property
    def reserves_behind_wait(self) -> bool:
        """Whether `wait_and_reserve` sends the reserve with the wait, in one round trip."""
        return False

    @abc.abstractmethod
    async def acknowledge(self, reservation: Reservation) -> None:
        """The job finished: remove it for good. `LeaseLost` if the reservation is stale."""

    async def acknowledge_many(self, reservations: Sequence[Reservation]) -> list[Exception | None]:
        """Acknowledge several reservations; one result per reservation, in order.

        An item's failure (its `LeaseLost`, say) is returned, not raised, so one
        stale reservation does not hide the others. The default settles one
        at a time; drivers with a batch path override it.
        """
        results: list[Exception | None] = []
        for reservation in reservations:
            try:
                await self.acknowledge(reservation)
            except Exception as exc:
                results.append(exc)
            else:
                results.append(None)
        return results

    async def acknowledge_and_reserve(
        self, reservations: Sequence[Reservation], queue: str, *, limit: int
    ) -> tuple[list[Exception | None], list[Reservation]]:
        """Acknowledge `reservations`, then reserve up to `limit` from `queue`, in one go.

        A busy worker does exactly this after every batch. A driver that can
        do both in one round trip and one transaction overrides it and says
        so in `combines_acknowledge_and_reserve`; the worker then sends its
        acknowledgements this way, so a batch costs one trip to the broker
        instead of two. The default below shows the meaning, and the worker
        does not use it. Returns what `acknowledge_many` and `reserve` would.
        An override that raises must have done neither (or, as for any call
        whose answer was lost, left the outcome unknown).
        """
        outcomes = await self.acknowledge_many(reservations) if reservations else []
        return outcomes, await self.reserve(queue, limit=limit)

    @property
    def combines_acknowledge_and_reserve(self) -> bool:
        """Whether `acknowledge_and_reserve` is one round trip and one transaction here."""
        return False

    @abc.abstractmethod
    async def release(
        self,
        reservation: Reservation,
        *,
        delay: timedelta = timedelta(0),
        count_attempt: bool = True,
    ) -> None:
        """Put the job back, due after `delay`.

        `count_attempt=False` gives the delivery's attempt back: for a job a
        worker handed back unrun (or interrupted) at shutdown, which should not
        cost the job one of its tries.
        """

    async def renew(self, reservation: Reservation) -> None:  # noqa: B027 - a no-op default
        """Say the job is still being worked, so its lease does not lapse.

        Extends the lease by its full length from now. `LeaseLost` if the
        reservation is no longer current. Drivers that never reclaim a lease
        (memory without a lease, inline) have nothing to extend and keep the
        default, which does nothing.
        """

    @abc.abstractmethod
    async def fail(self, reservation: Reservation, error: str) -> None:
        """Move the job to the failed store with `error`. `LeaseLost` if stale.

        The failed record is written before the job is removed, so a crash
        between the two leaves the job twice (once waiting, once failed),
        never nowhere.
        """

    @abc.abstractmethod
    async def size(self, queue: str) -> int:
        """How many jobs wait on `queue`, delayed ones included, reserved ones not."""

    @abc.abstractmethod
    async def clear(self, queue: str) -> int:
        """Discard every waiting job on `queue` and return how many."""

    def on_worker_start(self) -> None:  # noqa: B027 - optional hook, nothing to do by default
        """Called by a worker before its first reserve: its reserves come again and again.

        For a driver whose broker pushes jobs to a consumer (RabbitMQ): a worker
        consumes, so a busy worker's reserve takes what was pushed instead of
        asking for each job, while a script's one-off reserve still holds exactly
        what it was handed. It does no I/O; the default does nothing.
        """

    async def on_worker_stop(self) -> None:  # noqa: B027 - optional hook, nothing to do by default
        """Called by a worker that stops, after its last job is settled or handed back.

        For a driver that holds something on behalf of the worker between jobs
        (the Kafka driver's partition leases), so the next worker need not wait
        for it to lapse. The queue stays usable; the default does nothing.
        """

    async def aclose(self) -> None:  # noqa: B027 - optional hook, nothing to free by default
        """Free connections and threads. The queue is unusable afterwards."""

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    @property
    def lease(self) -> timedelta | None:
        """The lease length this driver gives a reservation, or None if it never reclaims."""
        return None

    def describe(self) -> str:
        """A one-line, credential-free description for logs and the CLI."""
        return self.name

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.describe()}>"


async def _settled(reserving: asyncio.Future[list[Reservation]]) -> list[Reservation]:
    """What a reserve the caller stopped waiting for took, once it is done ([] if it failed)."""
    try:
        return await reserving
    except Exception:
        return []


__all__ = [
    "DEFAULT_LEASE",
    "Countable",
    "Diagnosable",
    "HealthNotes",
    "Capabilities",
    "FailedJob",
    "FailedJobListing",
    "FailedJobStore",
    "Finding",
    "Migratable",
    "OldestWaiting",
    "Pausable",
    "Provisionable",
    "Queue",
    "QueueCounts",
    "Reservation",
    "Rewrite",
    "Rewritten",
    "RewritesStoredJobs",
    "TransactionalEnqueue",
    "new_token",
]
