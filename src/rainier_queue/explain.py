# SPDX-License-Identifier: MIT
"""Answering "why isn't job X running?" in plain words, with what would change that.

Why: `status` says where a job is; the person asking usually wants the next
step: the job waits for a time, for a queue someone paused, for a worker
nobody started, or for a worker that died holding its lease. Each of those is
already known somewhere (the job's row, the pause marks, the heartbeats), but
only joined together do they give the answer. Written once here, so the CLI
(`rainier-queue explain`) and any dashboard give the same sentences and the
same machine-readable reason code.

A waiting job is held against a list of checks (`WAITING_CHECKS`), each of
which names one thing that keeps a due job from a worker: a rate or
concurrency limit of its key (read from the store the workers count in, and
naming who holds the slots), an earlier job of its ordering key, a time, a
paused queue, no worker. A new check adds itself to that list and its code
to `Reason`; nothing else changes.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, Literal

from ._clock import utcnow
from .durations import human_duration
from .envelope import format_time
from .job import LIMIT_KEY, ORDERING_KEY
from .jobstate import JobState, OrderingLookup, WorkerBeat
from .limits import Limiter, limits_of
from .locks import Cache
from .lookup import lookup_of, records_of, status, workers
from .queue import Countable, Pausable, Queue
from .registry import JobRegistry

Reason = Literal[
    "rate_limited",
    "concurrency_limited",
    "ordered_behind",
    "not_due",
    "paused",
    "no_worker",
    "waiting",
    "running",
    "held_by_gone_worker",
    "leased",
    "lease_lapsed",
    "failed",
    "succeeded",
    "unknown",
    "cannot_look_up",
]
"""Why a job is not running (or that it is), one code per cause."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Cause:
    """One thing that keeps the job from running, and what would change it."""

    code: Reason
    says: str
    """What holds the job, in a sentence."""
    fix: str | None = None
    """What would change that (a command, or what happens by itself); None when nothing."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Explanation:
    """The answer to "why isn't job X running?" (`explain`)."""

    job_id: str
    state: JobState
    causes: tuple[Cause, ...]
    """The causes, the one that decides first; never empty."""
    notes: tuple[str, ...] = ()
    """What could not be told on this driver, said so rather than guessed."""

    @property
    def code(self) -> Reason:
        """The deciding cause's code, for a script."""
        return self.causes[0].code

    @property
    def lines(self) -> list[str]:
        """The answer for a person: each cause, then what would change it, then the notes."""
        out: list[str] = []
        for cause in self.causes:
            out.append(cause.says)
            if cause.fix is not None:
                out.append(f"  -> {cause.fix}")
        out.extend(f"note: {note}" for note in self.notes)
        return out

    def to_data(self) -> dict[str, Any]:
        """The answer as JSON-ready data."""
        data: dict[str, Any] = {
            "id": self.job_id,
            "code": self.code,
            "status": self.state.status,
            "causes": [
                {"code": c.code, "says": c.says, **({"fix": c.fix} if c.fix else {})}
                for c in self.causes
            ],
            "notes": list(self.notes),
        }
        if self.state.queue is not None:
            data["queue"] = self.state.queue
        for name in ("due_at", "lease_until", "since", "finished_at"):
            moment = getattr(self.state, name)
            if moment is not None:
                data[name] = format_time(moment)
        return data


@dataclass(frozen=True, slots=True)
class LimitsAt:
    """The store the workers count limits in, and the registry saying each class's limits."""

    store: Cache
    registry: JobRegistry


@dataclass(frozen=True, slots=True, kw_only=True)
class Seen:
    """What a check may look at: the job's state, the heartbeats, and now."""

    queue: Queue
    state: JobState
    beats: list[WorkerBeat] | None
    """None on a driver that keeps no heartbeats."""
    now: datetime
    limits: LimitsAt | None = None
    """Where the workers count limits, and the job classes that declare them; None when
    that is not known here (a limited job's limit is then not told)."""

    def live(self) -> list[WorkerBeat]:
        """Workers that beat recently and are not stopping: the ones that take jobs."""
        return [b for b in self.beats or () if not b.is_gone(self.now) and not b.stopping]


