# SPDX-License-Identifier: MIT
"""`Relay`: moves committed outbox rows to their target, deleting each only once it landed.

Why this order: a row is deleted only after the target confirmed the push
(`push_many` returned), so a relay that dies at any point leaves the row
where it was, and the next relay pushes it again: every committed dispatch
arrives at least once. What the target does with the second copy depends
on the target (docs/outbox.md has the table): the job's id travels with it,
so a target that keys by id drops it (NATS), or refuses it with
`DuplicateJob` (the SQL drivers), which the relay takes as delivered.

How several relays share one outbox: they claim rows as workers claim
jobs, through the store's `reserve` (`FOR UPDATE SKIP LOCKED` on PostgreSQL
and MySQL/MariaDB, the write lock on SQLite), under a lease. Two relays
never push the same row at once; a relay that died holding rows loses them
to the next relay when the lease lapses. Waiting uses the store's wake-up:
`LISTEN`/`NOTIFY` on PostgreSQL (delivered at the application's commit),
a poll every `poll_interval` on MySQL/MariaDB and SQLite.

A target that is down (`BrokerUnavailable`, or a push whose outcome is
unknown) costs nothing but time: the rows are handed back, the relay waits
(doubling up to `max_backoff`) and tries again. A target that refuses a
batch (`BrokerRejected`) is asked again one job at a time, so a job it
cannot take goes to the outbox's failed table with the target's words,
where `rainier-queue failed/retry` on the outbox finds it, and the rest go
on. A job for a queue the target has not provisioned waits in the outbox
(due again after `max_backoff`) until `rainier-queue provision` makes it,
and the rest go on. A target that refuses every job alike (credentials,
TLS) has a setting to fix, not bad jobs: the rows stay and the relay backs
off.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

from ..envelope import QueuedJob
from ..errors import (
    BrokerError,
    BrokerRejected,
    DuplicateJob,
    LeaseLost,
    MalformedEntry,
    NotProvisioned,
)
from ..queue import Queue, Reservation
from .rows import carried
from .store import Outbox

log = logging.getLogger("rainier_queue.outbox")

DEFAULT_BATCH = 500
"""Rows claimed and pushed at a time: one claim, one `push_many`, one delete."""


@dataclass(frozen=True, slots=True)
class RelaySettings:
    """How a relay paces itself."""

    batch: int = DEFAULT_BATCH
    idle_wait: timedelta = timedelta(seconds=5)
    """The longest an idle relay waits for a wake-up before it looks again."""
    first_backoff: timedelta = timedelta(milliseconds=200)
    max_backoff: timedelta = timedelta(seconds=30)


@dataclass(slots=True)
class RelayCounts:
    """What a relay has done so far."""

    relayed: int = 0
    """Jobs the target confirmed (a row relayed twice counts twice)."""
    refused: int = 0
    """Rows moved to the outbox's failed table (not an outbox row, or refused by the target)."""
    duplicates: int = 0
    """Jobs the target refused as held already (`DuplicateJob`: relayed before, by a relay
    that died before deleting the row); their rows are deleted like the rest, and they
    count in `relayed` too."""
    outages: int = 0
    """Batches handed back because the target (or the store) could not be reached."""


