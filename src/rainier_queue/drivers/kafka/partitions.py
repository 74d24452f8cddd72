# SPDX-License-Identifier: MIT
"""Partitions as this process sees them: who owns each, where it is read up to, what is buffered.

A partition is worked by one worker at a time, and that worker is whoever
holds its lease in the shared lock store. The lease is taken when a reserve
wants a job from the partition, kept (and renewed by the worker) while that
job runs, kept across the next reserve if the partition still has work, and
given back as soon as a reserve passes it by: a worker never sits on a
partition it is not serving, so a second worker process finds idle
partitions to take instead of waiting out a lease. How many it may take is
its fair share (sharing.py); this module only takes and gives back.

The cursor lives in the lock store too: the next offset to run, and how
many times the record there has been handed out (`Cursor`). Every move of
it is a compare-and-set from the value this worker last wrote or read.
Handing a job out is one (it counts the delivery, before the job runs, so a
job that crashes its worker every time still reaches its last attempt), and
settling it is another. That is the fence: if a lease lapsed and two
workers ran one record, only the first to settle moves the cursor; the
other gets `LeaseLost`. It is also how a `clear` from another process
reaches a worker holding the partition: the holder trusts its own copy of
the cursor rather than reading it before every job (a round trip per job),
and its next hand-out, a compare-and-set from that copy, fails on the
cursor the clear moved, so it reads the cursor afresh and hands out none of
the cleared jobs. Two writes per job, both on one key, and no key per
record to forget; a reserve makes the hand-outs of all the partitions it
serves side by side (reserving.py), so a worker's cycle waits for two
round trips however many partitions it serves.

Records read ahead of the cursor are kept per partition while the consumer
reads on. A log never changes what is at an offset, so what was read stays
good after the lease is given back and taken again: the buffer is checked
against the cursor (read afresh every time) and only dropped when the
cursor has moved outside it.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from aiokafka import AIOKafkaConsumer, ConsumerRecord, TopicPartition
from aiokafka import errors as kx

from ...errors import BrokerUnavailable
from ...locks import Cache, Lock, LockManager
from .connection import KafkaClients, translated
from .cursor_writes import CursorWrites
from .names import cursor_key, lease_name

log = logging.getLogger("rainier_queue.kafka")

FIRST_FETCH = 2.0
"""Seconds a reserve may wait, at most, for the broker to answer a partition just placed."""

READ_AHEAD = 500
"""Records read ahead per partition before the consumer stops fetching it."""

FETCH_SLICE = 0.02
"""Seconds between looks at whether the broker has answered an empty fetch."""

CLEAR_TRIES = 100
"""Compare-and-set attempts a clear makes on one cursor that workers keep moving."""


@dataclass(frozen=True, slots=True)
class Cursor:
    """A partition's cursor as the lock store keeps it.

    `offset` is the next record to run, and `delivered` how many times that
    record has been handed out. Written as `offset`, or `offset:delivered`
    once the record has been handed out.
    """

    offset: int
    delivered: int = 0

    def encode(self) -> bytes:
        text = f"{self.offset}:{self.delivered}" if self.delivered else str(self.offset)
        return text.encode()

    @classmethod
    def decode(cls, raw: bytes, topic: str, partition: int) -> Cursor:
        """The cursor `raw` holds; a `ValueError` naming the partition if it holds none."""
        try:
            offset, _, delivered = raw.decode().partition(":")
            cursor = cls(int(offset), int(delivered or "0"))
        except (UnicodeDecodeError, ValueError):
            cursor = cls(-1, -1)
        if cursor.offset < 0 or cursor.delivered < 0:
            raise ValueError(
                f"the lock store holds {raw[:20]!r} as the cursor of partition {partition} of "
                f"topic {topic!r}, which is not an offset (or an offset and a delivery count); "
                "delete the key to read the partition from its earliest record, or `clear` "
                "the queue to skip to its end"
            )
        return cursor


@dataclass(eq=False, slots=True)
class Delivery:
    """The one job handed out from a partition and not yet settled."""

    token: str
    record: ConsumerRecord[bytes, bytes]
    cursor: Cursor
    """The cursor as the hand-out wrote it; settling moves it from exactly this."""
    deadline: float
    """Monotonic time the lease runs out unless renewed."""


@dataclass(eq=False, slots=True)
class PartitionState:
    """What this process knows about one partition of one topic."""

    tp: TopicPartition
    lock: Lock | None = None
    extended_at: float = 0.0
    buffer: deque[ConsumerRecord[bytes, bytes]] = field(default_factory=deque)
    positioned: bool = False
    """The consumer reads on from `next_offset` (or from the start, see `from_start`)."""
    next_offset: int | None = None
    from_start: bool = False
    """Positioned at the earliest record because the group never read this partition."""
    resumed: bool = False
    cursor: Cursor | None = None
    """The cursor as last read from the lock store, or as this process last moved it."""
    cursor_known: bool = False
    """`cursor` is current: this process moved it last, holding the lease ever since."""
    delivery: Delivery | None = None
    not_before: datetime | None = None
    """The record at the head is a job not due before this; nothing behind it may pass."""
    drained_at: float = 0.0
    """Monotonic time a fetch last found the partition read to its end."""
    elsewhere_until: float = 0.0
    """Monotonic time until which another worker is taken to hold the lease (not asked)."""
    free_since: float | None = None
    """Monotonic time a probe first found the lease free, in a row (see sharing.py)."""
    probed_at: float = float("-inf")
    linger_until: float = 0.0
    """Monotonic time until which the consumer reads on after the lease was given back."""


def lost_range(cursor: int, earliest: int) -> tuple[int, int] | None:
    """The offsets `[first, end)` retention removed before they were read, if any."""
    return (cursor, earliest) if cursor < earliest else None


class Partitions:
    """The partition bookkeeping of one `KafkaQueue`."""

    def __init__(
        self,
        clients: KafkaClients,
        locks: LockManager,
        *,
        group: str,
        lease: timedelta,
        recheck: timedelta = timedelta(milliseconds=100),
    ) -> None:
        self.clients = clients
        self.recheck = recheck.total_seconds()
        self.locks = locks
        self.cache: Cache = locks.cache
        self._writes = CursorWrites(locks.cache)
        """Cursor moves of one event-loop turn, sent together (cursor_writes.py)."""
        self.group = group
        self.lease = lease
        self._states: dict[TopicPartition, PartitionState] = {}

    def all(self) -> list[PartitionState]:
        return list(self._states.values())

    def get(self, topic: str, partition: int) -> PartitionState | None:
        return self._states.get(TopicPartition(topic, partition))

    async def of(self, topic: str, numbers: Sequence[int]) -> list[PartitionState]:
        """The states of `topic`'s partitions, assigning new ones to the consumer (paused)."""
        wanted = [TopicPartition(topic, n) for n in numbers]
        if any(tp not in self._states for tp in wanted):
            for tp in wanted:
                self._states.setdefault(tp, PartitionState(tp))
            consumer = await self.clients.consumer()
            # A new assignment forgets every position, so each partition is placed
            # again before it is next read; buffered records are dropped with it.
            consumer.assign(list(self._states))
            consumer.pause(*self._states)
            for state in self._states.values():
                state.buffer.clear()
                state.positioned = state.resumed = False
        return [self._states[tp] for tp in wanted]

    # -- leases ----------------------------------------------------------------------

    async def own(self, state: PartitionState) -> bool:
        """Take or keep the lease on a partition; False when another worker holds it."""
        now = time.monotonic()
        if state.lock is not None:
            if now - state.extended_at < self.lease.total_seconds() / 3:
                return True  # taken or renewed moments ago: certainly still ours
            if await self.locks.extend(state.lock, self.lease):
                state.extended_at = now
                return True
            log.warning(
                "the lease on partition %d of topic %r lapsed while this worker held it",
                state.tp.partition,
                state.tp.topic,
            )
            state.lock = None
        state.cursor_known = False  # somebody else may have moved it while we did not hold it
        if now < state.elsewhere_until:
            return False
        lock = await self.locks.acquire(self._lease_name(state), self.lease)
        if lock is None:
            # Asked again after a short while, not on every reserve in between.
            state.elsewhere_until = now + self.recheck
            if state.resumed:  # another worker's now: stop reading it ahead
                (await self.clients.consumer()).pause(state.tp)
                state.resumed = False
            return False
        state.lock, state.extended_at = lock, now
        return True

    async def renew(self, state: PartitionState) -> bool:
        """Extend the lease of a partition whose job is running; False if it is not ours."""
        if state.lock is None or not await self.locks.extend(state.lock, self.lease):
            state.lock, state.cursor_known = None, False
            return False
        state.extended_at = time.monotonic()
        return True

    async def let_go(self, states: Iterable[PartitionState], *, linger: bool = False) -> None:
        """Give back the lease of every one of `states` that has no job running.

        The partition is paused, so the consumer reads ahead only partitions
        this worker holds; what it read is kept, for when it takes it again.
        With `linger`, one with nothing read yet is read on for a moment
        (`FIRST_FETCH`) until its first records come: a fetch answered for a
        paused partition is thrown away, so a worker that takes a partition
        while its jobs run, and gives it back before the broker answers, would
        otherwise never get a record from it. Reading is harmless without the
        lease (a log never changes what is at an offset, and the buffer is
        checked against the cursor when the lease is taken again).
        """
        consumer = await self.clients.consumer()
        for state in states:
            if state.delivery is not None or state.lock is None:
                continue
            lock, state.lock, state.cursor_known = state.lock, None, False
            if linger and state.resumed and not state.buffer:
                state.linger_until = time.monotonic() + FIRST_FETCH
            elif state.resumed:
                consumer.pause(state.tp)
                state.resumed = False
            if not await self.locks.release(lock):
                log.warning(
                    "the lease on partition %d of topic %r had lapsed before it was given back; "
                    "another worker may have run a job from it at the same time as this one",
                    state.tp.partition,
                    state.tp.topic,
                )

    def lease_name(self, topic: str, partition: int) -> str:
        return lease_name(self.group, topic, partition)

    def _lease_name(self, state: PartitionState) -> str:
        return self.lease_name(state.tp.topic, state.tp.partition)

    # -- cursors and delivery counts ---------------------------------------------------

    def cursor_key(self, topic: str, partition: int) -> str:
        return cursor_key(self.group, topic, partition)

    async def read_cursor(self, topic: str, partition: int) -> Cursor | None:
        """The group's cursor in a partition; None if it never read one."""
        raw = await self.cache.get(self.cursor_key(topic, partition))
        return None if raw is None else Cursor.decode(raw, topic, partition)

    async def commit(self, state: PartitionState, expected: Cursor | None, new: Cursor) -> bool:
        """Move the cursor to `new` if it is still `expected`; False if somebody moved it."""
        key = self.cursor_key(state.tp.topic, state.tp.partition)
        if expected is None:
            moved = await self.cache.add(key, new.encode())
        else:
            moved = await self._writes.replace_if(key, expected.encode(), new.encode())
        state.cursor, state.cursor_known = (new, True) if moved else (None, False)
        return moved

    async def deliver(self, state: PartitionState, offset: int) -> Cursor | None:
        """Count a hand-out of the record at `offset` in the cursor; None if the cursor moved.

        The cursor moves onto the record (over a gap, a transaction marker or
        a compacted record, first) with one more delivery counted. None means
        it was not where this worker last saw it: another process cleared the
        queue, or another worker took the partition. It is read afresh at
        the next placing.
        """
        expected = state.cursor
        delivered = expected.delivered if expected is not None and expected.offset == offset else 0
        new = Cursor(offset, delivered + 1)
        return new if await self.commit(state, expected, new) else None

    async def undeliver(self, state: PartitionState, delivery: Delivery) -> None:
        """Take back the delivery count of a job handed back unstarted, if the cursor is unmoved."""
        was = delivery.cursor
        await self.commit(state, was, Cursor(was.offset, max(0, was.delivered - 1)))

    async def skip_to(
        self, state: PartitionState, cursor: Cursor | None, end: int
    ) -> Cursor | None:
        """Move the cursor from `cursor` (as read) to `end`, for a clear; the value it replaced.

        A compare-and-set, read again and retried while workers move the
        cursor meanwhile (each retry finds it further on, so it ends), and
        never a move backwards: a cursor at or past `end` stays, and is what
        comes back. None means there was no cursor (never read). A worker
        holding the partition finds out at its next hand-out, a
        compare-and-set from the cursor it last saw.
        """
        topic, partition = state.tp.topic, state.tp.partition
        key = self.cursor_key(topic, partition)
        state.cursor_known = False  # this process reads it afresh too
        for _ in range(CLEAR_TRIES):
            if cursor is not None and cursor.offset >= end:
                return cursor
            value = Cursor(end).encode()
            if cursor is None:
                moved = await self.cache.add(key, value)
            else:
                moved = await self.cache.replace_if(key, cursor.encode(), value)
            if moved:
                return cursor
            cursor = await self.read_cursor(topic, partition)
        raise BrokerUnavailable(
            f"the cursor of partition {partition} of topic {topic!r} moved {CLEAR_TRIES} times "
            "while the queue was being cleared, each time before the clear could move it; "
            "clear the queue again (the partitions already cleared stay cleared)"
        )

    # -- reading -------------------------------------------------------------------

    async def place(self, state: PartitionState) -> None:
        """Read the cursor and make sure the next record read is the one it points at."""
        consumer = await self.clients.consumer()
        if not state.cursor_known:
            state.cursor = await self.read_cursor(state.tp.topic, state.tp.partition)
        cursor = None if state.cursor is None else state.cursor.offset
        if cursor is None:
            if not (state.positioned and state.from_start):
                # Never read: start at the earliest record still kept, never at the
                # end, or every job pushed before the first worker started is skipped.
                async with translated("find the start of a partition"):
                    await consumer.seek_to_beginning(state.tp)
                state.buffer.clear()
                state.positioned, state.from_start, state.next_offset = True, True, None
        elif not self._buffer_covers(state, cursor):
            consumer.seek(state.tp, cursor)
            state.buffer.clear()
            state.positioned, state.from_start, state.next_offset = True, False, cursor
        else:
            while state.buffer and state.buffer[0].offset < cursor:
                state.buffer.popleft()
            state.from_start = False
        if not state.resumed and len(state.buffer) < READ_AHEAD:
            consumer.resume(state.tp)
            state.resumed = True

    @staticmethod
    def _buffer_covers(state: PartitionState, cursor: int) -> bool:
        if not state.positioned or state.next_offset is None:
            return False
        first = state.buffer[0].offset if state.buffer else state.next_offset
        return first <= cursor <= state.next_offset

    async def fill(
        self, states: Sequence[PartitionState], wait: timedelta, *, patient: bool
    ) -> None:
        """Read what the broker has for those of `states` whose buffer is empty.

        If `patient` and none of `states` has records yet, waits until each has
        some, or the broker has answered a fetch for it that was sent after this
        call began and brought none, or `wait` (plus one fetch) has passed; so a
        job pushed before a reserve is found by it. Otherwise takes only what
        has arrived.
        """
        empty = {state.tp: state for state in states if not state.buffer}
        if not empty:
            return
        consumer = await self.clients.consumer()
        began = time.time()
        seconds = wait.total_seconds()
        patient = patient and len(empty) == len(states)
        deadline = time.monotonic() + (2 * seconds + FIRST_FETCH if patient else 0)
        while empty and any(state.resumed for state in empty.values()):
            slice_ms = 0 if not patient else max(1, int(min(seconds, FETCH_SLICE) * 1000))
            arrived = await self.pull(slice_ms)
            for tp in arrived:
                empty.pop(tp, None)
            for tp in list(empty):
                if self._caught_up(consumer, empty[tp], began + seconds):
                    empty.pop(tp).drained_at = time.monotonic()
            # Records for any partition end the wait: the reserve hands them out first.
            if arrived or len(empty) < len(states) or time.monotonic() >= deadline:
                return

    async def pull(self, wait_ms: int = 0) -> set[TopicPartition]:
        """Move what the consumer has fetched into the partitions' buffers; which got some.

        Everything fetched is taken, not only what a reserve wants now: a result
        left with the consumer holds back its next fetch from the broker for every
        partition (aiokafka's prefetch backoff), and taking it early lets the next
        fetch start while jobs run.
        """
        consumer = await self.clients.consumer()
        reading = {s.tp: s for s in self._states.values() if s.resumed}
        if not reading:
            return set()
        try:
            async with translated("read records"):
                batches = await consumer.getmany(*reading, timeout_ms=wait_ms)
        except kx.OffsetOutOfRangeError as exc:
            await self._rejoin(consumer, exc, reading)
            return set()
        arrived: set[TopicPartition] = set()
        for tp, records in batches.items():
            if records and tp in reading:
                state = reading[tp]
                state.buffer.extend(records)
                state.next_offset = records[-1].offset + 1
                arrived.add(tp)
                if len(state.buffer) >= READ_AHEAD:
                    consumer.pause(tp)  # enough read ahead; `place` resumes it
                    state.resumed = False
        now = time.monotonic()
        for tp, state in reading.items():
            # Given back while its first fetch was on its way (`let_go`): read until
            # records come, or for `FIRST_FETCH` at most.
            if state.lock is None and state.resumed and (state.buffer or now >= state.linger_until):
                consumer.pause(tp)
                state.resumed = False
        return arrived

    @staticmethod
    def _caught_up(consumer: AIOKafkaConsumer, state: PartitionState, since: float) -> bool:
        """Whether a fetch sent after `since` found the partition read to its end."""
        answered = consumer.last_poll_timestamp(state.tp)
        if answered is None or answered / 1000 <= since:
            return False
        end = consumer.highwater(state.tp)
        if end is None or end == 0:
            return True
        return state.next_offset is not None and state.next_offset >= end

    async def _rejoin(
        self,
        consumer: AIOKafkaConsumer,
        error: kx.OffsetOutOfRangeError,
        states: dict[TopicPartition, PartitionState],
    ) -> None:
        """The cursor points outside the log: report what was lost and start again at the start."""
        positions = error.args[0] if error.args and isinstance(error.args[0], dict) else {}
        for tp, offset in positions.items():
            state = states.get(tp)
            if state is None:
                continue
            async with translated("find the start of a partition"):
                lookups = await self.clients.lookups()
                earliest = (await self.clients.finished(lookups.beginning_offsets([tp])))[tp]
            lost = lost_range(int(offset), earliest)
            if lost is not None:
                log.error(
                    "partition %d of topic %r: the records at offsets %d to %d were deleted by "
                    "the topic's retention before any worker ran them; those jobs are lost. "
                    "Rejoining at offset %d",
                    tp.partition,
                    tp.topic,
                    lost[0],
                    lost[1] - 1,
                    earliest,
                )
            else:
                log.error(
                    "partition %d of topic %r: the cursor %d is past the end of the log (was the "
                    "topic deleted and created again?); rejoining at the earliest offset, %d",
                    tp.partition,
                    tp.topic,
                    offset,
                    earliest,
                )
            await self.commit(state, state.cursor, Cursor(earliest))
            consumer.seek(tp, earliest)
            state.buffer.clear()
            state.positioned, state.from_start, state.next_offset = True, False, earliest


__all__ = ["CLEAR_TRIES", "Cursor", "Delivery", "PartitionState", "Partitions", "lost_range"]