Check = Callable[[Seen], Awaitable["Cause | None"]]


async def explain(queue: Queue, job_id: str, *, limits: LimitsAt | None = None) -> Explanation:
    """Why job `job_id` on `queue`'s connection is not running, and what would change that.

    With `limits`, a job whose key is over its rate or concurrency limit says so.
    """
    state = await status(queue, job_id)
    beats = await workers(queue) if records_of(queue) is not None else None
    seen = Seen(queue=queue, state=state, beats=beats, now=utcnow(), limits=limits)
    holder = _holder(seen) if lookup_of(queue) is None else None
    if state.status == "unknown" and holder is not None:
        return _held_by_heartbeat(seen, holder)
    if state.status == "unknown":
        return _unknown(seen)
    if state.status == "failed":
        return Explanation(job_id=job_id, state=state, causes=(_failed(state),))
    if state.status == "succeeded":
        return Explanation(job_id=job_id, state=state, causes=(_succeeded(state),))
    if state.status == "running":
        return Explanation(job_id=job_id, state=state, causes=(_held(seen),))
    return await _waiting(seen)


# -- a job that waits ----------------------------------------------------------------------


async def _over_limit(seen: Seen) -> Cause | None:
    at, job = seen.limits, seen.state.job
    if at is None or job is None or (key := job.headers.get(LIMIT_KEY)) is None:
        return None
    if not at.registry.knows(job.name) or (limits := limits_of(at.registry.get(job.name))) is None:
        return None
    limiter = Limiter(at.store, holder="explain")
    holders = await limiter.holders(key, limits)
    if limits.concurrency is not None and len(holders) >= limits.concurrency:
        return Cause(
            code="concurrency_limited",
            says=f"over its concurrency limit: key `{key}` may run {limits.concurrency} job(s) "
            f"at once, and its slots are held by: {'; '.join(holders)}",
            fix="it is set aside, its attempt given back, and runs once one of them settles "
            "(a dead worker's slot lapses with its job's lease)",
        )
    wait = await limiter.rate_wait(key, limits)
    if wait is not None and limits.rate is not None:
        count, period = limits.rate
        return Cause(
            code="rate_limited",
            says=f"over its rate limit: key `{key}` may start {count} job(s) per "
            f"{human_duration(period)}, and its next start fits in {human_duration(wait)}",
            fix="it is set aside until then, its attempt given back, and runs once a start fits",
        )
    return None


async def _ordered_behind(seen: Seen) -> Cause | None:
    job, queue = seen.state.job, seen.queue
    if job is None or (key := job.headers.get(ORDERING_KEY)) is None:
        return None
    if not isinstance(queue, OrderingLookup):
        return None
    ahead = await queue.ahead_of(seen.state.job_id)
    if ahead is None:
        return None
    return Cause(
        code="ordered_behind",
        says=f"waiting behind an earlier job with the same ordering key `{key}`: job {ahead}",
        fix=f"it runs once job {ahead} has succeeded or failed (`rainier-queue explain {ahead}` "
        "says what holds that one)",
    )


async def _not_due(seen: Seen) -> Cause | None:
    state = seen.state
    if state.status != "delayed" or state.due_at is None:
        return None
    when = f"not due until {_when(state.due_at)} (in {_after(seen.now, state.due_at)})"
    if state.attempts:
        last = state.attempt_history[-1].error if state.attempt_history else None
        failed = f"attempt {state.attempts} failed" + (f" ({last})" if last else "")
        says = f"{when}: {failed}, and it waits out its retry backoff"
    else:
        says = f"{when}: it was dispatched with a delay"
    return Cause(code="not_due", says=says, fix="it falls due by itself at that time")


