# SPDX-License-Identifier: MIT
"""`Scheduler`: turns due ticks into enqueued jobs, from any number of processes.

A single "beat" process is a single point of failure, and two of them
enqueue everything twice. So every scheduler here is equal: each pass
works out which ticks are due, and the shared store's claims (`claims`)
decide which process enqueues each one. Running three is how the
schedule stays up while a machine is replaced.

One pass, for each schedule:

1. read the schedule's unsettled ticks from the store (any scheduler's,
   this one's or a dead one's); one whose claim lapsed is claimed and
   enqueued here, whatever the cursor says;
2. find the due ticks after the schedule's cursor and apply the catch-up
   policy: `latest` enqueues only the newest, `all` each of them (at most
   `catch_up_limit`), `skip` only a tick still within `grace`;
3. for each tick to enqueue: list it as unsettled, claim it, check the
   `when` / `skip` conditions, take the overlap lock if the policy asks
   for one, push the job, write the outcome over the claim, and take the
   tick off the unsettled list.

The cursor never moves past a tick another scheduler holds unsettled: if
that scheduler gives the tick back (its push failed, or `overlap="queue"`
held it), the cursor still has it in view.

A tick's job has an id made from the schedule's name and the tick
(`tick_job_id`), and asks its worker to record its success
(`KEEP_RECORD_HEADER`, for as long as the tick's outcome is kept). So a
scheduler that takes over a tick whose claim lapsed first looks the job up
by id: a scheduler killed after its push and before writing the outcome
left the job queued, running, failed or recorded as succeeded, and the
tick is settled as enqueued instead of pushed twice. On a driver that
cannot look a job up (`Capabilities.job_lookup` False) that window stays
open, as `docs/scheduling.md` says.

The overlap lock is the envelope's uniqueness key: the worker that settles
the run's job (done, or failed for good) gives it back, so "the previous
run is still going" means its job is still queued or running, not only
that its enqueue is under way, which is all the upstream's lock covered.

Nothing here reads the wall clock directly: `clock` is injected, so tests
step through daylight-saving days and outages without sleeping.
"""

from __future__ import annotations

import asyncio
import difflib
import logging
import os
import secrets
import socket
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from .._clock import utcnow
from ..dispatch import DispatchOptions, build_envelope, unique_lock_name
from ..envelope import format_time
from ..errors import ConfigurationError, OutcomeUnknown
from ..jobstate import KEEP_RECORD_HEADER
from ..locks import Cache, LockManager
from ..lookup import lookup_of
from ..lookup import status as job_status
from ..manager import QueueManager
from .claims import DEFAULT_CLAIM_LEASE, Claim, Claims, Outcome, keep_outcome_for, outcome
from .entries import ScheduledJob
from .schedule import Schedule
from .timing import ScheduleError

log = logging.getLogger("rainier_queue.scheduler")

SCHEDULE_HEADER = "rainier-schedule"
TICK_HEADER = "rainier-schedule-tick"
LONGEST_SLEEP = timedelta(seconds=60)
"""A sleeping scheduler looks again at least this often, so a clock that jumps
(a suspended VM, an NTP step) is noticed within a minute."""

_Fired = Literal["done", "taken", "busy", "held", "retry"]
"""What became of one look at a tick: settled here, settled elsewhere, being enqueued
elsewhere, given back to wait for the previous run, given back after a failed push."""
_LEVELS = {"enqueued": logging.INFO, "skipped": logging.DEBUG, "failed": logging.ERROR}


class UnknownSchedule(ScheduleError):
    """A schedule asked for by name (`schedule test NAME`) that no entry has."""


@dataclass(frozen=True, slots=True)
class Overview:
    """One schedule as `schedule list` shows it."""

    entry: ScheduledJob
    upcoming: list[datetime]
    last: Outcome | None


