# SPDX-License-Identifier: MIT
"""Batches counted in a lock store (`Cache`), for a broker whose queue has no store to count in.

Why a ledger of steps and not one write: on SQL and Redis the write that
records a batch's last job also queues its callbacks. A broker cannot do
that: the count lives in the lock store (Kafka's, which every worker of a
group shares already), the callbacks go to the broker, and those are two
servers. So recording a job's end is a row of small writes, each safe to
repeat, in an order that a crash between any two of them cannot turn into a
lost count, a double count, or a lost callback:

1. **count**: one compare-and-set (`replace_if`) on the batch's state key,
   which holds the counts and a short *journal*: the ids of jobs counted
   whose later steps have not all been done. Counting adds the job to the
   journal in the same write, so "counted" and "known to be counted" are
   one fact. The write that brings the count to the total also names this
   job the batch's *finisher*.
2. **push** (the finisher only): the callbacks that apply, produced to the
   broker under their fixed ids (`<batch>.then`, ...).
3. **mark pushed**: a compare-and-set that sets `finished_at` on the state.
4. **done-marker**: a key for the job (`put`), so the job is still known
   to be counted once it leaves the journal.
5. **leave the journal**: a compare-and-set that drops the job's id.

The worker acknowledges the job only after all five. A job that runs again
(its worker died, or its lease lapsed) records again: finding itself in
the journal, it redoes the steps after 1 and counts nothing; finding its
done-marker, it does nothing. A count reads the state and then the marker,
and step 4 comes before step 5, so a job is always in one of the two.

The guarantee: counts are exact, and callbacks are queued **at least
once**: a finisher that dies between 2 and 3 (or two runs of it at once,
after a lapsed lease) produces them again when it runs again, under the
same ids; Kafka keeps both records, so the callback runs twice
(`Capabilities.batch_callbacks_exactly_once` is False for such a driver).
Nothing else can queue them twice: only the finisher's id pushes, once the
state says pushed no run pushes, and a count that lost a race is retried.

**Group commit.** The records of one batch that this process makes while
one is being written wait, and are then written as one group
(`group_commit.py`): step 1 counts every member that needs it in one
compare-and-set, in the group's order, as if they had come one after
another (a member in the journal already is not counted but has its steps
finished; one with a done-marker, or coming after the batch's finisher, is
left alone); the member whose count reaches the total, if any, is the
finisher and does 2 and 3; 4 puts the marker of every member counted now
or found in the journal; 5 drops them all from the journal in one
compare-and-set. The argument above holds
member by member, since a group's writes are the same writes in the same
order, each naming all its members. Every member waits for the group's last
write, and an error in any write reaches every member, so none is
acknowledged before all of its steps are done. Other processes still race
by compare-and-set.

What it costs: per group of one batch's records in a process, two
compare-and-sets on one key (the batch's), a read of the state and one of
each member's marker, and a marker key per member kept `KEPT`; the journal
holds only the jobs being recorded right now, so the state stays small at
any batch size. A process's slots no longer race each other; many
processes finishing one batch's jobs at once still retry each other's
compare-and-sets, the price of a store with no scripts.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from .._clock import utcnow
from ..batchstate import (
    BatchProgress,
    Callback,
    Member,
    Outcome,
    callbacks_from_json,
    callbacks_to_json,
    finished_counts,
)
from ..envelope import QueuedJob
from ..locks import Cache
from .group_commit import GroupCommit

KEPT = timedelta(days=30)
"""How long a batch's keys stand after its last write: a batch still unfinished after
that is forgotten (its late jobs' records find no batch and are logged)."""

_RETRY_PAUSE = 0.002
"""Seconds, jittered and growing, between compare-and-sets that lost a race."""


@dataclass(frozen=True, slots=True)
class _State:
    """The batch's state key: counts, journal, finisher, when the callbacks were pushed."""

    total: int
    created_at: str
    counted: dict[str, int] = field(default_factory=dict)
    journal: tuple[str, ...] = ()
    finisher: str | None = None
    finished_at: str | None = None

    def encode(self) -> bytes:
        return json.dumps(
            {
                "t": self.total,
                "at": self.created_at,
                "n": self.counted,
                "j": list(self.journal),
                "by": self.finisher,
                "fin": self.finished_at,
            },
            separators=(",", ":"),
        ).encode()

    @classmethod
    def decode(cls, raw: bytes) -> _State:
        data = json.loads(raw)
        return cls(
            total=int(data["t"]),
            created_at=str(data["at"]),
            counted={str(k): int(v) for k, v in data["n"].items()},
            journal=tuple(data["j"]),
            finisher=data["by"],
            finished_at=data["fin"],
        )


class CacheBatches:
    """`BatchStore` over a shared `Cache`, pushing callbacks with `push_many` (module doc)."""

    def __init__(
        self,
        cache: Cache,
        prefix: str,
        push_many: Callable[[Sequence[QueuedJob]], Awaitable[object]],
    ) -> None:
        self._cache = cache
        self._prefix = prefix
        """Put before every key, so two connections sharing a store keep apart."""
        self._push_many = push_many
        self._groups = GroupCommit(self._record_group)
        """This process's records of one batch, written together (module doc)."""

    def _key(self, batch_id: str, part: str) -> str:
        return f"{self._prefix}batch:{batch_id}:{part}"

    async def open_batch(self, batch_id: str, total: int, callbacks: Sequence[Callback]) -> None:
        # The callbacks first: a state key names a batch whose callbacks are stored.
        stored = callbacks_to_json(callbacks).encode()
        state = _State(total=total, created_at=_now())
        if not (
            await self._cache.add(self._key(batch_id, "callbacks"), stored, KEPT)
            and await self._cache.add(self._key(batch_id, "state"), state.encode(), KEPT)
        ):
            raise ValueError(f"batch {batch_id} exists already")

    async def record_in_batch(
        self, batch: Member, job_id: str, outcome: Outcome
    ) -> BatchProgress | None:
        return await self._groups.submit(batch.batch_id, (job_id, outcome))

    async def _record_group(
        self, batch_id: str, members: Sequence[tuple[str, Outcome]]
    ) -> list[BatchProgress | None]:
        """The five steps once for a group of this process's records of one batch: one write
        of each kind counts, marks or releases them all (module doc, "Group commit")."""
        state_key = self._key(batch_id, "state")
        tries = 0
        while True:  # step 1: count those no earlier run counted
            raw = await self._cache.get(state_key)
            if raw is None:
                return [None] * len(members)
            read = state = _State.decode(raw)
            marked = await self._marked(batch_id, state, members)
            working: set[str] = set()  # counted now, or by a run that did not finish its steps
            for job_id, outcome in members:
                if job_id in working:
                    continue  # a duplicate inside the group: the first one's steps are its own
                if job_id in state.journal:
                    working.add(job_id)
                elif state.finisher is None and job_id not in marked:
                    state = self._counted(state, job_id, outcome)
                    working.add(job_id)
                # else: all counted (another job finished the batch), or this one is done
            if state is read or await self._cache.replace_if(state_key, raw, state.encode(), KEPT):
                break
            tries += 1
            await asyncio.sleep(random.uniform(0, _RETRY_PAUSE * min(tries, 50)))
        if working:
            if state.finisher in working and state.finished_at is None:
                await self._push_callbacks(batch_id, state)  # step 2
                state = await self._change(  # step 3
                    state_key, lambda s: replace(s, finished_at=s.finished_at or _now())
                )
            await asyncio.gather(  # step 4
                *(self._cache.put(self._key(batch_id, f"done:{j}"), b"1", KEPT) for j in working)
            )
            state = await self._change(  # step 5
                state_key,
                lambda s: replace(s, journal=tuple(j for j in s.journal if j not in working)),
            )
        progress = await self._progress(batch_id, state, named=False)
        return [progress] * len(members)

    async def _marked(
        self, batch_id: str, state: _State, members: Sequence[tuple[str, Outcome]]
    ) -> set[str]:
        """The members with a done-marker, read after `state` (so each job is in one of the
        two); none is read for a job in the journal or when a finisher is named already."""
        if state.finisher is not None:
            return set()
        asked = sorted({job_id for job_id, _ in members if job_id not in state.journal})
        found = await asyncio.gather(
            *(self._cache.get(self._key(batch_id, f"done:{j}")) for j in asked)
        )
        return {job_id for job_id, raw in zip(asked, found, strict=True) if raw is not None}

    async def batch_progress(self, batch_id: str) -> BatchProgress | None:
        raw = await self._cache.get(self._key(batch_id, "state"))
        return None if raw is None else await self._progress(batch_id, _State.decode(raw))

    @staticmethod
    def _counted(state: _State, job_id: str, outcome: Outcome) -> _State:
        counted = {**state.counted, outcome.value: state.counted.get(outcome.value, 0) + 1}
        last = sum(counted.values()) >= state.total
        return replace(
            state,
            counted=counted,
            journal=(*state.journal, job_id),
            finisher=job_id if last else None,
        )

    async def _push_callbacks(self, batch_id: str, state: _State) -> None:
        counts = finished_counts(batch_id, state.total, state.counted)
        if counts is None:  # pragma: no cover - the finisher's state is complete
            return
        jobs = [c.job(counts) for c in await self._callbacks(batch_id) if c.applies(counts)]
        if jobs:
            await self._push_many(jobs)

    async def _change(self, key: str, change: Callable[[_State], _State]) -> _State:
        """Apply `change` to the state at `key` by compare-and-set, retrying a lost race."""
        tries = 0
        while True:
            raw = await self._cache.get(key)
            if raw is None:
                raise LookupError(f"the batch state at {key} vanished while a job was recorded")
            new = change(_State.decode(raw))
            if await self._cache.replace_if(key, raw, new.encode(), KEPT):
                return new
            tries += 1
            await asyncio.sleep(random.uniform(0, _RETRY_PAUSE * min(tries, 50)))

    async def _callbacks(self, batch_id: str) -> tuple[Callback, ...]:
        raw = await self._cache.get(self._key(batch_id, "callbacks"))
        return () if raw is None else callbacks_from_json(raw.decode())

    async def _progress(self, batch_id: str, state: _State, *, named: bool = True) -> BatchProgress:
        """The batch as `state` has it; with its callbacks' names only when `named` (a read
        more, which `record_in_batch`'s answer goes without)."""
        callbacks = await self._callbacks(batch_id) if named else ()
        return BatchProgress(
            id=batch_id,
            total=state.total,
            succeeded=state.counted.get("succeeded", 0),
            failed=state.counted.get("failed", 0),
            cancelled=state.counted.get("cancelled", 0),
            created_at=datetime.fromisoformat(state.created_at),
            finished_at=(
                None if state.finished_at is None else datetime.fromisoformat(state.finished_at)
            ),
            callbacks=tuple((c.kind, c.name()) for c in callbacks),
        )


def _now() -> str:
    return utcnow().isoformat()


__all__ = ["KEPT", "CacheBatches"]