async def _paused(seen: Seen) -> Cause | None:
    queue, name = seen.queue, seen.state.queue
    if name is None or not queue.capabilities.pausable or not isinstance(queue, Pausable):
        return None
    if name not in await queue.paused([name]):
        return None
    return Cause(
        code="paused",
        says=f"its queue `{name}` is paused: no worker takes its jobs",
        fix=f"`rainier-queue resume {name}` lets workers take them again",
    )


async def _no_worker(seen: Seen) -> Cause | None:
    name = seen.state.queue
    if seen.beats is None or name is None:
        return None
    live = seen.live()
    if any(name in beat.queues for beat in live):
        return None
    says = f"no live worker serves queue `{name}`"
    stopping = [b for b in seen.beats if b.stopping and not b.is_gone(seen.now)]
    if live:
        served = sorted({q for beat in live for q in beat.queues})
        says += "; live workers serve " + ", ".join(f"`{q}`" for q in served)
    elif stopping:
        says += "; the workers still beating are stopping: " + ", ".join(
            b.worker_id for b in stopping
        )
    elif seen.beats:
        newest = max(beat.last_beat for beat in seen.beats)
        says += f"; no worker has beaten in {_after(newest, seen.now)}"
    else:
        says += "; no worker has a heartbeat on this connection"
    return Cause(code="no_worker", says=says, fix=f"start one: `rainier-queue work --queue {name}`")


WAITING_CHECKS: list[Check] = [_ordered_behind, _over_limit, _not_due, _paused, _no_worker]
"""What keeps a waiting job from a worker, in the order they are told."""


async def _waiting(seen: Seen) -> Explanation:
    state = seen.state
    causes = [cause for check in WAITING_CHECKS if (cause := await check(seen)) is not None]
    notes = []
    if seen.beats is None:
        notes.append(
            f"the {seen.queue.name} driver keeps no worker heartbeats, so whether a worker "
            "serves the queue cannot be told here"
        )
    if state.lease_until is not None:
        holder = _holder(seen)
        who = "" if holder is None else f" (held by {_worker(holder, seen.now)})"
        causes.append(
            Cause(
                code="lease_lapsed",
                says=f"its lease ended at {_when(state.lease_until)}{who} and nobody renewed it",
                fix=f"the next worker to reserve from `{state.queue}` takes it again",
            )
        )
    if not causes:
        causes.append(await _in_line(seen))
    return Explanation(job_id=state.job_id, state=state, causes=tuple(causes), notes=tuple(notes))


async def _in_line(seen: Seen) -> Cause:
    name = seen.state.queue or "default"
    if isinstance(seen.queue, Countable):
        due = (await seen.queue.counts(name)).waiting
    else:
        due = await seen.queue.size(name)
    serving = [b.worker_id for b in seen.live() if name in b.queues]
    by = f"; served by {', '.join(serving)}" if serving else ""
    return Cause(
        code="waiting",
        says=f"it is due and waits its turn: {due} job(s) are due in queue `{name}`{by}",
        fix="a worker takes it when it has a free slot; more workers (or --concurrency) "
        "take it sooner",
    )


# -- a job a worker holds ------------------------------------------------------------------


def _held(seen: Seen) -> Cause:
    state = seen.state
    if state.lease_until is not None:
        ends = f"when its lease ends at {_when(state.lease_until)}"
    elif seen.queue.lease is not None:
        ends = "when its lease ends"
    else:
        ends = "when the broker sees the worker's connection close"
    holder = _holder(seen)
    if holder is not None:
        since = state.since or next(
            (r.started_at for r in holder.running if r.job_id == state.job_id), None
        )
        says = f"leased by worker {holder.worker_id} on host {holder.host}" + (
            f" since {_when(since)}" if since is not None else ""
        )
        if holder.is_gone(seen.now):
            return Cause(
                code="held_by_gone_worker",
                says=f"{says}, and that worker is gone "
                f"(no beat for {_after(holder.last_beat, seen.now)})",
                fix=f"the job comes back {ends}, and the next worker to reserve takes it",
            )
        return Cause(
            code="running",
            says=f"{says}; the worker is alive "
            f"(last beat {_after(holder.last_beat, seen.now)} ago): it is running",
            fix=f"nothing to do; should it hang, the job comes back {ends}",
        )
    if seen.beats is None:
        return Cause(
            code="leased",
            says=f"reserved by a worker; the {seen.queue.name} driver keeps no heartbeats, "
            "so which one cannot be told",
            fix=f"if that worker is gone, the job comes back {ends}",
        )
    return Cause(
        code="leased",
        says="reserved, but no worker's heartbeat lists it (a worker took it after its last "
        "beat, or its worker is gone and its record expired)",
        fix=f"if no worker holds it, it comes back {ends}",
    )


