# SPDX-License-Identifier: MIT
"""What a reserve does with a stored entry that is not a job, written once for every driver.

`stored` reads whatever a driver fetched into a job or a `Malformed`, and
never raises (docs/lifecycle.md, "Entries that are not jobs").
Two things follow for the driver, and every driver with storage did both
in a copy of its own:

- **Quarantine** (`quarantine`): the entry goes to the failed store as it
  was stored, and one error line says where it was and what is wrong with
  it, so `rainier-queue failed` lists it and the log explains the listing.
  How it is recorded is the driver's (a row copied, a list pushed, a record
  produced); that it is logged, and how, is here.
- **The places it took** (`top_up`): a reserve of ten that met three such
  entries hands out seven, and an answer short of the limit (above all an
  empty one) must mean that the queue has no more due jobs, or a worker
  run with `--stop-when-empty` stops with jobs waiting behind a run of
  foreign entries. So the reserve claims again for those places, a bounded
  number of times: a queue holding nothing but foreign entries is drained
  by later reserves, not by one that never returns.

Kafka needs only the first: a record that is not a job takes no place (the
reserve moves past it in its partition and hands out the next record), and
its reserve looks again, under a time bound of its own, when it passed one.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

from ..envelope.reading import Malformed
from ..queue import Reservation

T = TypeVar("T")

MAX_PASSES = 100
"""How many claims one reserve makes at most while it keeps meeting entries that are not jobs."""

Pass = tuple[list[Reservation], int]
"""What one claim gave: the jobs, and how many entries it met that were not jobs."""


async def top_up(
    first: Pass, limit: int, again: Callable[[int], Awaitable[Pass]]
) -> list[Reservation]:
    """The jobs of `first`, and more from `again(places)` for the places malformed entries took.

    `again` claims up to `places` more; it runs only while the last claim met
    such entries and the answer is still short of `limit`, at most
    `MAX_PASSES` claims in all.
    """
    out, malformed = first
    passes = 1
    while malformed and len(out) < limit and passes < MAX_PASSES:
        more, malformed = await again(limit - len(out))
        out += more
        passes += 1
    return out


async def quarantine(
    log: logging.Logger, entry: str, malformed: Malformed, store: str, record: Awaitable[T]
) -> T:
    """Say that `entry` is not a job and why, then `record` it in the failed store.

    `entry` says where it was ("queue 'emails': stream entry 1-0"), `store`
    where it goes ("the failed list"). The line is logged before the record
    is written, so an outage while writing it still leaves the reason in
    the log; the driver leaves the entry where it was, to be moved next time.
    """
    log.error(
        "%s is not a job (%s); it is moved to %s as it was stored",
        entry,
        malformed.reason,
        store,
    )
    return await record


__all__ = ["MAX_PASSES", "Pass", "quarantine", "top_up"]
