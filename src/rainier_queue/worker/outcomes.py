# SPDX-License-Identifier: MIT
"""Recording a success where `QueueManager.status` and `result` can find it.

Why: a job that succeeded is deleted, so nothing says it ever ran. Keeping
a record of every success would cost a write per job that nobody asked
for, so a record is written only when someone asked: the worker's
`keep_succeeded`, the job class's `keep_result` (its return value goes in
the record), or the envelope's `KEEP_RECORD_HEADER` (the scheduler's, so a
tick's job can be found after it ran). Otherwise a success costs the one
check in `wanted`.

The record is written before the job is acknowledged: a job is then
always findable, queued or recorded, never between the two. If the
acknowledgement then fails the job runs again, and the lookup asks the
job's storage first, so it shows where the job is now.
"""

from __future__ import annotations

import json
import logging
from datetime import timedelta

from .._clock import utcnow
from ..jobstate import (
    ATTEMPTS_KEPT,
    ATTEMPTS_LISTED,
    KEEP_RECORD_HEADER,
    Outcome,
    PastAttempt,
    RecordStore,
    attempts_from_json,
    attempts_key,
    attempts_to_json,
    job_key,
    keep_record_for,
)
from .verdicts import Attempt

log = logging.getLogger("rainier_queue.worker")


class OutcomeRecorder:
    """Writes a succeeded job's `Outcome` when the worker, the job or its envelope asks."""

    def __init__(
        self, store: RecordStore, *, keep_succeeded: timedelta | None, worker_id: str
    ) -> None:
        self._store = store
        self._keep_succeeded = keep_succeeded
        self._worker_id = worker_id

    def wanted(self, attempt: Attempt) -> bool:
        """Whether this success is to be recorded (cheap: asked for every success)."""
        if self._keep_succeeded is not None:
            return True
        job = attempt.job
        if job is not None and type(job).keep_result is not None:
            return True
        return KEEP_RECORD_HEADER in attempt.reservation.job.headers

    async def record(self, attempt: Attempt) -> None:
        """Write the record, if wanted; a failure is logged, and the job still acknowledged."""
        if not self.wanted(attempt):
            return
        queued = attempt.reservation.job
        job = attempt.job
        keep_result = type(job).keep_result if job is not None else None
        ttl = max(
            (
                t
                for t in (self._keep_succeeded, keep_result, keep_record_for(queued.headers))
                if t is not None
            ),
            default=timedelta(0),
        )
        if ttl <= timedelta(0):
            return
        has_result, value, problem = False, None, None
        if keep_result is not None:
            try:
                json.dumps(attempt.value)
            except (TypeError, ValueError) as exc:
                problem = (
                    f"its return value, a {type(attempt.value).__name__}, is not JSON ({exc}); "
                    "return JSON-ready data (dicts, lists, strings, numbers) to keep it"
                )
                log.warning("job `%s` %s: result not kept: %s", queued.name, queued.id, problem)
            else:
                has_result, value = True, attempt.value
        outcome = Outcome(
            job_id=queued.id,
            name=queued.name,
            queue=queued.queue,
            attempt=queued.attempts,
            finished_at=utcnow(),
            worker=self._worker_id,
            has_result=has_result,
            result=value,
            result_problem=problem,
        )
        try:
            await self._store.put_record(job_key(queued.id), outcome.to_json(), ttl)
        except Exception as exc:
            log.warning(
                "job `%s` %s succeeded, but its record could not be written "
                "(`status` will not find it): %s",
                queued.name,
                queued.id,
                exc,
            )

    async def record_attempt(self, attempt: Attempt, summary: str) -> None:
        """Add a failed attempt's account to the job's history (a retry's or the last one's).

        Written while the worker still holds the job, so the next attempt,
        wherever it runs, reads this one's. A failure is logged and ignored: the
        history is a help, the retry is what matters.
        """
        queued = attempt.reservation.job
        key = attempts_key(queued.id)
        try:
            raw = await self._store.get_record(key)
            history = attempts_from_json(raw) if raw is not None else []
        except (ValueError, KeyError, TypeError):
            history = []
        except Exception as exc:
            log.debug("could not read job %s's attempts: %s", queued.id, exc)
            return
        history.append(
            PastAttempt(
                number=attempt.number,
                error=summary[:2000],
                at=utcnow(),
                worker=self._worker_id,
            )
        )
        try:
            await self._store.put_record(
                key, attempts_to_json(history[-ATTEMPTS_LISTED:]), ATTEMPTS_KEPT
            )
        except Exception as exc:
            log.debug("could not record job %s's attempt %d: %s", queued.id, attempt.number, exc)


__all__ = ["OutcomeRecorder"]
