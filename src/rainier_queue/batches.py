# SPDX-License-Identifier: MIT
"""Batches: a group of jobs, and callbacks queued once all of them have finished.

    batch_id = await (
        batch([Resize(image_id=i) for i in ids])
        .then(Publish(album_id=7))        # every job succeeded
        .catch(Report(album_id=7))        # any failed for good, or was cancelled
        .finally_(Unlock(album_id=7))     # always, after either
        .dispatch(manager)
    )
    progress = await manager.batch(batch_id)   # succeeded, failed, cancelled, pending

Why it needs a store, where a chain needs none: a callback waits for many
jobs that finish on many machines, so something must count them, and the
count must be shared. The connection's own store keeps it (a table, a Redis
hash, the memory driver's dict; `batchstate.py` says how the callbacks are
queued exactly once, and why a crash loses none), or, on a broker, a
store beside it that its workers share (`drivers/cached_batches.py`:
Kafka's lock store, a NATS bucket, the lock store an SQS or RabbitMQ
connection names in its `locks` option; callbacks at least once there).
The queue is the store, or holds it (`batchstate.batch_store_of`). A
connection without one (`Capabilities.batches` False) refuses a batch at
`dispatch`, naming the driver (and the `locks` option where that would
give it one), and nothing is queued.

`dispatch` does this, in order: pack every job and callback (a job that
cannot travel fails here, and nothing is stored); store the batch with its
total and its callbacks, sealed if the connection seals; then push the
jobs in bulk pushes of 5,000, each job carrying a small header
(`rq-batch`: the batch's id and its callbacks' queues). The batch is stored before its
first job is queued, so no job can finish before its batch exists. If the
push fails, the batch stays unfinished with jobs that never come: dispatch
raises, and a new batch is the way to try again (`manager.batch(id)` shows
how far the old one got).

A worker that finishes a job carrying the header records its end with the
store before it acknowledges the job (`worker/settle.py`): succeeded,
failed for good, or cancelled. A retry is not an end. A job with no header
pays one dictionary lookup.

The callbacks are ordinary jobs, run on their own queues with their own
attempts; the handler reads the counts from `ctx.batch` (`BatchCounts`).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol

from .batchstate import (
    BATCH,
    KINDS,
    BatchProgress,
    BatchStore,
    Callback,
    HoldsBatchStore,
    Member,
    batch_store_of,
    callback_id,
)
from .envelope.packing import DEFAULTS, build_envelopes
from .errors import NotProvisioned, UnsupportedOperation
from .job import Job
from .queue import Provisionable, Queue

PUSH_CHUNK = 5_000
"""Jobs per bulk push: a batch of 100,000 is twenty pushes, none holding a server long."""

_SPELLED = {"then": "then", "catch": "catch", "finally": "finally_"}


class _Manager(Protocol):
    """What `Batch.dispatch` needs of a `QueueManager` (which sits above this module)."""

    def connection(self, name: str | None = None) -> Queue: ...

    async def dispatch_many(
        self,
        jobs: Sequence[Job],
        *,
        connection: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> list[str | None]: ...


class Batch:
    """Jobs that run side by side, and callbacks for when all have finished (`batch(jobs)`)."""

    def __init__(self, jobs: Iterable[Job]) -> None:
        self.jobs = list(jobs)
        if not self.jobs:
            raise ValueError(
                "a batch needs at least one job: with none, nothing would ever finish it"
            )
        for index, job in enumerate(self.jobs):
            _check("job", index + 1, job)
        self.callbacks: dict[str, Job] = {}

    def then(self, job: Job) -> Batch:
        """`job` is queued when every job of the batch has succeeded."""
        return self._add("then", job)

    def catch(self, job: Job) -> Batch:
        """`job` is queued when any job of the batch failed for good or was cancelled."""
        return self._add("catch", job)

    def finally_(self, job: Job) -> Batch:
        """`job` is queued when every job of the batch has finished, however it ended."""
        return self._add("finally", job)

    def _add(self, kind: str, job: Job) -> Batch:
        if kind in self.callbacks:
            raise ValueError(
                f"this batch has a `{_SPELLED[kind]}` callback already; a batch has one of "
                "each (a callback job can dispatch more)"
            )
        _check(_SPELLED[kind], None, job)
        self.callbacks[kind] = job
        return self

    async def dispatch(self, manager: _Manager, *, connection: str | None = None) -> str:
        """Store the batch and queue its jobs on one connection; the batch's id."""
        queue = manager.connection(connection)
        store = batch_store(queue)
        batch_id = uuid.uuid4().hex
        kinds = [kind for kind in KINDS if kind in self.callbacks]
        packed = build_envelopes([(self.callbacks[kind], DEFAULTS) for kind in kinds])
        build_envelopes([(job, DEFAULTS) for job in self.jobs])  # every job fits, or none goes
        envelopes = [
            envelope.with_changes(id=callback_id(batch_id, kind))
            for kind, envelope in zip(kinds, packed, strict=True)
        ]
        await _check_provisioned(queue, [e.queue for e in envelopes])
        callbacks = [
            Callback.of(kind, sealed)
            for kind, sealed in zip(kinds, queue.sealed(envelopes), strict=True)
        ]
        await store.open_batch(batch_id, len(self.jobs), callbacks)
        headers = {BATCH: Member(batch_id, tuple(c.queue for c in callbacks)).header()}
        for start in range(0, len(self.jobs), PUSH_CHUNK):
            chunk = self.jobs[start : start + PUSH_CHUNK]
            await manager.dispatch_many(chunk, connection=connection, headers=headers)
        return batch_id

    def __repr__(self) -> str:
        parts = [f"batch({len(self.jobs)} jobs)"]
        parts += [f".{_SPELLED[kind]}({job.name})" for kind, job in self.callbacks.items()]
        return "".join(parts)


