# SPDX-License-Identifier: MIT
"""A batch as its store keeps it: the port every batch-holding driver implements.

Why this shape: a batch's callbacks must be queued exactly once, even when
its last two jobs finish at the same moment on two machines, and even when
a worker dies between recording its job's end and acknowledging the job
(the job then runs again and is recorded again). So the store records a
job's end **idempotently by job id** (a done-marker per job: a second
record of the same job changes nothing), and the same atomic write that
moves the counts to "all done" also queues the callbacks. There is no
moment between "the batch is finished" and "its callbacks are queued" for
a crash to fall into, and no second writer can see "finished" and queue
them again: a SQL driver does it in one transaction (the batch row locked),
Redis in one Lua script, memory under its lock.

The data stays small whatever the batch's size: a batch is a counter row
(total, succeeded, failed, cancelled) and the set of finished job ids, and
recording one job's end reads the counters and one marker, never the set.
Once the batch is finished the markers are dropped; later records of its
jobs (a rerun) find the batch finished and change nothing.

The callbacks are stored when the batch is opened, as envelope text split
around their counts header (`Callback.before`/`after`), so whichever store
finishes the batch writes the counts into the callback by joining three
strings (a Lua script has no JSON encoder it could trust with a payload's
numbers) and never parses or re-encodes a payload. Each callback's id is
the batch's id and its kind (`<batch>.then`), the same whoever queues it.
"""

from __future__ import annotations

import enum
import json
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol, runtime_checkable

from .batch_counts import BATCH_DONE, BatchCounts
from .envelope import QueuedJob

BATCH = "rq-batch"
"""The header each job of a batch carries: the batch's id and its callbacks' queues."""

KINDS = ("then", "catch", "finally")
"""The callbacks a batch may have, in the order they are queued."""


class Outcome(enum.Enum):
    """How one job of a batch ended, as its store counts it."""

    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


@dataclass(frozen=True, slots=True)
class Member:
    """What a job of a batch knows of it: the batch, and where its callbacks go (a store
    that must name their queues' keys in the write that queues them, as Redis does)."""

    batch_id: str
    callback_queues: tuple[str, ...]

    def header(self) -> str:
        return json.dumps(
            {"id": self.batch_id, "q": list(self.callback_queues)},
            separators=(",", ":"),
            ensure_ascii=True,
        )


def member(headers: Mapping[str, str]) -> Member | None:
    """The batch a job belongs to, from its headers; None for a job in no batch (or a
    header that is not a batch's)."""
    raw = headers.get(BATCH)
    if raw is None:
        return None
    try:
        data = json.loads(raw)
        batch_id, queues = data["id"], data["q"]
    except (ValueError, TypeError, KeyError):
        return None
    if not isinstance(batch_id, str) or not isinstance(queues, list):
        return None
    if not all(isinstance(q, str) for q in queues):
        return None
    return Member(batch_id, tuple(queues))


@dataclass(frozen=True, slots=True)
class Callback:
    """One callback of a batch, stored at open, queued by the write that finishes it."""

    kind: str
    """`then`, `catch` or `finally`."""
    queue: str
    before: str
    """The envelope's JSON text up to the counts header's value."""
    after: str
    """The rest of it: the counts go between `before` and `after`."""

    @classmethod
    def of(cls, kind: str, job: QueuedJob) -> Callback:
        """`job` (already sealed, if the connection seals) as the batch's `kind` callback."""
        if kind not in KINDS:
            raise ValueError(f"a batch callback is one of {', '.join(KINDS)}, not {kind!r}")
        mark = secrets.token_hex(16)  # random, so it occurs once in the text
        text = job.with_changes(headers={**job.headers, BATCH_DONE: mark}).to_json()
        before, _, after = text.partition(mark)
        return cls(kind, job.queue, before, after)

    def applies(self, counts: BatchCounts) -> bool:
        """`then` when every job succeeded, `catch` when any did not, `finally` always."""
        if self.kind == "then":
            return counts.all_succeeded
        if self.kind == "catch":
            return not counts.all_succeeded
        return True

    def body(self, counts: BatchCounts) -> str:
        """The callback's envelope text, its counts header filled in."""
        return self.before + json.dumps(counts.header())[1:-1] + self.after

    def job(self, counts: BatchCounts) -> QueuedJob:
        return QueuedJob.from_json(self.body(counts))

    def name(self) -> str:
        """The callback job's name, read from its text (for showing a batch's progress)."""
        try:
            return str(json.loads(self.before + self.after)["name"])
        except (ValueError, KeyError):
            return "?"

    def to_dict(self) -> dict[str, str]:
        return {"kind": self.kind, "queue": self.queue, "before": self.before, "after": self.after}

    @classmethod
    def from_dict(cls, data: Mapping[str, str]) -> Callback:
        return cls(data["kind"], data["queue"], data["before"], data["after"])


def callbacks_to_json(callbacks: Sequence[Callback]) -> str:
    return json.dumps([c.to_dict() for c in callbacks], separators=(",", ":"))


def callbacks_from_json(text: str) -> tuple[Callback, ...]:
    return tuple(Callback.from_dict(c) for c in json.loads(text))


def callback_id(batch_id: str, kind: str) -> str:
    """The id a batch's `kind` callback is queued under: the same whoever queues it."""
    return f"{batch_id}.{kind}"


