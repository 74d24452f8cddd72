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

The writes are ordered so that a crash cannot lose a tick: claim, then
enqueue, then settle. A process that dies after claiming leaves a claim
whose lease lapses; the other schedulers remember each tick they saw
claimed but not settled and, once the key is gone, claim and enqueue it
themselves. The one window left is a crash after the enqueue and before the
settle: the tick is then enqueued a second time when the lease lapses, so
the guarantee under a crash is at least once, and exactly once otherwise.
A queue and a store in two different systems cannot share a transaction,
and the ports keep the scheduler from reaching into one driver's.

Besides the claims, each schedule keeps a cursor (the newest tick it has
dealt with, so missed ticks can be told from new ones after downtime) and
its last outcome, for `rainier-queue schedule list`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from .._clock import utcnow
from ..envelope import format_time, parse_time
from ..locks import Cache

Status = Literal["enqueued", "skipped", "failed"]

CLAIMED = b"claimed "
DEFAULT_CLAIM_LEASE = timedelta(seconds=60)
"""How long a claim stands before another scheduler takes the tick over.

Enqueueing one job takes milliseconds; a minute covers a stalled process
and a slow store without letting a tick wait long after its claimer died.
"""
MIN_RETENTION = timedelta(hours=1)


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
        except (ValueError, KeyError, TypeError):
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

    async def cursor(self, schedule: str) -> datetime | None:
        """The newest tick of `schedule` any scheduler has dealt with, if any."""
        raw = await self.store.get(f"schedule:{schedule}:cursor")
        try:
            return parse_time(raw.decode()) if raw else None
        except ValueError:
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
