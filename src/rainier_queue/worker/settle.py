# SPDX-License-Identifier: MIT
"""Carrying out a verdict: acknowledge, release or fail, and everything around it.

What happens to a job after it ran is where a queue keeps or breaks its
promises, so the order here is deliberate:

- success: acknowledge (batched with other jobs that finished at the same
  time, see `acks.py`), then give back the job's uniqueness lock (so the
  next dispatch of it is accepted), then report; a step of a chain pushes
  the next step before its acknowledgement (`chains.py` says why);
- a failure with attempts left: release with the job's own `backoff`, and
  keep the uniqueness lock, because the job is still pending;
- a final failure: move the job to the failed store, give back the lock (so
  a permanent failure does not block the dispatch that fixes it), run the
  job's `failed` hook, then report; a step of a chain says in its failure
  where the chain stopped;
- an interrupted job: hand it back at once with its attempt refunded, so a
  deploy does not cost a job one of its tries or leave it waiting for a lease.

A plain success (no uniqueness lock to give back, no listeners, no chain, no
renew in flight) is settled without waiting for it (`settle_soon`): the job's
acknowledgement joins the next batch with a callback that does the rest, so
its task ends as its handler returns instead of waking once more for the
acknowledgement. Its result is recorded exactly as `settle` would record it;
an acknowledgement the broker fails is then retried as `settle` does, in a
task of its own.

A settle the broker refuses for being stale (`LeaseLost`) is counted and
dropped: another worker holds the job now. A broker error is ridden out
like any other (see `outage.py`); the lease keeps being renewed meanwhile,
so the job is not handed to someone else while its result waits to be
recorded.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

from ..batchstate import BATCH, BatchStore, Outcome
from ..chains import CHAIN, next_step, stopped_at
from ..durations import human_duration
from ..envelope import QueuedJob
from ..envelope.sealing import SealedPayloadError
from ..errors import BrokerError, JobError, LeaseLost
from ..events import (
    Event,
    EventDispatcher,
    JobCancelled,
    JobFailed,
    JobProcessed,
    JobReleased,
)
from ..job import Job
from ..locks import LockManager
from ..queue import Queue, Reservation
from .accounts import describe, failure_record, job_fields
from .acks import AckBatcher
from .cancels import CancelWatch
from .first_writes import ChainBlocked, push_then, recorded_first
from .leases import Lease
from .options import WorkerStats
from .outage import Outage
from .outcomes import OutcomeRecorder
from .runner import Runner
from .verdicts import Attempt, Verdict

log = logging.getLogger("rainier_queue.worker")


class Settler:
    """Applies attempts to the queue, the lock store, the stats and the listeners."""

    def __init__(
        self,
        queue: Queue,
        runner: Runner,
        stats: WorkerStats,
        outage: Outage,
        *,
        events: EventDispatcher | None,
        locks: LockManager | None,
        hard_stop: asyncio.Event,
        give_up: Callable[[BrokerError], None],
        acks: AckBatcher,
        finished: Callable[[Any], None] = lambda _: None,
        outcomes: OutcomeRecorder | None = None,
        cancels: CancelWatch | None = None,
        batches: BatchStore | None = None,
    ) -> None:
        self._queue = queue
        self._batches = batches
        """Where a batch's jobs record their ends; None on a driver that keeps no batches."""
        self._cancels = cancels
        """Where cancellations are recorded; None on a driver that cannot cancel."""
        self._outcomes = outcomes
        """Records successes someone asked for; None on a driver that keeps no records."""
        self._runner = runner
        self._stats = stats
        self._outage = outage
        self._events = events
        self._locks = locks
        self._hard_stop = hard_stop
        self._give_up = give_up
        self._warned_no_locks = False
        self._acks = acks
        acks.told = self.acknowledged
        self._finished = finished
        """Called with the key `settle_soon` was given once that job is settled or given up."""
        """Where successes are acknowledged: the worker's batcher, which its reserves also
        take from, so acknowledgements can ride along with the next reserve."""
        self._retries: set[asyncio.Task[None]] = set()
        """Acknowledgements `settle_soon` took that the broker failed, being retried."""

    async def settle(self, attempt: Attempt, lease: Lease) -> None:
        """Record what became of `attempt` wherever it has to be recorded."""
        verdict = attempt.verdict
        if verdict is Verdict.SUCCEEDED:
            await self._succeeded(attempt, lease)
        elif verdict is Verdict.INTERRUPTED:
            await self._hand_back(attempt, lease)
        elif verdict is Verdict.ABANDONED:
            self._leave_to_lapse(attempt)
        elif verdict is Verdict.CANCELLED:
            await self._cancelled(attempt, lease)
        elif verdict in (Verdict.UNRUNNABLE, Verdict.EXHAUSTED):
            await self._failed(attempt, lease, _error_of(attempt))
        elif attempt.is_last:
            error = _error_of(attempt)
            if verdict is Verdict.RETRY:
                error = JobError(
                    f"job `{attempt.context.name}` asked to be retried ({error}) on its last "
                    f"attempt ({attempt.number} of {attempt.context.max_attempts})"
                )
            await self._failed(attempt, lease, error)
        else:
            await self._retry(attempt, lease)

    def settle_soon(self, attempt: Attempt, lease: Lease, key: object) -> bool:
        """Settle a plain success without waiting; False if it needs `settle` instead.

        When True, `finished(key)` is called once the result is recorded or
        given up, as the end of an awaited `settle` would have been.
        """
        queued = attempt.reservation.job
        headers = queued.headers
        if (
            attempt.verdict is not Verdict.SUCCEEDED
            or self._events
            or queued.unique_key is not None
            or (headers and (CHAIN in headers or BATCH in headers))
            or lease.lost
            or lease.is_locked()
            or (self._outcomes is not None and self._outcomes.wanted(attempt))
        ):
            return False
        lease.settling = True
        self._acks.acknowledge_soon(lease.reservation, (attempt, lease, key))
        return True

    def acknowledged(self, told: list[tuple[_Soon, BaseException | None]]) -> None:
        """The rest of `_succeeded`, for a batch of `settle_soon`'s acknowledgements once
        their outcomes are known (the batcher's `told`)."""
        stats = self._stats
        by_name = stats.by_name
        logs = log.isEnabledFor(logging.INFO)  # per job: build the record only if kept
        recorded = False
        for (attempt, lease, key), outcome in told:
            lease.settling = False
            try:
                if outcome is None:
                    lease.closed = True
                    recorded = True
                    name = attempt.context.name
                    stats.processed += 1
                    by_name[name] = by_name.get(name, 0) + 1
                    if logs:
                        self._log_done(attempt)
                elif isinstance(outcome, LeaseLost):
                    self._lost(lease, "acknowledge", outcome)
                elif isinstance(outcome, BrokerError):
                    retry = asyncio.get_running_loop().create_task(
                        self._acknowledge_again(attempt, lease, key, outcome)
                    )
                    self._retries.add(retry)
                    retry.add_done_callback(self._retries.discard)
                    continue
                elif not isinstance(outcome, asyncio.CancelledError):
                    raise outcome
            except Exception:
                queued = lease.reservation.job
                log.exception(
                    "the worker failed while handling job `%s` %s; it runs again once its "
                    "lease lapses",
                    queued.name,
                    queued.id,
                )
            self._finished(key)
        if recorded:
            self._outage.succeeded("settle")

    async def _acknowledge_again(
        self,
        attempt: Attempt,
        lease: Lease,
        key: object,
        error: BrokerError,
    ) -> None:
        """`settle_soon`'s acknowledgement failed: wait as `_apply` would, then settle anew."""
        try:
            if await self._ride_out(lease, "acknowledge", error):
                await self._succeeded(attempt, lease)
        except Exception:
            queued = lease.reservation.job
            log.exception(
                "the worker failed while handling job `%s` %s; it runs again once its lease lapses",
                queued.name,
                queued.id,
            )
        finally:
            self._finished(key)

    # -- outcomes ------------------------------------------------------------------

    async def _succeeded(self, attempt: Attempt, lease: Lease) -> None:
        queued = attempt.reservation.job
        try:
            step = next_step(queued, self._queue.payload_keys) if CHAIN in queued.headers else None
        except SealedPayloadError as error:
            # The next step cannot be opened here (no ring, or not its key): failed, so a
            # retry once the key is given goes on with the chain; nothing is pushed sealed
            # under an id it was not sealed for.
            await self._failed(attempt, lease, error)
            return
        if self._outcomes is not None:
            await self._outcomes.record(attempt)  # before the job is gone, never after
        acknowledge: Callable[[Reservation], Awaitable[None]] = (
            self._acks.acknowledge
            if step is None
            else push_then(self._queue, step, self._acks.acknowledge)
        )
        if BATCH in queued.headers:
            acknowledge = recorded_first(self._batches, queued, Outcome.SUCCEEDED, acknowledge)
        try:
            if not await self._apply(lease, "acknowledge", acknowledge):
                return
        except ChainBlocked as blocked:
            # Waiting does not make a queue exist: the step goes to the failed store,
            # to be retried (and run again) once the next step's queue is provisioned.
            await self._failed(attempt, lease, blocked.error)
            return
        await self._release_unique(queued)
        self._recorded(attempt)
        if self._events:  # no event is built for nobody
            duration = timedelta(seconds=time.monotonic() - attempt.started)
            await self._emit(JobProcessed(job=queued, duration=duration))

    def _recorded(self, attempt: Attempt) -> None:
        """Count and log a success the broker has recorded."""
        self._count(attempt.reservation.job, processed=True)
        if log.isEnabledFor(logging.INFO):  # per job: build the record's fields only if kept
            self._log_done(attempt)

    def _log_done(self, attempt: Attempt) -> None:
        queued = attempt.reservation.job
        log.info(
            "job `%s` %s done in %.3fs (attempt %d of %d)",
            queued.name,
            queued.id,
            time.monotonic() - attempt.started,
            attempt.number,
            attempt.context.max_attempts,
            extra=job_fields(queued, attempt.number),
        )

    async def _retry(self, attempt: Attempt, lease: Lease) -> None:
        queued = attempt.reservation.job
        error = _error_of(attempt)
        job = attempt.job
        assert job is not None  # only a job that ran can be retried
        delay = attempt.retry_delay if attempt.verdict is Verdict.RETRY else None
        if delay is None:
            delay = _backoff(job, attempt.number)

        async def release(reservation: Reservation) -> None:
            await self._queue.release(reservation, delay=delay)

        if self._outcomes is not None:  # before the next attempt can start anywhere
            await self._outcomes.record_attempt(attempt, describe(error))
        if not await self._apply(lease, "release", release):
            return
        self._stats.released += 1
        summary = describe(error)
        if attempt.verdict is Verdict.RETRY:
            log.info(
                "job `%s` %s asked to be retried in %s: %s",
                queued.name,
                queued.id,
                human_duration(delay),
                summary,
                extra=job_fields(queued, attempt.number),
            )
        else:
            log.warning(
                "job `%s` %s failed on attempt %d of %d, retrying in %s: %s",
                queued.name,
                queued.id,
                attempt.number,
                attempt.context.max_attempts,
                human_duration(delay),
                summary,
                extra=job_fields(queued, attempt.number),
            )
        if self._events:
            await self._emit(JobReleased(job=queued, delay=delay, error=summary))

    async def _failed(self, attempt: Attempt, lease: Lease, error: BaseException) -> None:
        queued = attempt.reservation.job
        record = failure_record(attempt, error)
        chained = stopped_at(queued) if CHAIN in queued.headers else None
        if chained is not None:
            record = f"{record}\n{chained}"

        async def fail_it(reservation: Reservation) -> None:
            await self._queue.fail(reservation, record)

        fail: Callable[[Reservation], Awaitable[None]] = fail_it
        if BATCH in queued.headers:
            fail = recorded_first(self._batches, queued, Outcome.FAILED, fail)
        if self._outcomes is not None:
            await self._outcomes.record_attempt(attempt, describe(error))
        if not await self._apply(lease, "fail", fail):
            return
        await self._release_unique(queued)
        self._count(queued, processed=False)
        summary = describe(error)
        log.error(
            "job `%s` %s failed for good on attempt %d of %d: %s",
            queued.name,
            queued.id,
            attempt.number,
            attempt.context.max_attempts,
            summary,
            exc_info=error if attempt.verdict is Verdict.RAISED else None,
            extra=job_fields(queued, attempt.number),
        )
        if chained is not None:
            log.error("job `%s` %s: %s", queued.name, queued.id, chained)
        await self._runner.call_failed_hook(dataclasses.replace(attempt, error=error))
        if self._events:
            await self._emit(JobFailed(job=queued, error=summary))

    async def _cancelled(self, attempt: Attempt, lease: Lease) -> None:
        """Cancelled before or while it ran: acknowledged, neither failed nor retried."""
        queued = attempt.reservation.job
        acknowledge: Callable[[Reservation], Awaitable[None]] = self._queue.acknowledge
        if BATCH in queued.headers:
            acknowledge = recorded_first(self._batches, queued, Outcome.CANCELLED, acknowledge)
        if not await self._apply(lease, "acknowledge", acknowledge):
            return
        while_running = not attempt.before_start
        if self._cancels is not None:
            await self._cancels.carried_out(attempt, while_running=while_running)
        await self._release_unique(queued)
        self._stats.cancelled += 1
        log.warning(
            "job `%s` %s cancelled %s; acknowledged, not retried",
            queued.name,
            queued.id,
            "while it ran" if while_running else "before it ran",
            extra=job_fields(queued, attempt.number),
        )
        if self._events:
            await self._emit(JobCancelled(job=queued, while_running=while_running))

    async def _hand_back(self, attempt: Attempt, lease: Lease) -> None:
        queued = attempt.reservation.job

        async def release(reservation: Reservation) -> None:
            await self._queue.release(reservation, count_attempt=False)

        if not await self._apply(lease, "hand back", release):
            return
        if attempt.before_start:
            self._stats.returned_unstarted += 1
        else:
            self._stats.interrupted += 1
        log.info(
            "handed job `%s` %s back %s; its attempt is refunded",
            queued.name,
            queued.id,
            "before it started (a stop, or its queue paused)"
            if attempt.before_start
            else "unfinished (a stop cut it short)",
            extra=job_fields(queued, attempt.number),
        )

    async def step_aside(self, lease: Lease, why: str, wait: timedelta) -> None:
        """Over its key's limit: back to the queue unrun, due after `wait`, attempt refunded."""
        queued = lease.reservation.job

        async def release(reservation: Reservation) -> None:
            await self._queue.release(reservation, delay=wait, count_attempt=False)

        if not await self._apply(lease, "set aside", release):
            return
        self._stats.limited += 1
        log.debug(
            "job `%s` %s waits %.3fs: %s; set aside unrun, its attempt given back",
            queued.name,
            queued.id,
            wait.total_seconds(),
            why,
            extra=job_fields(queued),
        )

    def _leave_to_lapse(self, attempt: Attempt) -> None:
        """A thread still runs the job after a stop: record nothing, and let its lease lapse."""
        queued = attempt.reservation.job
        lease = attempt.reservation.lease
        self._stats.abandoned += 1
        log.error(
            "job `%s` %s still runs in its thread %.0fs after it started, though the stop "
            "interrupted it; it is not handed back, so no other worker starts it beside that "
            "thread: its lease is no longer renewed and lapses%s, and its next delivery counts "
            "as an attempt; the thread ends only with this process",
            queued.name,
            queued.id,
            time.monotonic() - attempt.started,
            "" if lease is None else f" within {lease.total_seconds():g}s",
            extra=job_fields(queued, attempt.number),
        )

    # -- plumbing ----------------------------------------------------------------

    async def _apply(
        self, lease: Lease, what: str, operation: Callable[[Reservation], Awaitable[None]]
    ) -> bool:
        """Run one settle, riding out broker errors. True if it was applied."""
        while True:
            try:
                async with lease.lock:
                    if lease.lost:
                        return False
                    await operation(lease.reservation)
                    lease.closed = True
            except LeaseLost as exc:
                self._lost(lease, what, exc)
                return False
            except BrokerError as exc:
                if not await self._ride_out(lease, what, exc):
                    return False
            else:
                self._outage.succeeded("settle")
                return True

    def _lost(self, lease: Lease, what: str, error: LeaseLost) -> None:
        """The broker refused a settle as stale: another worker has the job now."""
        queued = lease.reservation.job
        lease.closed = True
        self._stats.lost_leases += 1
        log.warning(
            "could not %s job `%s` %s: %s; another worker has it now",
            what,
            queued.name,
            queued.id,
            error,
            extra=job_fields(queued),
        )

    async def _ride_out(self, lease: Lease, what: str, error: BrokerError) -> bool:
        """Wait after a settle the broker failed; False to give up on it (too many, or a stop)."""
        queued = lease.reservation.job
        delay = self._outage.failed(error, "settle")
        if delay is None:
            self._give_up(error)
            return False
        log.warning(
            "could not %s job `%s` %s (%s); trying again in %.2fs",
            what,
            queued.name,
            queued.id,
            error,
            delay.total_seconds(),
            extra=job_fields(queued),
        )
        if await _stopped_within(self._hard_stop, delay):
            log.warning(
                "gave up on recording job `%s` %s at shutdown; it runs again once its lease lapses",
                queued.name,
                queued.id,
            )
            return False
        return True

    async def _release_unique(self, queued: QueuedJob) -> None:
        key = queued.unique_key
        if key is None:
            return
        if self._locks is None:
            if not self._warned_no_locks:
                self._warned_no_locks = True
                log.warning(
                    "job `%s` holds uniqueness lock %s but this worker has no lock manager, so "
                    "the lock stands until it lapses; give the worker the dispatcher's `locks`",
                    queued.name,
                    key,
                )
            return
        try:
            await self._locks.force_release(key)
        except Exception as exc:
            log.warning("could not release uniqueness lock %s (%s); it lapses on its own", key, exc)

    def _count(self, queued: QueuedJob, *, processed: bool) -> None:
        if processed:
            self._stats.processed += 1
        else:
            self._stats.failed += 1
        self._stats.by_name[queued.name] = self._stats.by_name.get(queued.name, 0) + 1

    async def _emit(self, event: Event) -> None:
        if self._events is None:
            return
        try:
            await self._events.emit(event)
        except Exception:
            log.exception("the event dispatcher failed on %s; ignored", type(event).__name__)


_Soon = tuple[Attempt, Lease, Any]
"""A success `settle_soon` handed to the batcher: the attempt, its lease, and its key."""


def _error_of(attempt: Attempt) -> BaseException:
    return attempt.error if attempt.error is not None else RuntimeError("the job failed")


def _backoff(job: Job, attempt: int) -> timedelta:
    """The job's own retry delay; the default curve if its `backoff` breaks."""
    try:
        delay: object = job.backoff(attempt)
    except Exception:
        log.exception("job `%s`'s backoff() raised; using the default delay", type(job).name)
        return Job.backoff(job, attempt)
    if not isinstance(delay, timedelta) or delay < timedelta(0):
        log.warning("job `%s`'s backoff() gave %r; using the default delay", type(job).name, delay)
        return Job.backoff(job, attempt)
    return delay


async def _stopped_within(event: asyncio.Event, delay: timedelta) -> bool:
    """Wait `delay`; True if `event` was set first."""
    try:
        await asyncio.wait_for(event.wait(), delay.total_seconds())
    except TimeoutError:
        return False
    return True


__all__ = ["Settler"]