class Scheduler:
    """Enqueues the schedule's due ticks through `manager`, claiming each in `store`."""

    def __init__(
        self,
        manager: QueueManager,
        schedule: Schedule | Iterable[ScheduledJob],
        *,
        store: Cache | None = None,
        clock: Callable[[], datetime] = utcnow,
        claim_lease: timedelta = DEFAULT_CLAIM_LEASE,
        owner: str | None = None,
    ) -> None:
        entries = (
            schedule.check(manager.registry) if isinstance(schedule, Schedule) else list(schedule)
        )
        if store is None:
            if manager.locks is None:
                raise ConfigurationError(
                    "the scheduler needs a shared store for its claims: give the QueueManager "
                    'locks (`locks = "sqlite:///jobs.db"` in the config, or the queue\'s own '
                    "database or Redis URL), or pass store="
                )
            store = manager.locks.cache
        self.manager = manager
        self.entries = {entry.name: entry for entry in entries}
        self.locks = manager.locks or LockManager(store)
        self.clock = clock
        self.claims = Claims(store, owner=owner or _owner(), lease=claim_lease)
        self.sources = ""
        """Where the entries came from, said when a name is not among them (the CLI sets it)."""
        self._waiting = False
        """Whether the last pass saw a tick claimed elsewhere and not settled yet."""
        if manager.locks is None and any(e.overlap != "allow" for e in entries):
            log.warning(
                "the QueueManager has no locks, so workers cannot give back the overlap locks "
                "of scheduled runs; each stands until its `overlap_for` lapses"
            )

    # -- one pass ----------------------------------------------------------------

    async def run_pending(self, now: datetime | None = None) -> list[Outcome]:
        """Enqueue whatever is due at `now` (the clock's time by default); what was done."""
        now = now or self.clock()
        done: list[Outcome] = []
        self._waiting = False
        for entry in self.entries.values():
            await self._recover(entry, now, done)
            await self._pass(entry, now, done)
        return done

    async def _recover(self, entry: ScheduledJob, now: datetime, done: list[Outcome]) -> None:
        """Settle the ticks a scheduler listed and did not settle, once their claims lapse."""
        for tick in await self.claims.unsettled(entry.name):
            state = await self.claims.state(entry.name, tick)
            if isinstance(state, Outcome):
                await self.claims.unregister(entry.name, tick)
            elif state == "claimed":
                self._waiting = True
            else:
                before = len(done)
                await self._fire(entry, tick, now, done, recovering=True)
                for made in done[before:]:
                    log.warning(
                        "schedule `%s`: took over tick %s, which a scheduler claimed and never "
                        "settled (it stopped or stalled): %s",
                        entry.name,
                        format_time(tick),
                        made.describe(),
                    )

    async def _pass(self, entry: ScheduledJob, now: datetime, done: list[Outcome]) -> None:
        cursor = await self.claims.cursor(entry.name)
        if entry.catch_up == "all" and cursor is not None:
            ticks = entry.timing.latest(now, entry.catch_up_limit + 1, after=cursor)
            if len(ticks) > entry.catch_up_limit:
                dropped = ticks.pop(0)
                log.warning(
                    "schedule `%s` missed more than %d ticks; catching up on the newest %d "
                    "(older than %s are not enqueued)",
                    entry.name,
                    entry.catch_up_limit,
                    entry.catch_up_limit,
                    format_time(dropped),
                )
        else:
            ticks = entry.timing.latest(now, 1, after=cursor)
        handled: datetime | None = None
        blocked = False
        for tick in ticks:
            late = now - tick > entry.grace
            skip_reason = None
            if late and cursor is None:
                skip_reason = "its first tick was already past when the scheduler started"
            elif late and entry.catch_up == "skip":
                skip_reason = "missed while no scheduler was running (catch_up=skip)"
            fired = await self._fire(entry, tick, now, done, skip_reason=skip_reason)
            if fired in ("held", "retry"):
                break
            # Not past a tick another scheduler is still enqueueing: it may give it back.
            blocked = blocked or fired == "busy"
            if not blocked:
                handled = tick
        if handled is not None:
            await self.claims.advance(entry.name, handled)

    async def _fire(
        self,
        entry: ScheduledJob,
        tick: datetime,
        now: datetime,
        done: list[Outcome],
        *,
        skip_reason: str | None = None,
        recovering: bool = False,
    ) -> _Fired:
        """Claim one tick and settle it; `recovering` for a tick read off the unsettled list."""
        meant = skip_reason is None
        if meant and not recovering:
            # Listed before it is claimed, so no crash between the two can hide it.
            await self.claims.register(entry.name, tick)
        claim = await self.claims.claim(entry.name, tick)
        if claim is None:
            if isinstance(await self.claims.state(entry.name, tick), Outcome):
                if meant:
                    await self.claims.unregister(entry.name, tick)
                return "taken"
            self._waiting = True
            return "busy"
        if skip_reason is None:
            try:
                if not await entry.conditions_hold(tick):
                    skip_reason = "a when/skip condition said no"
            except Exception as exc:
                return await self._settle(
                    claim, entry, done, "failed", f"its condition raised {exc!r}"
                )
        if skip_reason is not None:
            return await self._settle(claim, entry, done, "skipped", skip_reason)
        if recovering:
            pushed = await self._pushed_before(entry, tick)
            if pushed is not None:
                return await self._settle(
                    claim, entry, done, "enqueued", "found by id: pushed before", job_id=pushed
                )
        try:
            result = await self._enqueue(entry, tick)
        except OutcomeUnknown as exc:
            # The job may be queued: trying again could enqueue it twice.
            return await self._settle(claim, entry, done, "failed", f"outcome unknown: {exc}")
        except Exception as exc:
            await self._give_back(claim, listed=recovering)
            failed = outcome(entry.name, tick, "failed", f"{exc} (tried again next pass)")
            await self.claims.store.put(f"schedule:{entry.name}:last", failed.to_json())
            log.error("schedule `%s`: enqueueing tick %s failed: %s", entry.name, tick, exc)
            done.append(failed)
            return "retry"
        if result == "held":
            await self._give_back(claim, listed=recovering)
            return "held"
        status, detail = result
        if status == "enqueued":
            return await self._settle(claim, entry, done, "enqueued", job_id=detail)
        return await self._settle(claim, entry, done, "skipped", detail)

    async def _give_back(self, claim: Claim, *, listed: bool) -> None:
        """Withdraw a claim to try the tick again later.

        A tick from the cursor's ticks goes back to the cursor, which has not
        moved past it; one taken over from the unsettled list stays listed,
        since the cursor may be long past it.
        """
        if not listed:
            await self.claims.unregister(claim.schedule, claim.tick)
        await self.claims.give_up(claim)

    async def _settle(
        self,
        claim: Claim,
        entry: ScheduledJob,
        done: list[Outcome],
        status: Literal["enqueued", "skipped", "failed"],
        reason: str = "",
        *,
        job_id: str | None = None,
    ) -> _Fired:
        result = outcome(entry.name, claim.tick, status, reason, job_id)
        keep = keep_outcome_for(entry.timing.period_near(claim.tick))
        if await self.claims.settle(claim, result, keep_for=keep):
            await self.claims.unregister(claim.schedule, claim.tick)
        else:
            # Whoever holds the claim now settles the tick and takes it off the list.
            log.warning(
                "schedule `%s`: the claim on tick %s lapsed before it was settled (this "
                "process stalled for over %s), so another scheduler may have enqueued it too",
                entry.name,
                format_time(claim.tick),
                self.claims.lease,
            )
        log.log(
            _LEVELS[status], "schedule `%s` tick %s: %s", entry.name, claim.tick, result.describe()
        )
        done.append(result)
        return "done"

    async def _pushed_before(self, entry: ScheduledJob, tick: datetime) -> str | None:
        """The id of the tick's job if a scheduler already pushed it (it can be found by id).

        None when it cannot be found, or the driver cannot look jobs up: then
        the tick is pushed (again, if a scheduler died between its push and
        its outcome on such a driver).
        """
        queue = self.manager.connection(entry.connection)
        if lookup_of(queue) is None:
            return None
        job_id = tick_job_id(entry.name, tick)
        try:
            state = await job_status(queue, job_id)
        except Exception as exc:
            log.warning(
                "schedule `%s`: could not look up tick %s's job %s (%s); enqueueing it",
                entry.name,
                format_time(tick),
                job_id,
                exc,
            )
            return None
        return None if state.status == "unknown" else job_id

    async def _enqueue(
        self, entry: ScheduledJob, tick: datetime
    ) -> tuple[str, str] | Literal["held"]:
        """Push one run: ("enqueued", job id), ("skipped", why), or "held" (overlap=queue)."""
        keep = keep_outcome_for(entry.timing.period_near(tick))
        headers = {
            SCHEDULE_HEADER: entry.name,
            TICK_HEADER: format_time(tick),
            KEEP_RECORD_HEADER: f"{keep.total_seconds():.0f}",
        }
        options = DispatchOptions(
            queue=entry.queue, connection=entry.connection, delay=entry.delay, headers=headers
        )
        envelope = build_envelope(entry.job, options).with_changes(id=tick_job_id(entry.name, tick))
        queue = self.manager.connection(entry.connection)
        lock_name, hold = None, entry.overlap_for
        if entry.overlap != "allow":
            lock_name = f"schedule:{entry.name}:running"
        else:
            unique_id = entry.unique if entry.unique is not None else entry.job.unique_id()
            if unique_id is not None:
                lock_name = unique_lock_name(envelope.name, unique_id)
                hold = type(entry.job).unique_for
        lock = None
        if lock_name is not None:
            lock = await self.locks.acquire(lock_name, hold)
            if lock is None:
                if entry.overlap == "queue":
                    return "held"
                if entry.overlap == "skip":
                    return "skipped", "the previous run's job is still queued or running"
                return "skipped", f"a `{envelope.name}` job with the same unique id still waits"
            envelope = envelope.with_changes(unique_key=lock_name)
        try:
            [sealed] = queue.sealed([envelope])  # docs/encryption.md
            job_id = await queue.push(sealed)
        except OutcomeUnknown:
            raise
        except BaseException:
            if lock is not None:
                await self.locks.release(lock)
            raise
        if lock is not None and not queue.capabilities.deferred:
            await self.locks.release(lock)  # the job already ran inside push
        return "enqueued", job_id

    # -- by hand, and for the CLI ------------------------------------------------

    async def trigger(self, name: str) -> Outcome:
        """Enqueue schedule `name` now, outside its timetable (`schedule test`).

        No claim and no conditions: it is a person asking. The overlap and
        uniqueness rules still apply, so a test run cannot pile up on a real one.
        """
        entry = self.entries.get(name)
        if entry is None:
            known = ", ".join(sorted(self.entries)) or "none"
            close = difflib.get_close_matches(name, sorted(self.entries), n=1)
            hint = f"; did you mean `{close[0]}`?" if close else "."
            sources = f" ({self.sources})" if self.sources else ""
            raise UnknownSchedule(
                f"no schedule is named `{name}`{hint} The schedules are: {known}{sources}"
            )
        now = self.clock()
        result = await self._enqueue(entry, now)
        if result == "held":
            made = outcome(
                name, now, "skipped", "the previous run's job is still queued or running"
            )
        elif result[0] == "enqueued":
            made = outcome(name, now, "enqueued", "by hand", job_id=result[1])
        else:
            made = outcome(name, now, "skipped", result[1])
        await self.claims.store.put(f"schedule:{name}:last", made.to_json())
        return made

    async def overview(self, now: datetime | None = None, *, upcoming: int = 3) -> list[Overview]:
        """Each schedule's next ticks and last outcome, in declaration order."""
        now = now or self.clock()
        return [
            Overview(entry, entry.timing.upcoming(now, upcoming), await self.claims.last(name))
            for name, entry in self.entries.items()
        ]

    def next_wake(self, now: datetime) -> datetime:
        """When the loop should look again: the next tick of any schedule, or sooner."""
        wake = now + LONGEST_SLEEP
        if self._waiting:
            wake = min(wake, now + self.claims.lease / 4)
        for entry in self.entries.values():
            tick = entry.timing.next_after(now)
            if tick is not None:
                wake = min(wake, tick)
        return wake

    async def run(self, stop: asyncio.Event) -> None:
        """Pass after pass, sleeping to the next tick, until `stop` is set.

        A failing pass (the store unreachable) is logged and tried again at
        the next wake; ticks it could not deal with are still due then.
        """
        while not stop.is_set():
            try:
                await self.run_pending()
            except Exception:
                log.exception("a scheduler pass failed; trying again at the next tick")
            now = self.clock()
            delay = max((self.next_wake(now) - now).total_seconds(), 0.001)
            try:
                await asyncio.wait_for(stop.wait(), delay)
            except TimeoutError:
                continue


def tick_job_id(schedule: str, tick: datetime) -> str:
    """The id of the job a schedule's tick enqueues: the same in every scheduler process."""
    return str(uuid.uuid5(_TICK_IDS, f"{schedule}\n{format_time(tick)}"))


_TICK_IDS = uuid.UUID("5b0f1d2e-8c1a-4f3e-9a57-2c6e1d0b7a44")
"""The namespace of tick job ids (any fixed UUID: it only has to never change)."""


def _owner() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"


__all__ = [
    "SCHEDULE_HEADER",
    "TICK_HEADER",
    "Overview",
    "Scheduler",
    "UnknownSchedule",
    "tick_job_id",
]
