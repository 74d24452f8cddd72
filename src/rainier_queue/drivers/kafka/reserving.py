# SPDX-License-Identifier: MIT
"""Handing out jobs from a topic's partitions: which partitions, in what order, how long to wait.

A reserve first serves the partitions whose records it has already read
(those this worker holds come first), which costs no trip to the broker.
Only if that falls short does it take more partitions, a few at a time
(no more than it has jobs to fill, so other workers find some free), those
last found read to the end last, and waits for the broker only when it has
nothing to hand out and none of its jobs runs. A partition whose job was
settled while the reserve looked elsewhere (a worker reserves as soon as a
handler returns, often before its acknowledgement is recorded) is served
from its records before any wait: waiting on empty partitions instead cost
a fetch long-poll, about 0.2 s, per reserve, and gave the busy partition's
lease away. Every partition it passed by is given back at the end.

The partitions it hands out from are chosen first and their cursors
written together: each hand-out is a compare-and-set on its own
partition's cursor, so none waits for another. One after the other, a
worker serving six partitions waited six round trips to the lock store
per reserve, and each partition's next job waited for the whole row (the
drain rate fell with every round trip that the machine's load stretched).

Which partitions it may take or keep is bounded by this worker's fair share
of the topic's partitions (sharing.py, with the count of live workers from
membership.py). A reserve that found others holding the partitions it was
free to take asks them, through the lock store, to give back what they hold
beyond their own share.

A reserve that found nothing looks again before it says so, when one of
this worker's jobs was settled meanwhile (its partition is free now, and the
worker may already count the job as done) or when another worker held a
partition (perhaps only while its own reserve looked around): a worker that
stops when the queue is empty must not stop for either.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time

from ..._clock import utcnow
from ...envelope.reading import Malformed, read_envelope
from ...queue import Reservation, new_token
from .failing import FailedRecords
from .membership import Membership
from .names import KafkaPosition, attempt_number
from .partitions import Cursor, Delivery, Partitions, PartitionState
from .settings import KafkaSettings
from .sharing import Quota

log = logging.getLogger("rainier_queue.kafka")

CONTENDED_PATIENCE = 2.0
"""Seconds a reserve that found nothing keeps looking while other workers hold partitions."""


class Reserver:
    """The reserve side of one `KafkaQueue`."""

    def __init__(
        self,
        partitions: Partitions,
        membership: Membership,
        settings: KafkaSettings,
        failures: FailedRecords,
    ) -> None:
        self._partitions = partitions
        self._failures = failures
        self._membership = membership
        self.settings = settings
        self.lock = asyncio.Lock()
        """Held by a reserve, and by giving partitions back, so the two never interleave."""
        self._settled = 0
        """How many deliveries were settled so far."""
        self._passed_over = 0
        """How many records that are not jobs were recorded as failed and passed so far."""
        self._contended = False
        self._short = False
        """The last pass ended below this worker's share, others holding what it wanted."""
        self._settling = asyncio.Event()
        self._start = random.randrange(1 << 16)

    def done(self, state: PartitionState) -> None:
        """The partition's job is settled (or lost): it may hand out the next one."""
        state.delivery = None
        self._settled += 1
        self._settling.set()

    async def reserve(
        self, topic: str, numbers: list[int], queue: str, limit: int
    ) -> list[Reservation]:
        """Up to `limit` jobs of `queue` from `topic`'s partitions `numbers`."""
        async with self.lock:
            patience = time.monotonic() + CONTENDED_PATIENCE
            while True:
                # A job settled during a pass frees its partition, and the worker may
                # already count it as done: answering "nothing" then would make a
                # worker that stops when empty stop with that partition's jobs left.
                # And a partition another worker holds may be held only for a moment
                # (while its reserve looks around), so that is looked at again too.
                # A pass that met only records that are not jobs on the partitions
                # it read may have left jobs on others it fetched meanwhile: another
                # pass looks, at once, rather than answer "nothing" with jobs left.
                settled, passed, self._contended = self._settled, self._passed_over, False
                out = await self._once(topic, numbers, queue, limit)
                if self._short:
                    # Others hold what it wanted: one of them may serve more than its
                    # share, and gives a partition back between jobs once asked.
                    await self._membership.want(topic)
                moved = self._passed_over != passed
                if out or (self._settled == settled and not self._contended and not moved):
                    break
                if time.monotonic() >= patience:
                    break
                if self._settled == settled and not moved:
                    # Look again as soon as one of this worker's jobs is settled.
                    self._settling.clear()
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(
                            self._settling.wait(), self.settings.max_wait.total_seconds()
                        )
            return out

    async def _once(
        self, topic: str, numbers: list[int], queue: str, limit: int
    ) -> list[Reservation]:
        states = await self._partitions.of(topic, numbers)
        quota = Quota(states, await self._membership.look(topic, len(states)))
        await self._partitions.pull()  # no waiting: only what has been fetched already
        turn = self._start % len(states)
        rotated = states[turn:] + states[:turn]
        # The partitions this worker holds first, then those with records read ahead.
        ordered = sorted(rotated, key=lambda s: (s.lock is None, not s.buffer))
        out: list[Reservation] = []
        try:
            # First the partitions with records already read: no waiting. Only if
            # that falls short are others looked at, together, so a reserve waits
            # for one fetch, not one per partition.
            later: list[PartitionState] = []
            busy: list[PartitionState] = []
            ready: list[PartitionState] = []
            for state in ordered:
                if len(ready) >= limit:
                    break
                if state.delivery is not None and time.monotonic() < state.delivery.deadline:
                    busy.append(state)
                elif not self._free(state):
                    continue
                elif not state.buffer:
                    later.append(state)
                elif await self._claim(state, quota):
                    ready.append(state)
            await self._hand_out_all(ready, queue, out, later)
            looked: list[PartitionState] = []
            while len(out) < limit:
                # A job of this worker's settled while the reserve looked elsewhere
                # (its acknowledgement was on its way when the reserve began): its
                # partition has records read already, so it comes before any wait.
                ready = []
                for state in [s for s in busy if s.delivery is None]:
                    busy.remove(state)
                    if len(out) + len(ready) >= limit or not state.buffer:
                        continue
                    if self._free(state) and await self._claim(state, quota):
                        ready.append(state)
                await self._hand_out_all(ready, queue, out, later)
                if len(out) >= limit or not later:
                    break
                # Records read meanwhile first, then partitions this worker holds; those
                # found read to the end most recently last.
                later.sort(key=lambda s: (not s.buffer, s.lock is None, s.drained_at))
                # No more new partitions at a time than there are jobs wanted, nor
                # beyond this worker's share: the others are left for other workers.
                batch: list[PartitionState] = []
                while later and len(batch) < limit - len(out):
                    state = later.pop(0)
                    if not await quota.may_hold(state, self._partitions):
                        continue
                    if await self._partitions.own(state):
                        quota.took(state)
                        batch.append(state)
                    else:
                        self._contended = True
                for state in batch:
                    await self._partitions.place(state)
                # Wait for the broker only with nothing to hand out: no job of this
                # worker's running (one that ends brings the worker back) and no
                # partition freed meanwhile with records to hand out at once.
                idle = not out and not busy and not any(s.delivery for s in states)
                await self._partitions.fill(batch, self.settings.max_wait, patient=idle)
                looked += batch
                # Records may have come for a partition of an earlier batch meanwhile.
                ready = []
                for state in looked:
                    if len(out) + len(ready) >= limit:
                        break
                    if state.delivery is not None or not state.buffer:
                        continue
                    if quota.may_serve(state):
                        quota.serving(state)
                        ready.append(state)
                await self._hand_out_all(ready, queue, out, None)
        finally:
            await self._partitions.let_go(states, linger=True)
            self._short = self._contended and quota.below_share()
        return out

    async def _claim(self, state: PartitionState, quota: Quota) -> bool:
        """Take (or keep) a partition whose records were read already, to hand out its head."""
        if not await quota.may_hold(state, self._partitions):
            return False  # beyond this worker's share: passed by, so given back at the end
        if not await self._partitions.own(state):
            self._contended = True
            return False
        quota.took(state)
        quota.serving(state)
        await self._partitions.place(state)
        return True

    async def _hand_out_all(
        self,
        states: list[PartitionState],
        queue: str,
        out: list[Reservation],
        later: list[PartitionState] | None,
    ) -> None:
        """The head jobs of `states`, side by side: their cursor writes share one round trip.

        Each is a compare-and-set on its own partition's cursor, so none waits
        for another; one after the other, a reserve's hand-outs cost a round
        trip each, and a partition's next job waited for the whole row. A
        partition that handed out none and has nothing read goes on `later`.
        """
        if not states:
            return
        if len(states) == 1:
            results: list[Reservation | BaseException | None] = [
                await self._hand_out(states[0], queue)
            ]
        else:
            results = await asyncio.gather(
                *(self._hand_out(state, queue) for state in states), return_exceptions=True
            )
        for state, result in zip(states, results, strict=True):
            if isinstance(result, Reservation):
                out.append(result)
            elif later is not None and not state.buffer and state.not_before is None:
                later.append(state)
        # An outage stops the reserve as one hand-out's error did, after all of them ended.
        if error := next((r for r in results if isinstance(r, BaseException)), None):
            raise error

    def _free(self, state: PartitionState) -> bool:
        """Whether a partition may hand out a job now (nothing running, head not known to wait)."""
        delivery = state.delivery
        if delivery is not None:
            if time.monotonic() < delivery.deadline:
                return False
            log.warning(
                "the lease on the job at offset %d of partition %d of topic %r lapsed without a "
                "renewal; handing the job out again",
                delivery.record.offset,
                state.tp.partition,
                state.tp.topic,
            )
            state.buffer.appendleft(delivery.record)
            state.delivery = None
        return state.not_before is None or state.not_before <= utcnow()

    async def _hand_out(self, state: PartitionState, queue: str) -> Reservation | None:
        """The job at the head of a partition, if there is one and it is due."""
        while state.buffer:
            record = state.buffer[0]
            job = read_envelope(record.value, field="value")
            if isinstance(job, Malformed):
                # Recorded on the failed topic before the cursor passes it; an outage
                # raises here and leaves the record at the head, to be handled again.
                await self._failures.record_not_a_job(record, job, queue)
                state.buffer.popleft()
                self._passed_over += 1
                if not await self._partitions.commit(
                    state, state.cursor, Cursor(record.offset + 1)
                ):
                    return None
                continue
            if not job.is_available:
                # A log cannot set one record aside: the partition waits for it.
                state.not_before = job.available_at
                return None
            state.not_before = None
            # The delivery is counted in the cursor before the job runs, so a job that
            # crashes its worker every time still reaches its last attempt. A cursor
            # that moved under this worker (a clear from another process) refuses it.
            cursor = await self._partitions.deliver(state, record.offset)
            if cursor is None:
                return None
            state.buffer.popleft()
            token = new_token()
            lease = self.settings.lease
            state.delivery = Delivery(
                token=token,
                record=record,
                cursor=cursor,
                deadline=time.monotonic() + lease.total_seconds(),
            )
            delivered = cursor.delivered
            return Reservation(
                job=job.with_changes(queue=queue, attempts=attempt_number(job.attempts, delivered)),
                token=token,
                lease_until=utcnow() + lease,
                lease=lease,
                handle=KafkaPosition(state.tp.topic, state.tp.partition, record.offset),
            )
        return None


__all__ = ["CONTENDED_PATIENCE", "Reserver"]
