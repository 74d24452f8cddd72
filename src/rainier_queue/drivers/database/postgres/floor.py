# SPDX-License-Identifier: MIT
"""Where a claim's index scan starts, so a long drain does not slow down as it goes.

A deleted row leaves its index entry behind until VACUUM removes it, and a
queue deletes rows from the head of its claim index (the oldest due jobs)
all day. A claim that starts its scan at the head of the queue's range
steps over every entry settled since the last VACUUM before reaching a
live one: the further a drain gets, the more it steps over, so a million
job drain ran a quarter slower at its end than at its start, and with
autovacuum off (or behind) it only gets worse. Index-only hints (entries
marked dead by earlier scans) spare the visits to the table, not the reads
of the index pages.

So each claim remembers where it stopped, as (due_at, seq) of the last row
it took, and the next claim of that queue from this process starts just
past it: a bounded index descent, whatever lies behind. A row can still turn
up behind the floor: a lease that lapsed (its row was claimed before), a
claim of another worker that rolled back, a push that read the clock
before a row above the floor was claimed but committed after. So:

- a claim that starts from a floor and finds nothing claims again from the
  head (an empty answer still means an empty queue), and a claim from the
  head that finds nothing forgets the floor, so an idle queue costs one
  statement per claim, not two;
- the floor is forgotten `REFRESH` after the last claim from the head (or a
  tenth of the lease, if that is sooner), so the head is scanned at least
  that often and a lapsed lease waits at most that much longer to be
  reclaimed. Not every second: deep into a drain with nothing vacuumed, one
  claim from the head read 4,448 index pages (61 ms), and two workers doing
  that every second spent as much server time on it as on all their other
  claims together;
- the clock for that starts when a claim from the head is sent, not when it
  returns: a worker keeps several claims in flight, and each one that
  started before the first head claim came back used to read the head as
  well (on a loaded machine, 20 claims from the head where 13 do now, in the
  same 60,000-job drain; at 90% of a million-job drain with nothing
  vacuumed, each reads about 4,600 index pages).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

REFRESH = 5.0
"""Seconds a floor is trusted after the last claim that scanned from the head, at most."""

HEAD = (-(2**63), -(2**63))
"""A floor below every row: the claim scans from the head of the queue's range."""


@dataclass(slots=True)
class Floors:
    """Each queue's floor in this process: (due_at, seq) of its last claimed row."""

    refresh: float = REFRESH
    _floors: dict[str, tuple[int, int]] = field(default_factory=dict)
    _scanned: dict[str, float] = field(default_factory=dict)
    """When a claim of each queue from its head was last sent (`time.monotonic()`)."""

    def start(self, queue: str) -> tuple[int, int] | None:
        """Where the next claim of `queue` starts; None for the head.

        A None answer counts as the head being read from now: the claims that
        start while that one is on its way go on from the floor, so a worker
        with several claims in flight reads the head once a `refresh`, not
        once per claim in flight.
        """
        floor = self._floors.get(queue)
        now = time.monotonic()
        if floor is None or now - self._scanned.get(queue, 0.0) > self.refresh:
            self._scanned[queue] = now
            return None
        return floor

    def claimed(self, queue: str, keys: Sequence[tuple[int, int]], *, from_head: bool) -> None:
        """A claim of `queue` took rows at `keys` ((due_at, seq) each), from the head or not."""
        if from_head:
            self._scanned[queue] = time.monotonic()
        if keys:
            self._floors[queue] = max(keys)
        elif from_head:
            self._floors.pop(queue, None)


__all__ = ["HEAD", "REFRESH", "Floors"]