@dataclass(frozen=True, slots=True, kw_only=True)
class BatchProgress:
    """A batch as its store has it now (`manager.batch(id)`, `rainier-queue batch ID`)."""

    id: str
    total: int
    succeeded: int
    failed: int
    cancelled: int
    created_at: datetime
    finished_at: datetime | None
    """When the last job's end was recorded and the callbacks were queued; None until then."""
    callbacks: tuple[tuple[str, str], ...] = ()
    """(kind, job name) of each callback the batch has, in the order they would run; as
    `batch_progress` reads them (what `record_in_batch` answers may leave them out)."""

    @property
    def done(self) -> int:
        return self.succeeded + self.failed + self.cancelled

    @property
    def pending(self) -> int:
        """Jobs not finished yet: waiting, running, or being retried."""
        return self.total - self.done

    @property
    def finished(self) -> bool:
        return self.finished_at is not None

    def counts(self) -> BatchCounts:
        return BatchCounts(self.id, self.total, self.succeeded, self.failed, self.cancelled)

    def fired(self) -> tuple[str, ...]:
        """The kinds of callback queued when the batch finished (none before)."""
        if not self.finished:
            return ()
        counts = self.counts()
        return tuple(
            kind for kind, _ in self.callbacks if Callback(kind, "", "", "").applies(counts)
        )


def finished_counts(batch_id: str, total: int, counted: Mapping[str, int]) -> BatchCounts | None:
    """The batch's counts if `counted` (by outcome value) adds up to `total`, else None."""
    counts = BatchCounts(
        batch_id,
        total,
        counted.get("succeeded", 0),
        counted.get("failed", 0),
        counted.get("cancelled", 0),
    )
    return counts if counts.succeeded + counts.failed + counts.cancelled >= total else None


@runtime_checkable
class BatchStore(Protocol):
    """Where a connection keeps batches (`Capabilities.batches`): the queue itself, or a
    store it holds (`HoldsBatchStore`; `batch_store_of` finds either).

    `record_in_batch` is idempotent by job id, and the one write that finds
    every job of the batch recorded also queues the callbacks that apply, on
    this connection, under their fixed ids (`callback_id`).
    """

    async def open_batch(self, batch_id: str, total: int, callbacks: Sequence[Callback]) -> None:
        """Store a new batch of `total` jobs, none finished, with its callbacks."""
        ...

    async def record_in_batch(
        self, batch: Member, job_id: str, outcome: Outcome
    ) -> BatchProgress | None:
        """Record how job `job_id` of `batch` ended (once: again changes nothing) and, if it
        was the last, queue the callbacks that apply; the batch now. None: no such batch."""
        ...

    async def batch_progress(self, batch_id: str) -> BatchProgress | None:
        """The batch now; None if this store has no batch of that id."""
        ...


@runtime_checkable
class HoldsBatchStore(Protocol):
    """A queue that keeps its batches in a store it holds rather than being one itself:
    a broker counting them in a lock store or a key-value bucket (`CacheBatches`), a
    driver whose batch code sits in a module of its own. Whoever records a batch's job
    (dispatch, the worker, cancelling, the testing fake) asks `batch_store_of`, so no
    driver repeats the three calls only to hand them on."""

    @property
    def batch_store(self) -> BatchStore | None:
        """The store, or None when this connection has none (a broker given no `locks`)."""
        ...


class _Flags(Protocol):
    @property
    def batches(self) -> bool: ...


class _Declaring(Protocol):
    """A `Queue` as far as this module reads one (it sits beside `queue.py`, not above)."""

    @property
    def capabilities(self) -> _Flags: ...


def batch_store_of(queue: _Declaring) -> BatchStore | None:
    """Where `queue`'s connection keeps batches: the store it holds (`HoldsBatchStore`), or
    the queue itself if it is one; None where it keeps none (`Capabilities.batches`)."""
    if not queue.capabilities.batches:
        return None
    if isinstance(queue, HoldsBatchStore):
        return queue.batch_store
    return queue if isinstance(queue, BatchStore) else None


@runtime_checkable
class DropsRepeatedCallbacks(Protocol):
    """A queue whose broker drops a callback pushed again under its id within
    `repeat_window` of the first push (NATS: the stream's duplicate window; SQS FIFO: its
    5-minute deduplication interval).

    Its callbacks are at least once (`Capabilities.batch_callbacks_exactly_once` is
    False) only when the second push comes later than that: a finisher that died
    between pushing them and marking them pushed and runs again only after the window.
    """

    @property
    def repeat_window(self) -> timedelta | None:
        """How long after a push a second push of the same id is dropped; None where this
        connection's broker drops no repeat (an SQS standard queue)."""
        ...


def repeats_dropped_within(queue: object) -> timedelta | None:
    """`queue`'s `repeat_window` (`DropsRepeatedCallbacks`), or None where repeats run."""
    return queue.repeat_window if isinstance(queue, DropsRepeatedCallbacks) else None


__all__ = [
    "BATCH",
    "KINDS",
    "BatchProgress",
    "BatchStore",
    "Callback",
    "DropsRepeatedCallbacks",
    "HoldsBatchStore",
    "Member",
    "Outcome",
    "batch_store_of",
    "callback_id",
    "callbacks_from_json",
    "callbacks_to_json",
    "finished_counts",
    "member",
    "repeats_dropped_within",
]
