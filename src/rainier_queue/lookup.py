# SPDX-License-Identifier: MIT
"""Answering "where is job X?", "which workers are alive?" and "what did X return?".

Why here, and written once: each answer joins what the driver finds in its
own storage (`JobLookup`) with what workers recorded beside it
(`RecordStore`: heartbeats, succeeded records, results). A reserved row
knows its lease but not which worker holds it; a heartbeat knows which
jobs its worker runs; a deleted job is found only in a record its worker
wrote. The manager, the blocking facade and the CLI all ask through here,
so they cannot give two answers to one question.

The order of the join matters: the driver's storage is asked first, so a
job that was recorded as succeeded and then handed out again (its
acknowledgement was lost) shows where it is now, not where it was.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from datetime import timedelta
from typing import Any

from ._clock import utcnow
from .errors import JobError, UnsupportedOperation
from .jobstate import (
    WORKER_KEY,
    CancelledJob,
    Found,
    JobLookup,
    JobState,
    Outcome,
    PastAttempt,
    RecordStore,
    WorkerBeat,
    attempts_from_json,
    attempts_key,
    cancelled_key,
    job_key,
)
from .queue import Queue

RESULT_POLL_START = timedelta(milliseconds=20)
RESULT_POLL_MAX = timedelta(milliseconds=500)


class ResultNotKept(JobError):
    """The job succeeded, but its return value was not recorded (or could not be)."""


class JobFailedError(JobError):
    """`result()` was asked for a job that ended in the failed store."""

    def __init__(self, state: JobState) -> None:
        first = (state.error or "no error recorded").splitlines()[0]
        super().__init__(
            f"job {state.job_id} failed after {state.attempts} attempt(s): {first}; "
            f"`rainier-queue failed {state.job_id}` shows the whole record"
        )
        self.state = state


class JobCancelledError(JobError):
    """`result()` was asked for a job that was cancelled: it has no result, and never will."""

    def __init__(self, state: JobState) -> None:
        super().__init__(f"job {state.job_id} was {state.reason or 'cancelled'}; it has no result")
        self.state = state


def lookup_of(queue: Queue) -> JobLookup | None:
    """`queue` as a `JobLookup`, if it declares and has one."""
    if queue.capabilities.job_lookup and isinstance(queue, JobLookup):
        return queue
    return None


def records_of(queue: Queue) -> RecordStore | None:
    """`queue` as a `RecordStore`, if it declares and has one."""
    if queue.capabilities.records and isinstance(queue, RecordStore):
        return queue
    return None


async def workers(queue: Queue) -> list[WorkerBeat]:
    """The heartbeats kept on `queue`'s connection, oldest worker first.

    `UnsupportedOperation` when the driver keeps no records, saying so.
    """
    store = records_of(queue)
    if store is None:
        raise UnsupportedOperation(
            f"the {queue.name} driver keeps no records beside its jobs, so workers on it "
            "leave no heartbeat to list; see docs/operations.md for what each driver keeps"
        )
    beats = []
    for raw in await store.records(WORKER_KEY):
        try:
            beats.append(WorkerBeat.from_json(raw))
        except (ValueError, KeyError, TypeError):
            continue  # a record that is not a heartbeat (another program's): not a worker
    return sorted(beats, key=lambda beat: (beat.started_at, beat.worker_id))


async def status(queue: Queue, job_id: str) -> JobState:
    """Where job `job_id` is on `queue`'s connection; `unknown`, with the reason, if not found.

    With the errors of its attempts that did not succeed, where workers kept them.
    """
    state = await _status(queue, job_id)
    store = records_of(queue)
    if store is None:
        return state
    history = await _history(store, job_id)
    return dataclasses.replace(state, attempt_history=tuple(history)) if history else state


async def _status(queue: Queue, job_id: str) -> JobState:
    lookup = lookup_of(queue)
    if lookup is not None:
        found = await lookup.find_job(job_id)
        if found is not None:
            return await _from_storage(queue, found)
    store = records_of(queue)
    cancelled = await _cancelled(store, job_id) if store is not None else None
    if cancelled is not None:
        return JobState(
            job_id=job_id,
            status="cancelled",
            name=cancelled.name,
            queue=cancelled.queue,
            finished_at=cancelled.at,
            worker=cancelled.worker,
            reason=f"cancelled {cancelled.how}",
        )
    outcome = await _outcome(store, job_id) if store is not None else None
    if outcome is None and lookup is None:
        return JobState(
            job_id=job_id,
            status="unknown",
            reason=(
                f"the {queue.name} driver cannot look a job up by id"
                + ("" if store is None else ", and no record of its success was kept")
            ),
        )
    if outcome is not None:
        return JobState(
            job_id=job_id,
            status="succeeded",
            name=outcome.name,
            queue=outcome.queue,
            attempts=outcome.attempt,
            finished_at=outcome.finished_at,
            worker=outcome.worker,
            has_result=outcome.has_result,
            result=outcome.result,
            reason=outcome.result_problem,
        )
    return JobState(
        job_id=job_id,
        status="unknown",
        reason=(
            "no such job: never pushed, or it succeeded and its success was not recorded "
            "(workers record successes only when asked: `keep_succeeded`, or a job's "
            "`keep_result`) or that record expired"
        ),
    )


async def result(queue: Queue, job_id: str, *, timeout: timedelta | float | None) -> Any:
    """The return value job `job_id` recorded, waiting up to `timeout` for it to finish.

    Raises `JobFailedError` for a job in the failed store, `JobCancelledError` for
    one cancelled, `ResultNotKept`
    for a success without a recorded value, `TimeoutError` when the job is
    not done in time (it may still be), `UnsupportedOperation` on a driver
    that keeps no records.
    """
    if records_of(queue) is None:
        raise UnsupportedOperation(
            f"the {queue.name} driver keeps no records beside its jobs, so it cannot keep "
            "results; see docs/operations.md"
        )
    seconds = timeout.total_seconds() if isinstance(timeout, timedelta) else timeout
    deadline = None if seconds is None else time.monotonic() + seconds
    pause = RESULT_POLL_START.total_seconds()
    while True:
        state = await status(queue, job_id)
        if state.status == "succeeded":
            if not state.has_result:
                raise ResultNotKept(
                    f"job {job_id} succeeded, but its result was not kept: "
                    + (state.reason or "its job class has no `keep_result`")
                )
            return state.result
        if state.status == "failed":
            raise JobFailedError(state)
        if state.status == "cancelled":
            raise JobCancelledError(state)
        if deadline is not None and time.monotonic() >= deadline:
            raise TimeoutError(
                f"job {job_id} is {state.status} after {seconds:g}s; it may still finish "
                "(ask again, or with a longer timeout)"
            )
        wait = pause if deadline is None else min(pause, max(deadline - time.monotonic(), 0))
        await asyncio.sleep(wait)
        pause = min(pause * 2, RESULT_POLL_MAX.total_seconds())


async def _history(store: RecordStore, job_id: str) -> list[PastAttempt]:
    raw = await store.get_record(attempts_key(job_id))
    if raw is None:
        return []
    try:
        return attempts_from_json(raw)
    except (ValueError, KeyError, TypeError):
        return []


async def _cancelled(store: RecordStore, job_id: str) -> CancelledJob | None:
    raw = await store.get_record(cancelled_key(job_id))
    if raw is None:
        return None
    try:
        return CancelledJob.from_json(raw)
    except (ValueError, KeyError, TypeError):
        return None


async def _outcome(store: RecordStore, job_id: str) -> Outcome | None:
    raw = await store.get_record(job_key(job_id))
    if raw is None:
        return None
    try:
        return Outcome.from_json(raw)
    except (ValueError, KeyError, TypeError):
        return None


async def _from_storage(queue: Queue, found: Found) -> JobState:
    job = found.job
    common: dict[str, Any] = {
        "job_id": job.id,
        "name": job.name,
        "queue": job.queue,
        "attempts": job.attempts,
        "max_attempts": job.max_attempts,
        "job": job,
    }
    if found.where == "failed":
        return JobState(status="failed", error=found.error, finished_at=found.failed_at, **common)
    if found.where == "delayed":
        return JobState(status="delayed", due_at=found.due_at, **common)
    if found.where == "queued":
        return JobState(status="queued", **common)
    worker, since = await _running_where(queue, job.id)
    if found.lease_until is not None and found.lease_until <= utcnow() and worker is None:
        reason = "its lease lapsed: its worker died or stalled; the next reserve takes it again"
        return JobState(status="queued", lease_until=found.lease_until, reason=reason, **common)
    return JobState(
        status="running", worker=worker, since=since, lease_until=found.lease_until, **common
    )


async def _running_where(queue: Queue, job_id: str) -> tuple[str | None, Any]:
    """The live worker whose heartbeat lists `job_id`, and since when; (None, None) if none."""
    if records_of(queue) is None:
        return None, None
    for beat in await workers(queue):
        if beat.is_gone():
            continue
        for running in beat.running:
            if running.job_id == job_id:
                return beat.worker_id, running.started_at
    return None, None


def describe_result(value: Any) -> str:
    """A result as one line of JSON, for the CLI."""
    return json.dumps(value, default=repr)


__all__ = [
    "JobCancelledError",
    "JobFailedError",
    "ResultNotKept",
    "describe_result",
    "lookup_of",
    "records_of",
    "result",
    "status",
    "workers",
]
