# SPDX-License-Identifier: MIT
"""The pages' data, read through the library's own read models and nothing else.

Why nothing else: the CLI answers `size`, `failed`, `workers`, `job ID` and
`schedule list` from `Queue.size`/`counts`, the failed listing, `lookup`,
`overview`, `explain` and the scheduler's `overview`; the dashboard reads
the same, so a page and a command cannot disagree. What a driver cannot
answer comes back as the reason (`reasons`), shown in place of the figure.

A read that fails (a broker down) fails its own panel, with the error's
one line, not the page: an operator looks at the dashboard most when
something is wrong. (The overview's data, per queue, is in `queues`.)
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from .. import lookup
from .._clock import utcnow
from ..errors import QueueError, UnsupportedOperation
from ..explain import explain
from ..jobstate import JobState, RunningJob, WorkerBeat
from ..queue import FailedJob, FailedJobListing
from ..redact import redact_fields
from ..scheduling import Overview as ScheduleRow
from .board import Board
from .reasons import no_failed_listing, no_failed_store, no_lookup

FAILED_COUNTED = 500
"""Failed jobs read to count or filter them; more shows as "500+"."""
FAILED_SHOWN = 100
"""Failed jobs a page lists."""


# -- failed jobs -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class FailedPage:
    jobs: list[FailedJob]
    queue: str
    name: str
    listing_reason: str | None
    store_reason: str | None
    more: bool
    error: str | None = None


async def failed_jobs(board: Board, *, queue_name: str | None, limit: int) -> list[FailedJob]:
    queue = board.queue
    assert isinstance(queue, FailedJobListing)
    return await queue.failed_jobs(queue=queue_name, limit=limit)


def matches(job_name: str, wanted: str) -> bool:
    """Whether a job's name matches the name searched for (a part of it, any case)."""
    return wanted.strip().lower() in job_name.lower()


async def failed_page(board: Board, *, queue_name: str, name: str) -> FailedPage:
    queue = board.queue
    listing_reason = no_failed_listing(queue)
    store_reason = no_failed_store(queue)
    if listing_reason is not None:
        return FailedPage(
            jobs=[],
            queue=queue_name,
            name=name,
            listing_reason=listing_reason,
            store_reason=store_reason,
            more=False,
        )
    try:
        listed = await failed_jobs(board, queue_name=queue_name or None, limit=FAILED_COUNTED)
    except QueueError as exc:
        return FailedPage(
            jobs=[],
            queue=queue_name,
            name=name,
            listing_reason=None,
            store_reason=store_reason,
            more=False,
            error=one_line(exc),
        )
    chosen = [f for f in listed if matches(f.job.name, name)] if name else listed
    return FailedPage(
        jobs=chosen[:FAILED_SHOWN],
        queue=queue_name,
        name=name,
        listing_reason=None,
        store_reason=store_reason,
        more=len(chosen) > FAILED_SHOWN or len(listed) >= FAILED_COUNTED,
    )


# -- workers -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkersPage:
    beats: list[WorkerBeat]
    now: datetime
    reason: str | None


async def workers_page(board: Board) -> WorkersPage:
    now = utcnow()
    try:
        beats = await lookup.workers(board.queue)
    except UnsupportedOperation as exc:
        return WorkersPage(beats=[], now=now, reason=str(exc))
    except QueueError as exc:
        return WorkersPage(beats=[], now=now, reason=f"could not read heartbeats: {one_line(exc)}")
    return WorkersPage(beats=beats, now=now, reason=None)


def worker_state(beat: WorkerBeat, now: datetime) -> str:
    """As `rainier-queue workers` says it: up, stopping, or gone."""
    if beat.is_gone(now):
        return "gone"
    return "stopping" if beat.stopping else "up"


# -- jobs --------------------------------------------------------------------------------

STATES = ("any", "failed", "running")
"""What the job search can list: failed jobs (the failed listing) and running ones (live
workers' heartbeats). Waiting and delayed jobs are found by id: no driver lists them."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Hit:
    job_id: str
    name: str
    queue: str
    state: str
    attempts: str
    when: datetime
    where: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class JobsPage:
    hits: list[Hit]
    name: str
    state: str
    reasons: list[str] = field(default_factory=list)
    lookup_reason: str | None = None


async def jobs_page(board: Board, *, name: str, state: str) -> JobsPage:
    queue = board.queue
    state = state if state in STATES else "any"
    hits: list[Hit] = []
    reasons: list[str] = []
    if state in ("any", "failed"):
        listing_reason = no_failed_listing(queue)
        if listing_reason is None:
            try:
                for f in await failed_jobs(board, queue_name=None, limit=FAILED_SHOWN):
                    if matches(f.job.name, name):
                        hits.append(_failed_hit(f))
            except QueueError as exc:
                reasons.append(f"could not list failed jobs: {one_line(exc)}")
        else:
            reasons.append(listing_reason)
    if state in ("any", "running"):
        page = await workers_page(board)
        if page.reason is not None:
            reasons.append(page.reason)
        for beat in page.beats:
            if beat.is_gone(page.now):
                continue
            for job in beat.running:
                if matches(job.name, name):
                    hits.append(_running_hit(job, beat))
    return JobsPage(
        hits=hits, name=name, state=state, reasons=reasons, lookup_reason=no_lookup(queue)
    )


def _failed_hit(f: FailedJob) -> Hit:
    return Hit(
        job_id=f.job.id,
        name=f.job.name,
        queue=f.job.queue,
        state="failed",
        attempts=f"{f.job.attempts}/{f.job.max_attempts}",
        when=f.failed_at,
    )


def _running_hit(job: RunningJob, beat: WorkerBeat) -> Hit:
    return Hit(
        job_id=job.job_id,
        name=job.name,
        queue=job.queue,
        state="running",
        attempts=str(job.attempt),
        when=job.started_at,
        where=beat.worker_id,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class JobPage:
    state: JobState
    why: list[str]
    payload: str | None
    store_reason: str | None


async def job_page(board: Board, job_id: str) -> JobPage:
    queue = board.queue
    explained = await explain(queue, job_id)
    state = explained.state
    why = [] if state.status in ("succeeded", "failed", "cancelled") else explained.lines
    payload = None
    if state.job is not None:
        payload = json.dumps(redact_fields(state.job.payload), indent=2, ensure_ascii=False)
    return JobPage(state=state, why=why, payload=payload, store_reason=no_failed_store(queue))


# -- schedules ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class SchedulesPage:
    rows: Sequence[ScheduleRow]
    reason: str | None


async def schedules_page(board: Board) -> SchedulesPage:
    if board.scheduler is None:
        return SchedulesPage(
            rows=[],
            reason=(
                "this dashboard was given no schedules: pass `scheduler=` to create_app, or "
                "run `rainier-queue dashboard` where the config names them"
            ),
        )
    try:
        return SchedulesPage(rows=await board.scheduler.overview(), reason=None)
    except QueueError as exc:
        return SchedulesPage(rows=[], reason=f"could not read the schedules: {one_line(exc)}")


def one_line(error: BaseException) -> str:
    return (str(error) or type(error).__name__).splitlines()[0]


__all__ = [
    "FAILED_COUNTED",
    "STATES",
    "FailedPage",
    "Hit",
    "JobPage",
    "JobsPage",
    "SchedulesPage",
    "WorkersPage",
    "failed_jobs",
    "failed_page",
    "job_page",
    "jobs_page",
    "matches",
    "one_line",
    "schedules_page",
    "worker_state",
]
