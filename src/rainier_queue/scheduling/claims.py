# SPDX-License-Identifier: MIT
"""Claims: how any number of scheduler processes enqueue each tick exactly once.

A lock with a time to live, the usual answer, is held while one process
enqueues and then lapses; a second process that looks a moment later finds
no lock and enqueues the tick again, and one whose clock lags re-runs the
minute. So this is not a lock. Each (schedule, tick) has a key of its own
in the connection's shared store, written with the store's atomic
insert-if-absent (`Cache.add`), and it moves through two states:

1. `claimed <owner>`, with a short lease: one process won the tick and is
   enqueueing it;
2. the outcome (`enqueued` with the job's id, `skipped` and why, or
   `failed`), written over the claim only by its owner
   (`Cache.replace_if`) and kept long enough that no process can consider
   the tick again.

The writes are ordered so that a crash cannot lose a tick: register, claim,
enqueue, settle, unregister. Before a process claims a tick to enqueue it,
it adds the tick to the schedule's list of unsettled ticks, a key of its
own in the same store (`schedule:NAME:unsettled`), and the tick leaves the
list only once its outcome is written. That list, not any process's
memory, is how a claim whose claimer died is found again: every scheduler
reads it each pass, including one started long after the claim, and a
listed tick whose claim has lapsed is claimed and enqueued by whichever
scheduler wins the new claim. The cursor may therefore move past a tick
still being enqueued without the tick being forgotten.

The list is edited with compare-and-set (`add`, `replace_if`, `forget_if`
on the whole value), so it needs nothing of the store beyond what a lock
needs, and works the same on every store, a Redis cluster included. When a
listed tick's key is gone, nothing can tell "its claimer died" from "it was
settled so long ago that its outcome expired" (a process that died between
its settle and its unregister, and no scheduler ran for the outcome's whole
retention); the tick is then enqueued, since under a crash the promise is
at least once, never at most once.

The one window left is a crash after the enqueue and before the settle:
the tick is then enqueued a second time when the lease lapses, so the
guarantee under a crash is at least once, and exactly once otherwise.
A queue and a store in two different systems cannot share a transaction,
and the ports keep the scheduler from reaching into one driver's.

Besides the claims, each schedule keeps a cursor (the newest tick it has
dealt with, so missed ticks can be told from new ones after downtime) and
its last outcome, for `rainier-queue schedule list`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from .._clock import utcnow
from ..envelope import format_time, parse_time
from ..errors import BrokerUnavailable, MalformedEntry
from ..locks import Cache

Status = Literal["enqueued", "skipped", "failed"]

CLAIMED = b"claimed "
DEFAULT_CLAIM_LEASE = timedelta(seconds=60)
"""How long a claim stands before another scheduler takes the tick over.

Enqueueing one job takes milliseconds; a minute covers a stalled process
and a slow store without letting a tick wait long after its claimer died.
"""
MIN_RETENTION = timedelta(hours=1)
_EDIT_ATTEMPTS = 100
"""Compare-and-set rounds on a schedule's unsettled list before giving up on the pass.

