# SPDX-License-Identifier: MIT
"""Failed-job ids as a person reads and types them: short in the table, whole on request.

A job id is a UUIDv7, 36 characters, which folds over four lines of an
80-column table. Its first half is the creation time, shared by every job
of one bulk dispatch; its last group (12 hex digits) is random. So the
`failed` table shows that last group, `…` before it, and `retry`/`forget`
take either the whole id or a unique part of one: its start or its end, as
`git` takes a short commit hash. A part that fits several jobs is refused,
naming them, rather than guessed.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..queue import FailedJobListing

SHORT = 12
"""Characters of an id the table shows: a UUIDv7's random last group."""

SEARCHED = 10_000
"""How many of the newest failed jobs a short id is looked up among."""

MIN_PART = 6
"""A part of an id shorter than this is taken as a whole id only."""


def short_id(job_id: str) -> str:
    """`job_id` as the table shows it: its last `SHORT` characters after `…`, or whole."""
    if len(job_id) <= SHORT + 1:
        return job_id
    return "…" + job_id[-SHORT:]


@dataclass(frozen=True, slots=True)
class Lookup:
    """What a typed id named: one whole id, several (ambiguous), or nothing."""

    matches: tuple[str, ...]
    searched_all: bool
    """False when the store holds more failed jobs than were searched."""


async def lookup(store: FailedJobListing, given: str) -> Lookup:
    """The failed jobs whose id starts or ends with `given` (an `…` before it is ignored)."""
    part = given.removeprefix("…").removeprefix("...")
    if len(part) < MIN_PART:
        return Lookup((), searched_all=True)
    jobs = await store.failed_jobs(limit=SEARCHED)
    found = dict.fromkeys(
        f.job.id for f in jobs if f.job.id.startswith(part) or f.job.id.endswith(part)
    )
    return Lookup(tuple(found), searched_all=len(jobs) < SEARCHED)


__all__ = ["MIN_PART", "SEARCHED", "SHORT", "Lookup", "lookup", "short_id"]
