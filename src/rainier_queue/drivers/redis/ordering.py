# SPDX-License-Identifier: MIT
"""Ordering keys on Redis: a line per key beside the stream, moved by the settles' scripts.

Why this shape: a stream hands its entries to whichever worker reads next,
so the order of a key's jobs cannot be kept by what the reserve passes
over (it would read and decode every entry, keyed or not, at every
reserve). Instead only one job of a key is ever out of its line: pushed
while no job holds its key, it goes to the stream (or the delayed set) as
any job does, and its id is written in the queue's `heads` hash; pushed
while one does, it waits in the queue's `line`. The acknowledge or fail
that removes the job holding a key moves the next of that key's line out,
in the same Lua script (`ordered_scripts.py`), so a crash between the two
writes cannot happen: there is no between. A release keeps the key (a
retry keeps its place at the head), a lapsed lease keeps it (the entry is
reclaimed as ever), and the reserve is the plain one.

Every key of the line is the queue's own (`{<queue>}` hash tag), so it
works on a cluster, and so a key's order is kept **within one queue**: the
same ordering key on two queues makes two lines, which run side by side.

What it costs a job with no key: one look at its headers when it is pushed
and settled (the driver picks the scripts of `scripts.py`, unchanged, for a
batch with no keyed job). A keyed push that finds its key held writes three
commands more (the sequence, the line, the held body); a keyed settle
reads the line's first member (`ZRANGEBYLEX`, logarithmic in the line) and
moves it.

This module holds what the driver's parts share in Python: the key a job
carries, the scripts' arguments, and reading a held job back.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ...envelope import QueuedJob
from ...job import ORDERING_KEY
from ...queue import Reservation

LET_GO = 2
"""A settle script's answer for a job settled whose key's next job left the line: a job is
ready to run, so idle workers are woken."""


def ordering_key(job: QueuedJob) -> str | None:
    """The job's ordering key, or None (no header, or an empty one: no order kept)."""
    headers = job.headers
    if not headers:
        return None
    return headers.get(ORDERING_KEY) or None


def any_keyed(jobs: Sequence[QueuedJob]) -> bool:
    """True when one of `jobs` has an ordering key (the ordered scripts are then needed)."""
    return any(ordering_key(job) is not None for job in jobs)


def settle_args(reservations: Sequence[Reservation], indexes: Sequence[int]) -> list[Any]:
    """Per reservation: entry id, token, ordering key ('' for none), job id."""
    args: list[Any] = []
    for i in indexes:
        job = reservations[i].job
        args += [
            str(reservations[i].handle),
            reservations[i].token,
            ordering_key(job) or "",
            job.id,
        ]
    return args


@dataclass(frozen=True, slots=True)
class Held:
    """One job waiting in a line, as its `held` value stores it."""

    due_ms: int
    """When it falls due on the server's clock (0: due when it leaves the line)."""
    job_id: str
    body: str

    def value(self) -> str:
        """The stored form: `<due ms>|<length of id in bytes>|<id><body>`."""
        size = len(self.job_id.encode("utf-8", "surrogateescape"))
        return f"{self.due_ms}|{size}|{self.job_id}{self.body}"


def read_held(value: str) -> Held | None:
    """A `held` value read back; None for one that is not in the stored form."""
    due, bar, rest = value.partition("|")
    size, bar2, rest = rest.partition("|")
    if not bar or not bar2 or not due.isdigit() or not size.isdigit():
        return None
    raw = rest.encode("utf-8", "surrogateescape")
    count = int(size)
    if count > len(raw):
        return None
    job_id = raw[:count].decode("utf-8", "surrogateescape")
    body = raw[count:].decode("utf-8", "surrogateescape")
    return Held(due_ms=int(due), job_id=job_id, body=body)


__all__ = ["LET_GO", "Held", "any_keyed", "ordering_key", "read_held", "settle_args"]