class Relay:
    """Moves one outbox's committed rows to its target connection, batch by batch."""

    def __init__(
        self, outbox: Outbox, target: Queue, settings: RelaySettings | None = None
    ) -> None:
        self.outbox = outbox
        self.target = target
        self.settings = settings or RelaySettings()
        if self.settings.batch < 1:
            raise ValueError("a relay's batch must be at least 1")
        self.counts = RelayCounts()

    async def run(self, stop: asyncio.Event | None = None) -> None:
        """Relay until `stop` is set (or forever); rides out outages of either side."""
        stop = stop or asyncio.Event()
        delay = self.settings.first_backoff
        wait = True
        while not stop.is_set():
            try:
                moved = await self.relay_batch(wait=wait)
            except BrokerError as exc:
                wait = True
                self.counts.outages += 1
                log.warning(
                    "the outbox relay to `%s` is waiting %.1fs: %s",
                    self.outbox.target,
                    delay.total_seconds(),
                    exc,
                )
                await _sleep_unless(stop, delay)
                delay = min(delay * 2, self.settings.max_backoff)
                continue
            if moved:
                delay = self.settings.first_backoff
            wait = moved < self.settings.batch  # a full batch: more may be waiting now

    async def drain(self) -> int:
        """Relay until no committed row waits; how many rows were taken off the outbox."""
        total = 0
        while moved := await self.relay_batch(wait=False):
            total += moved
        return total

    async def relay_batch(self, *, wait: bool) -> int:
        """Claim one batch, push it to the target, delete what landed; the rows taken off
        the outbox (relayed, or set aside in its failed table).

        With `wait`, an empty outbox is waited on (up to `idle_wait`) first.
        Raises `BrokerError` when the target or the store cannot be used now,
        the batch handed back first.
        """
        store, channel, limit = self.outbox.store, self.outbox.target, self.settings.batch
        if wait:
            held = await store.wait_and_reserve(channel, self.settings.idle_wait, limit=limit)
        else:
            held = await store.reserve(channel, limit=limit)
        if not held:
            return 0
        jobs, rows = await self._readable(held)
        if not jobs:
            return len(held)
        try:
            await self.target.push_many(jobs)
        except BrokerRejected:
            await self._one_by_one(jobs, rows)
            return len(held)
        except BaseException:
            await store.hand_back_unstarted(rows)
            raise
        await self._settle(rows)
        self.counts.relayed += len(jobs)
        return len(held)

    async def _readable(
        self, held: Sequence[Reservation]
    ) -> tuple[list[QueuedJob], list[Reservation]]:
        """The jobs the rows carry; a row that carries none goes to the failed table."""
        jobs: list[QueuedJob] = []
        rows: list[Reservation] = []
        for reservation in held:
            try:
                jobs.append(carried(reservation.job))
            except MalformedEntry as exc:
                await self._refuse(reservation, f"not an outbox row: {exc}")
                continue
            rows.append(reservation)
        return jobs, rows

    async def _one_by_one(self, jobs: Sequence[QueuedJob], rows: Sequence[Reservation]) -> None:
        """A refused batch, pushed again job by job, so only the jobs refused stay behind.

        A job the target holds already (`DuplicateJob`) is delivered: its row
        is deleted. A job whose queue the target has not provisioned waits in the outbox
        (due again after `max_backoff`) while the rest go on: provisioning
        fixes it. Any other refusal sets the job aside in the outbox's failed
        table, but only beside a job the target took: when it refuses all of
        them, the refusal is the target's (credentials, TLS, a setting), not
        the jobs', so they are handed back and the refusal raised, for the
        relay to wait and try again.
        """
        refused: list[tuple[Reservation, BrokerRejected]] = []
        unprovisioned: list[tuple[Reservation, NotProvisioned]] = []
        took = 0
        for index, (job, row) in enumerate(zip(jobs, rows, strict=True)):
            try:
                await self.target.push(job)
            except DuplicateJob:
                self.counts.duplicates += 1  # relayed before: the target holds it already
            except NotProvisioned as exc:
                unprovisioned.append((row, exc))
                continue
            except BrokerRejected as exc:
                refused.append((row, exc))
                continue
            except BaseException:
                await self._hand_back(
                    [r for r, _ in refused], [r for r, _ in unprovisioned], rows[index:]
                )
                raise
            await self._settle([row])
            self.counts.relayed += 1
            took += 1
        for row, waiting in unprovisioned:
            await self._postpone(row, waiting)
        if refused and not took:
            await self._hand_back([r for r, _ in refused])
            raise refused[-1][1]
        for row, refusal in refused:
            await self._refuse(row, f"the target refused it: {refusal}")

    async def _postpone(self, row: Reservation, why: NotProvisioned) -> None:
        wait = self.settings.max_backoff
        log.warning(
            "outbox row %s waits %.0fs in the outbox: %s",
            row.job.id,
            wait.total_seconds(),
            why,
        )
        try:
            await self.outbox.store.release(row, delay=wait, count_attempt=False)
        except LeaseLost:
            return  # another relay has it now

    async def _hand_back(self, *groups: Sequence[Reservation]) -> None:
        await self.outbox.store.hand_back_unstarted([row for group in groups for row in group])

    async def _settle(self, rows: Sequence[Reservation]) -> None:
        """Delete relayed rows. One whose lease lapsed meanwhile will be relayed again."""
        outcomes = await self.outbox.store.acknowledge_many(rows)
        lost = [row.job.id for row, outcome in zip(rows, outcomes, strict=True) if outcome]
        if lost:
            log.warning(
                "%d outbox rows were relayed after their lease lapsed and may be relayed "
                "again (a duplicate the target sees by job id): %s",
                len(lost),
                ", ".join(lost[:5]),
            )

    async def _refuse(self, row: Reservation, error: str) -> None:
        log.error("outbox row %s set aside in the outbox's failed table: %s", row.job.id, error)
        await self.outbox.store.fail(row, error)
        self.counts.refused += 1


async def _sleep_unless(stop: asyncio.Event, delay: timedelta) -> None:
    try:
        await asyncio.wait_for(stop.wait(), delay.total_seconds())
    except TimeoutError:
        return


__all__ = ["DEFAULT_BATCH", "Relay", "RelayCounts", "RelaySettings"]