def batch(jobs: Iterable[Job]) -> Batch:
    """`jobs` to run side by side; add `.then`, `.catch`, `.finally_`, then `.dispatch(manager)`."""
    return Batch(jobs)


def batch_store(queue: Queue) -> BatchStore:
    """Where `queue`'s connection keeps batches, or a refusal that says why not and what to
    do instead."""
    store = batch_store_of(queue)
    if store is not None:
        return store
    if isinstance(queue, HoldsBatchStore) and queue.batch_store is None:
        raise UnsupportedOperation(
            f"the {queue.describe()} connection cannot keep a batch: the {queue.name} driver "
            "has no store of its own to count a batch's jobs in, and this connection names "
            "no lock store to count them in, so the callbacks could be lost; nothing was "
            "queued. Set the connection's `locks` option to a shared Redis or database "
            "store, the same for every process that dispatches or works it: "
            "`?locks=redis%3A%2F%2Fcache%3A6379%2F0` in its URL (the store's URL, "
            'URL-encoded) or `locks = "redis://cache:6379/0"` in its table '
            "(docs/workflows.md); the config's top-level `locks` (unique jobs, limits) is "
            "not read for batches. Or chain the work instead"
        )
    raise UnsupportedOperation(
        f"the {queue.describe()} connection cannot keep a batch: the {queue.name} driver has "
        "no store to count a batch's jobs in (neither its own, as the database, Redis and "
        "NATS drivers have, nor a lock store it counts in, as Kafka's, or SQS's and "
        "RabbitMQ's given `locks`), so the callbacks could be lost; nothing was queued. "
        "Dispatch batches on a connection that keeps them: memory, a database, Redis, "
        "Kafka, NATS, or SQS or RabbitMQ with `locks` set (docs/workflows.md names them), "
        "or chain the work instead"
    )


async def progress(queue: Queue, batch_id: str) -> BatchProgress | None:
    """Batch `batch_id` on `queue`'s connection now; None if it has no such batch."""
    given: object = batch_id
    if not isinstance(given, str) or not given.strip():
        raise ValueError(f"a batch to look up needs its id, not {batch_id!r}")
    return await batch_store(queue).batch_progress(batch_id.strip())


def _check(role: str, position: int | None, job: object) -> None:
    where = f"batch {role} {position}" if position is not None else f"the batch's `{role}`"
    if not isinstance(job, Job):
        raise TypeError(
            f"{where} is a {type(job).__name__}, not a Job (or the result of calling an "
            "@job function)"
        )
    if type(job).unique_id is not Job.unique_id and job.unique_id() is not None:
        raise ValueError(
            f"{where}, `{job.name}`, is a unique job: a duplicate would be dropped and never "
            "finish, so the batch would wait for ever (or, for a callback, it is queued by "
            "the store, outside the lock store). Make it not unique"
        )


async def _check_provisioned(queue: Queue, queues: list[str]) -> None:
    """`NotProvisioned` for a callback's queue that a push would be refused on."""
    if queue.capabilities.push_creates_resources or not isinstance(queue, Provisionable):
        return
    for finding in await queue.check_provisioned(list(dict.fromkeys(queues))):
        if finding.queue is not None and finding.provisioning_fixes:
            raise NotProvisioned(
                f"a callback of this batch goes to queue {finding.queue!r}, and on this "
                f"connection {finding.describe()}: run `rainier-queue provision --queue "
                f"{finding.queue}` first; nothing was queued",
                queue=finding.queue,
            )


__all__ = ["BATCH", "Batch", "batch", "batch_store", "progress"]
