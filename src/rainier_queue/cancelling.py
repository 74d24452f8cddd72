# SPDX-License-Identifier: MIT
"""Cancelling one job by id: removed while it waits, marked when it may be running.

Why two ways: a job nobody holds can simply go, where the driver can
delete one job by id (a SQL row not reserved, an entry of the in-process
queue), and then it is gone at once. A job a worker holds cannot be taken
from under it, and a driver that cannot delete one job (a Redis stream
entry under the reserve script's fencing, a JetStream message) cannot
remove a waiting one either: for those a mark, `cancel:<id>`, goes into
the connection's record store, which every worker reads on its
`pause_check` (`worker/cancels.py`). A worker running the job asks the
handler to stop; one that reserves it later settles it as cancelled
without running it. Either way the job ends acknowledged and recorded as
cancelled, never failed and never retried.

A driver with no store every worker reads (`Capabilities.cancellable`
False) refuses, naming itself, and stores nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ._clock import utcnow
from .batchstate import BATCH, Outcome, batch_store_of, member
from .envelope import QueuedJob
from .errors import UnsupportedOperation
from .jobstate import (
    CANCEL_KEPT,
    CANCELLED_KEPT,
    CancelledJob,
    JobRemover,
    RecordStore,
    cancel_key,
    cancelled_key,
)
from .lookup import lookup_of, records_of
from .queue import Queue

How = Literal["removed", "marked", "not found", "finished"]


@dataclass(frozen=True, slots=True)
class Cancellation:
    """What `cancel` did."""

    job_id: str
    how: How
    """`removed`: it waited and is gone. `marked`: a worker holds it (or the driver cannot
    remove a waiting one), and workers stop or skip it within their `pause_check`.
    `not found`: the driver found no such job; it is marked all the same, so it does not
    run if it turns up (a push on its way) while the mark lasts. `finished`: it is in the
    failed store or was cancelled already; nothing changed. (A success leaves no trace to
    tell from a job never pushed unless it was recorded, so it reads as `not found`.)"""

    def describe(self) -> str:
        if self.how == "removed":
            return f"job {self.job_id} was waiting and is removed; it will not run"
        if self.how == "marked":
            return (
                f"job {self.job_id} is marked cancelled: a worker running it asks its handler "
                "to stop within its --pause-check (1s by default), and one that takes it later "
                "does not run it; it ends as cancelled, not retried"
            )
        if self.how == "finished":
            return f"job {self.job_id} failed or was cancelled already; nothing was cancelled"
        return (
            f"no job {self.job_id} was found queued, delayed or running; it is marked "
            f"cancelled all the same, so it does not run if it turns up within "
            f"{CANCEL_KEPT.days} days"
        )


def cancellable(queue: Queue) -> RecordStore:
    """`queue`'s record store for cancellation marks, or a refusal that says why not."""
    store = records_of(queue)
    if queue.capabilities.cancellable and store is not None:
        return store
    raise UnsupportedOperation(
        f"the {queue.describe()} connection cannot cancel a job: the {queue.name} driver has "
        "no store that every worker reads to keep a cancellation in, so nothing was "
        "cancelled. A job's handler can check a flag of the application's own instead; "
        "the drivers that can cancel are named in docs/flow-control.md"
    )


async def cancel(queue: Queue, job_id: str) -> Cancellation:
    """Cancel job `job_id` on `queue`'s connection (see the module's doc)."""
    given: object = job_id
    if not isinstance(given, str) or not given.strip():
        raise ValueError(f"a job to cancel needs its id, not {job_id!r}")
    store = cancellable(queue)
    lookup = lookup_of(queue)
    missing = False
    if lookup is not None:
        found = await lookup.find_job(job_id)
        if found is not None and found.where == "failed":
            return Cancellation(job_id, "finished")
        if found is None:
            if await store.get_record(cancelled_key(job_id)) is not None:
                return Cancellation(job_id, "finished")
            # Not found is not proof of absence (a push on its way, a lookup that cannot
            # see every corner): the mark is left all the same, and costs one record.
            missing = True
    if isinstance(queue, JobRemover):
        removed = await queue.remove_job(job_id)
        if removed is not None:
            record = CancelledJob(
                job_id=job_id,
                name=removed.name,
                queue=removed.queue,
                at=utcnow(),
                how="removed while it waited",
            )
            await store.put_record(cancelled_key(job_id), record.to_json(), CANCELLED_KEPT)
            await _count_in_batch(queue, removed)
            return Cancellation(job_id, "removed")
    await store.put_record(cancel_key(job_id), job_id.encode(), CANCEL_KEPT)
    return Cancellation(job_id, "not found" if missing else "marked")


async def _count_in_batch(queue: Queue, removed: QueuedJob) -> None:
    """A removed job of a batch never reaches a worker, so its end is recorded here: as
    cancelled, once (a second record of it changes nothing), or the batch would never
    finish. A crash between the removal and this record leaves the batch one short."""
    belongs = member(removed.headers) if BATCH in removed.headers else None
    store = batch_store_of(queue) if belongs is not None else None
    if belongs is not None and store is not None:
        await store.record_in_batch(belongs, removed.id, Outcome.CANCELLED)


__all__ = ["Cancellation", "cancel", "cancellable"]