def _held_by_heartbeat(seen: Seen, holder: WorkerBeat) -> Explanation:
    """On a driver that keeps heartbeats but cannot look a job up (NATS): the worker
    whose heartbeat lists the job is the one answer there is."""
    running = next(r for r in holder.running if r.job_id == seen.state.job_id)
    state = replace(
        seen.state,
        status="running",
        name=running.name,
        queue=running.queue,
        attempts=running.attempt,
        worker=holder.worker_id,
        since=running.started_at,
        reason=None,
    )
    seen = replace(seen, state=state)
    note = (
        f"the {seen.queue.name} driver cannot look a job up by id: this is what the "
        "worker's heartbeat last said"
    )
    return Explanation(job_id=state.job_id, state=state, causes=(_held(seen),), notes=(note,))


def _holder(seen: Seen) -> WorkerBeat | None:
    """The worker whose heartbeat lists the job, a live one before a gone one."""
    listing = [b for b in seen.beats or () if any(r.job_id == seen.state.job_id for r in b.running)]
    listing.sort(key=lambda b: (b.is_gone(seen.now), -b.last_beat.timestamp()))
    return listing[0] if listing else None


# -- a job that is done, or not found ------------------------------------------------------


def _failed(state: JobState) -> Cause:
    error = (state.error or "no error recorded").strip().splitlines() or ["no error recorded"]
    return Cause(
        code="failed",
        says=f"it failed after {state.attempts} attempt(s): {error[0]}",
        fix=f"`rainier-queue retry {state.job_id}` puts it back in its queue; "
        f"`rainier-queue failed {state.job_id}` shows the whole record",
    )


def _succeeded(state: JobState) -> Cause:
    where = f" on worker {state.worker}" if state.worker else ""
    when = f" at {_when(state.finished_at)}" if state.finished_at else ""
    return Cause(
        code="succeeded",
        says=f"it is not running because it succeeded{when}{where} "
        f"after {state.attempts} attempt(s)",
    )


def _unknown(seen: Seen) -> Explanation:
    state, queue = seen.state, seen.queue
    if lookup_of(queue) is not None:
        cause = Cause(
            code="unknown",
            says=state.reason or "no such job",
            fix="check the id and the connection (--connection); to tell finished jobs "
            "later, record successes (`work --keep-succeeded 1h`)",
        )
        return Explanation(job_id=state.job_id, state=state, causes=(cause,))
    instead = ["`rainier-queue size --states` counts what waits"]
    if records_of(queue) is not None:
        instead.append("`rainier-queue jobs --running` lists what workers run now")
    if queue.capabilities.failed_listing:
        instead.append("`rainier-queue failed` lists the failed jobs")
    cause = Cause(
        code="cannot_look_up",
        says=state.reason or f"the {queue.name} driver cannot look a job up by id",
        fix="use instead: " + "; ".join(instead),
    )
    return Explanation(job_id=state.job_id, state=state, causes=(cause,))


def _when(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _after(start: datetime, end: datetime) -> str:
    return human_duration(max(end - start, end - end))


def _worker(beat: WorkerBeat, now: datetime) -> str:
    state = "gone" if beat.is_gone(now) else "alive"
    return f"worker {beat.worker_id} on host {beat.host}, {state}"


__all__ = ["WAITING_CHECKS", "Cause", "Check", "Explanation", "LimitsAt", "Reason", "explain"]
