# SPDX-License-Identifier: MIT
"""What a settle writes before it settles: a chain's next step, a batch member's end.

Why a module of its own: both are the same promise, kept by the order of
two writes. What must outlive a crash is written first and the job settled
second, so a worker that dies between the two leaves the job to run again,
and the first write is made again, where the other order would lose it.
Each wrapper also remembers that its first write was made, so a settle
tried again after an outage does not make it twice. `settle.py` wraps its
acknowledgements and failures in them.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from ..batchstate import BatchStore, Outcome, member
from ..envelope import QueuedJob
from ..errors import JobError, NotProvisioned
from ..queue import Queue, Reservation
from .accounts import job_fields

log = logging.getLogger("rainier_queue.worker")


class ChainBlocked(Exception):
    """The next step of a chain cannot be queued, however long the worker waits."""

    def __init__(self, error: JobError) -> None:
        super().__init__(str(error))
        self.error = error


def push_then(
    queue: Queue, step: QueuedJob, acknowledge: Callable[[Reservation], Awaitable[None]]
) -> Callable[[Reservation], Awaitable[None]]:
    """A chained job's acknowledgement: the next step pushed to `queue` first, then `acknowledge`.

    In that order, a crash between the two leaves the step unacknowledged, to
    run again and push the next step then: a chain never loses a step, at the
    cost of a step that may be pushed twice (`chains.py`). Once pushed, it is
    not pushed again when the acknowledgement is tried again after an outage.
    """
    pushed = False

    async def push_then_acknowledge(reservation: Reservation) -> None:
        nonlocal pushed
        if not pushed:
            try:
                await queue.push(step)
            except NotProvisioned as exc:
                raise ChainBlocked(
                    JobError(
                        f"the job succeeded, but the next step of its chain, `{step.name}`, "
                        f"cannot be queued: {exc}; then retry this job (it runs again)"
                    )
                ) from exc
            pushed = True
            log.info(
                "job `%s` %s done; dispatched the next step of its chain, `%s` %s",
                reservation.job.name,
                reservation.job.id,
                step.name,
                step.id,
                extra=job_fields(step),
            )
        await acknowledge(reservation)

    return push_then_acknowledge


def recorded_first(
    batches: BatchStore | None,
    queued: QueuedJob,
    outcome: Outcome,
    settle: Callable[[Reservation], Awaitable[None]],
) -> Callable[[Reservation], Awaitable[None]]:
    """A batch job's settle: its end recorded in `batches` first, then `settle`.

    In that order, a crash between the two leaves the job unsettled, to run
    again and be recorded again, which the store ignores (it records each
    job id once); the other order could lose the record, and with it the
    batch's callbacks (`batchstate.py`). Recorded once, it is not recorded
    again when the settle is tried again after an outage.
    """
    recorded = False
    belongs = member(queued.headers)

    async def record_then_settle(reservation: Reservation) -> None:
        nonlocal recorded
        if not recorded and belongs is not None:
            if batches is None:
                log.error(
                    "job `%s` %s belongs to batch %s, but this worker's driver keeps no "
                    "batches, so its end is not counted and the batch does not finish",
                    queued.name,
                    queued.id,
                    belongs.batch_id,
                )
            else:
                now = await batches.record_in_batch(belongs, queued.id, outcome)
                if now is None:
                    log.warning(
                        "job `%s` %s belongs to batch %s, which its store does not have "
                        "(gone a week after it finished, or never stored); not counted",
                        queued.name,
                        queued.id,
                        belongs.batch_id,
                    )
                elif now.finished and now.done == now.total:
                    log.info(
                        "batch %s finished: %d succeeded, %d failed, %d cancelled",
                        belongs.batch_id,
                        now.succeeded,
                        now.failed,
                        now.cancelled,
                    )
            recorded = True
        await settle(reservation)

    return record_then_settle


__all__ = ["ChainBlocked", "push_then", "recorded_first"]
