# SPDX-License-Identifier: MIT
"""The worker's slots: which jobs it holds, which of them run, and how many more it may take.

`concurrency` is a promise about handlers: never more than that many run at
once. But a job is held for longer than its handler runs. It may be reserved
ahead and wait for a slot, and after its handler returns it is still held
until the broker has recorded the result. Keeping those counts apart, and in
one place, is what lets the loop reserve the next batch while the last one's
acknowledgements are on their way, without ever running too many handlers
or holding without limit jobs that other workers could run.

`Slots` only counts and decides. Starting a handler is the worker's job
(the `start` callback), as is reserving.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Callable
from dataclasses import dataclass, field

from ..limits import Held
from ..queue import Reservation
from .interrupts import Interruptible
from .leases import Lease


@dataclass(eq=False, slots=True)
class Slot:
    """One job the worker holds: its reservation, its lease, and the means to interrupt it."""

    reservation: Reservation
    lease: Lease
    control: Interruptible = field(default_factory=Interruptible)
    task: asyncio.Task[None] | None = None
    started: float = 0.0
    """Monotonic time its handler was started; 0 while it is held (the heartbeat's)."""
    limit: Held | None = None
    """The concurrency slot its key's limit gave it, given back once it settles."""


class Slots:
    """Every job a worker holds, from its reservation until its settle is done.

    - `handling`: how many run their handler now; never more than `concurrency`.
    - `held`: jobs reserved ahead, waiting for a slot, first reserved first started.
    - At most `concurrency` jobs may have returned and still wait for their
      results to be recorded: a broker slow to record them holds up held
      jobs and reserves alike, instead of letting work pile up unrecorded.
    - `requested`: slots set aside for reserves that are on their way.
    """

    def __init__(self, concurrency: int, start: Callable[[Slot], None]) -> None:
        self.concurrency = concurrency
        self._start = start
        self.running: dict[str, Slot] = {}
        self.handling = 0
        self.held: collections.deque[Slot] = collections.deque()
        self.requested = 0
        self.stopping = False

    def __len__(self) -> int:
        return len(self.running)

    def take(self, slot: Slot) -> None:
        """A reserved job: start it if a slot is free, else hold it until one is.

        After a stop, a job that finds no slot free is handed back at once
        (interrupted before its handler starts) instead of being held.
        """
        self.running[slot.reservation.token] = slot
        unheld = len(self.running) - len(self.held)  # this job included
        if not self.held and self.handling < self.concurrency and unheld <= 2 * self.concurrency:
            self._launch(slot)
        elif self.stopping:
            slot.control.interrupt()
            self._launch(slot)
        else:
            self.held.append(slot)

    def handler_returned(self) -> None:
        """A handler returned: its slot is free for a held job."""
        self.handling -= 1
        if self.held:
            self._launch_held()

    def finished(self, slot: Slot) -> None:
        """A job is done with, its result recorded or given up: it no longer counts."""
        self.running.pop(slot.reservation.token, None)
        if self.held:
            self._launch_held()

    def stop(self) -> None:
        """Take no more: every held job goes back unstarted (interrupted, attempt refunded)."""
        self.stopping = True
        while self.held:
            slot = self.held.popleft()
            slot.control.interrupt()
            self._launch(slot)

    def hand_back_held(self, queues: frozenset[str]) -> int:
        """Send the held jobs of `queues` back unstarted (interrupted, attempt refunded).

        For a queue that was paused: what the worker reserved ahead from it and
        has not started goes back for whoever serves the queue once it is resumed.
        How many went back.
        """
        keep: collections.deque[Slot] = collections.deque()
        returned = 0
        while self.held:
            slot = self.held.popleft()
            if slot.reservation.job.queue in queues:
                slot.control.interrupt()
                self._launch(slot)
                returned += 1
            else:
                keep.append(slot)
        self.held = keep
        return returned

    def free(self, *, ahead: int = 0, limit: int | None = None) -> int:
        """How many more jobs a reserve may bring now, less those already asked for.

        `ahead` is how many may be held beyond the running ones (reserving
        ahead); `limit` caps what may still be taken at all (`max_jobs`).
        """
        # A slot frees when its handler returns, not when the broker has
        # recorded the result: the next batch is reserved while the last one's
        # acknowledgements are on their way, so a worker is not idle for a
        # round trip per batch.
        concurrency = self.concurrency
        free = min(
            concurrency + ahead - self.handling - len(self.held),
            2 * concurrency + ahead - len(self.running),
        )
        if limit is not None:
            free = min(free, limit - len(self.running))
        return free - self.requested

    def _launch(self, slot: Slot) -> None:
        self.handling += 1
        self._start(slot)

    def _launch_held(self) -> None:
        """Start held jobs, oldest first, while a slot is free (after a stop: hand them back)."""
        while (
            self.held
            and self.handling < self.concurrency
            and len(self.running) - len(self.held) < 2 * self.concurrency
        ):
            slot = self.held.popleft()
            if self.stopping:
                slot.control.interrupt()
            self._launch(slot)