Each round is lost only to another scheduler's successful edit of the same
list, so even a hundred schedulers racing for one tick settle in far fewer.
"""


@dataclass(frozen=True, slots=True, kw_only=True)
class Outcome:
    """What happened to one tick of one schedule."""

    schedule: str
    tick: datetime
    status: Status
    reason: str = ""
    """Why it was skipped or failed (empty when enqueued)."""
    job_id: str | None = None
    at: datetime

    def to_json(self) -> bytes:
        return json.dumps(
            {
                "schedule": self.schedule,
                "tick": format_time(self.tick),
                "status": self.status,
                "reason": self.reason,
                "job_id": self.job_id,
                "at": format_time(self.at),
            }
        ).encode()

    @classmethod
    def from_json(cls, raw: bytes) -> Outcome | None:
        """The outcome, or None for a value that is not one (a claim, or garbage)."""
        try:
            data = json.loads(raw)
            return cls(
                schedule=str(data["schedule"]),
                tick=parse_time(data["tick"]),
                status=data["status"],
                reason=str(data.get("reason") or ""),
                job_id=data.get("job_id"),
                at=parse_time(data["at"]),
            )
        except (ValueError, KeyError, TypeError, MalformedEntry):
            return None

    def describe(self) -> str:
        """`enqueued`, or `skipped: why`, for a table cell."""
        return self.status if not self.reason else f"{self.status}: {self.reason}"


@dataclass(frozen=True, slots=True)
class Claim:
    """A tick this process won, and the value that proves it."""

    schedule: str
    tick: datetime
    value: bytes


class Claims:
    """The claim, cursor and last-outcome keys of every schedule in one shared store."""

    def __init__(self, store: Cache, *, owner: str, lease: timedelta = DEFAULT_CLAIM_LEASE) -> None:
        self.store = store
        self.owner = owner
        self.lease = lease

    @staticmethod
    def tick_key(schedule: str, tick: datetime) -> str:
        return f"schedule:{schedule}:tick:{format_time(tick)}"

    async def claim(self, schedule: str, tick: datetime) -> Claim | None:
        """Win the tick (None: another process already has it, settled or not)."""
        value = CLAIMED + self.owner.encode()
        if await self.store.add(self.tick_key(schedule, tick), value, self.lease):
            return Claim(schedule, tick, value)
        return None

    async def state(self, schedule: str, tick: datetime) -> Outcome | Literal["claimed"] | None:
        """The tick's outcome, `"claimed"` while someone enqueues it, None if nobody has."""
        raw = await self.store.get(self.tick_key(schedule, tick))
        if raw is None:
            return None
        if raw.startswith(CLAIMED):
            return "claimed"
        return Outcome.from_json(raw) or "claimed"

    async def settle(self, claim: Claim, outcome: Outcome, *, keep_for: timedelta) -> bool:
        """Write the outcome over our claim; False if the claim lapsed and was taken over."""
        key = self.tick_key(claim.schedule, claim.tick)
        settled = await self.store.replace_if(key, claim.value, outcome.to_json(), keep_for)
        await self.store.put(f"schedule:{claim.schedule}:last", outcome.to_json())
        return settled

    async def give_up(self, claim: Claim) -> None:
        """Withdraw our claim so the tick can be tried again (held back, or its push failed)."""
        await self.store.forget_if(self.tick_key(claim.schedule, claim.tick), claim.value)

    @staticmethod
    def unsettled_key(schedule: str) -> str:
        return f"schedule:{schedule}:unsettled"

    async def unsettled(self, schedule: str) -> list[datetime]:
        """The ticks of `schedule` some scheduler meant to enqueue and nobody has settled."""
        return [parse_time(t) for t in _ticks(await self.store.get(self.unsettled_key(schedule)))]

    async def register(self, schedule: str, tick: datetime) -> None:
        """List `tick` as unsettled, before claiming it, so a crash cannot hide it."""
        stamp = format_time(tick)
        await self._edit(schedule, lambda ticks: ticks | {stamp})

    async def unregister(self, schedule: str, tick: datetime) -> None:
        """Take `tick` off the unsettled list (its outcome is written, or nobody holds it)."""
        stamp = format_time(tick)
        await self._edit(schedule, lambda ticks: ticks - {stamp})

    async def _edit(self, schedule: str, change: Callable[[set[str]], set[str]]) -> None:
        key = self.unsettled_key(schedule)
        for _ in range(_EDIT_ATTEMPTS):
            raw = await self.store.get(key)
            before = set(_ticks(raw))
            after = change(before)
            if after == before:
                return
            value = json.dumps(sorted(after)).encode()
            if raw is None:
                done = await self.store.add(key, value)
            elif not after:
                done = await self.store.forget_if(key, raw)
            else:
                done = await self.store.replace_if(key, raw, value)
            if done:
                return
        raise BrokerUnavailable(
            f"the list of unsettled ticks of schedule `{schedule}` kept changing under "
            f"{_EDIT_ATTEMPTS} attempts to edit it; the pass is tried again at the next wake"
        )

    async def cursor(self, schedule: str) -> datetime | None:
        """The newest tick of `schedule` any scheduler has dealt with, if any."""
        raw = await self.store.get(f"schedule:{schedule}:cursor")
        try:
            return parse_time(raw.decode()) if raw else None
        except (ValueError, MalformedEntry):  # not a time: as if no tick were dealt with yet
            return None

    async def advance(self, schedule: str, tick: datetime) -> None:
        """Move the cursor to `tick`, never backwards (a lost race only repeats a look)."""
        current = await self.cursor(schedule)
        if current is None or tick > current:
            await self.store.put(f"schedule:{schedule}:cursor", format_time(tick).encode())

    async def last(self, schedule: str) -> Outcome | None:
        """The most recent outcome recorded for `schedule`."""
        raw = await self.store.get(f"schedule:{schedule}:last")
        return Outcome.from_json(raw) if raw else None


def _ticks(raw: bytes | None) -> list[str]:
    """The tick stamps in an unsettled list's value; a value that is not one counts as empty
    (it is then replaced whole by the next edit)."""
    if raw is None:
        return []
    try:
        data = json.loads(raw)
    except ValueError:
        return []
    if not isinstance(data, list):
        return []
    found = []
    for item in data:
        try:
            found.append(format_time(parse_time(str(item))))
        except MalformedEntry:
            continue
    return found


def keep_outcome_for(period: timedelta) -> timedelta:
    """How long a settled tick's key stays: long after any process could look at it again."""
    return max(MIN_RETENTION, 3 * period)


def outcome(
    schedule: str, tick: datetime, status: Status, reason: str = "", job_id: str | None = None
) -> Outcome:
    """An outcome stamped now."""
    return Outcome(
        schedule=schedule, tick=tick, status=status, reason=reason, job_id=job_id, at=utcnow()
    )


__all__ = [
    "DEFAULT_CLAIM_LEASE",
    "Claim",
    "Claims",
    "Outcome",
    "Status",
    "keep_outcome_for",
    "outcome",
]
