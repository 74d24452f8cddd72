# SPDX-License-Identifier: MIT
"""Receiving: messages into reservations, only as many as the worker can run, none stranded.

- A receive asks for at most what the caller can run (`limit`, in calls of
  ten side by side): a message received and not run stays hidden until its
  visibility timeout ends and comes back with an attempt spent.
- Each message becomes a reservation (the job read by the shared reading
  path, its receipt in the handle, its deadline in the ledger), or, for a
  body that is not a job, a record in the failed store and a delete; or, for
  a carried delay that is not due, a visibility change that hides it until
  it is (messages.py); the messages of its key's group that came after it
  are made visible again at once (they wait behind it, in SQS's order).
- Jobs of an ordering key that one receive brought behind the first wait
  in this process until each one before settles (ordering.py).
- On a FIFO connection, due jobs are moved from the queue's delay queue
  first (delays.py): a reserve looks once a second at most, an idle worker
  long-polls it beside its own long poll.
- An idle worker's long poll (`WaitTimeSeconds`) runs as a task of its own.
  A cancelled wait (a stop, a job going back to the queue) returns at once
  and leaves the poll to finish: what it receives is kept for the next
  reserve (`leftovers`), or handed back at close, never left hidden. Closing
  waits for polls under way, at most the connection's `wait`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from datetime import timedelta
from typing import Any

from ..._clock import utcnow
from ...envelope.reading import Malformed, read_envelope
from ...queue import Reservation, new_token
from .. import malformed as toolkit
from .connection import SQSConnection, server_time
from .delays import DelayMover
from .failed import FailedStore
from .leases import Delivery, SQSLedger, visibility
from .messages import SYSTEM_ATTRIBUTES, received
from .ordering import KeyGate
from .provisioning import Queues

log = logging.getLogger("rainier_queue.sqs")

MOST = 10
"""Messages one `ReceiveMessage` returns at most."""


class Receiver:
    """Receives for one queue object: reserves, long polls, and what they left behind."""

    def __init__(
        self,
        connection: SQSConnection,
        queues: Queues,
        ledger: SQSLedger,
        failed: FailedStore,
        lease: timedelta,
        mover: DelayMover,
    ) -> None:
        self._connection = connection
        self._queues = queues
        self._ledger = ledger
        self._failed = failed
        self._lease = lease
        self._mover = mover
        self.gate = KeyGate(self._live)
        """Ordering keys with a job out, and the jobs a receive brought behind them."""
        self._leftovers: dict[str, list[Reservation]] = {}
        self._polls: dict[asyncio.Future[Any], str] = {}
        """Receives under way whose caller may give up waiting, by queue."""
        self._freed: asyncio.Future[None] | None = None
        """Set when a settle lets a job waiting behind its key go: ends an idle wait."""

    def _live(self, token: str) -> bool:
        delivery = self._ledger.get(token)
        return delivery is not None and time.monotonic() < delivery.deadline

    def _ready(self, queue: str, limit: int) -> list[Reservation]:
        """Jobs received earlier and due to go out now: those whose key was freed, then
        those a poll kept."""
        out = self.gate.next_up(queue, limit)
        return out + self._take_leftovers(queue, limit - len(out))

    async def reserve(self, queue: str, limit: int) -> list[Reservation]:
        if limit < 1:
            return []
        await self.give_back_lapsed()
        out = self._ready(queue, limit)
        if len(out) >= limit:
            return out
        await self._mover.look(queue, limit - len(out))
        url = await self._queues.url(queue)
        first = await self._receive_many(queue, url, limit - len(out))
        more = await toolkit.top_up(
            first, limit - len(out), lambda places: self._receive_many(queue, url, places)
        )
        return out + more

    async def _receive_many(self, queue: str, url: str, limit: int) -> toolkit.Pass:
        sizes = [min(MOST, limit - start) for start in range(0, limit, MOST)]
        passes = await asyncio.gather(*(self._receive(queue, url, n, 0) for n in sizes))
        return [r for got, _ in passes for r in got], sum(bad for _, bad in passes)

    async def wait_and_reserve(
        self, queue: str, timeout: timedelta, limit: int, sleep: Callable[[float], Awaitable[None]]
    ) -> list[Reservation]:
        """Long-poll for up to `timeout` (polls of at most `wait` each), then reserve the rest."""
        if limit < 1:
            return []
        await self.give_back_lapsed()
        out = self._ready(queue, limit)
        if out:
            return out
        url = await self._queues.url(queue)
        if timeout.total_seconds() < 1:  # SQS waits in whole seconds: a short poll, then a sleep
            await self._mover.look(queue)
            got, _ = await self._kept_poll(queue, url, min(limit, MOST), 0)
            if not got:
                await sleep(timeout.total_seconds())
            return got
        got = await self._poll_or_freed(queue, url, min(limit, MOST), timeout.total_seconds())
        if len(got) == MOST and limit > MOST:
            got += await self.reserve(queue, limit - MOST)
        return got

    def settled(self, reservation: Reservation) -> None:
        """`reservation` was settled: the next job of its key may go, and an idle wait of
        this process ends at once to hand it out (its key's group is held here, so no poll
        would bring it)."""
        self.gate.settled(reservation)
        freed = self._freed
        if freed is not None and not freed.done() and self.gate.ready([reservation.job.queue]):
            freed.set_result(None)

    async def _poll_or_freed(
        self, queue: str, url: str, limit: int, timeout: float
    ) -> list[Reservation]:
        """`_poll_until`, ended early by a settle that lets a job waiting here go (what the
        poll then receives is kept for the next reserve)."""
        if not self.gate.waiting(queue):
            return await self._poll_until(queue, url, limit, timeout)
        freed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._freed = freed
        poll = asyncio.ensure_future(self._poll_until(queue, url, limit, timeout))
        either: set[asyncio.Future[Any]] = {poll, freed}
        try:
            await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
        finally:
            self._freed = None
            if not poll.done():
                poll.cancel()  # a receive under way finishes and keeps what it got
                await asyncio.gather(poll, return_exceptions=True)
        if not poll.cancelled():
            return poll.result()
        return self._ready(queue, limit)

    async def wait_for_work(self, queues: Sequence[str], timeout: timedelta) -> None:
        """Long-poll each queue for one job, which is kept for the next reserve."""
        await self.give_back_lapsed()
        if any(self._leftovers.get(queue) for queue in queues) or self.gate.ready(queues):
            return
        if timeout.total_seconds() < 1:
            for queue in queues:
                await self._mover.look(queue)
            await asyncio.sleep(timeout.total_seconds())
            return
        urls = [await self._queues.url(queue) for queue in queues]
        polls = [
            asyncio.ensure_future(self._poll_until(q, url, 1, timeout.total_seconds()))
            for q, url in zip(queues, urls, strict=True)
        ]
        try:
            done, _ = await asyncio.wait(polls, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for poll in polls:
                poll.cancel()  # a poll under way finishes and keeps what it got
            await asyncio.gather(*polls, return_exceptions=True)
        for poll, queue in zip(polls, queues, strict=True):
            if poll in done and not poll.cancelled() and poll.exception() is None:
                self._leftovers.setdefault(queue, []).extend(poll.result())
        for poll in done:
            if not poll.cancelled() and poll.exception() is not None:
                raise poll.exception()  # type: ignore[misc]

    async def _poll_until(
        self, queue: str, url: str, limit: int, timeout: float
    ) -> list[Reservation]:
        """Long polls, one after another, until one brings jobs or `timeout` seconds pass.

        SQS waits in whole seconds, so each poll waits what is left rounded to one, and the
        first is made whatever is left (the callers' `timeout` is at least a second). Cut
        down to the second below, a worker's default wait of exactly 1 s asked SQS nothing
        and came back at once, empty: a worker whose reserve had raced a release of its own
        then spun on `counts`, which saw the job waiting, and never received it again.
        """
        end = time.monotonic() + timeout
        most = max(1, int(self._connection.settings.wait.total_seconds()))
        first = True
        while True:
            left = end - time.monotonic()
            if left < 1 and not first:
                return []
            first = False
            seconds = max(1, min(round(left), most))
            self._mover.poll(queue, seconds)  # moves what falls due meanwhile, to this poll
            got, _ = await self._kept_poll(queue, url, limit, seconds)
            if got:
                return got

    async def _kept_poll(
        self, queue: str, url: str, limit: int, seconds: int
    ) -> tuple[list[Reservation], int]:
        """One receive that, if its caller is cancelled, finishes and keeps what it got."""
        poll = asyncio.ensure_future(self._receive(queue, url, limit, seconds))
        self._polls[poll] = queue
        poll.add_done_callback(self._forget_poll)
        try:
            return await asyncio.shield(poll)
        except asyncio.CancelledError:
            poll.add_done_callback(lambda done: self._keep(queue, done))
            raise

    def _forget_poll(self, poll: asyncio.Future[Any]) -> None:
        self._polls.pop(poll, None)

    def unstarted(self, queue: str) -> list[Delivery]:
        """Deliveries of `queue` received here and not handed out yet (kept from a poll whose
        wait was given up, or waiting behind their ordering key): SQS counts them in flight,
        but they wait for this process's next reserve, not for their lease to end."""
        kept = self._leftovers.get(queue, []) + self.gate.waiting(queue)
        return [r.handle for r in kept if isinstance(r.handle, Delivery)]

    def drop(self, queue: str) -> None:
        """Forget what was received of `queue` and not handed out: the queue was cleared."""
        for reservation in self._leftovers.pop(queue, []) + self.gate.drop(queue):
            self._ledger.done(reservation.token)

    def polling(self, queue: str) -> bool:
        """Whether a receive of `queue` is under way whose caller may have given up on it, so
        that what SQS counts in flight may be on its way here, to wait for the next reserve."""
        return queue in self._polls.values()

    def _keep(self, queue: str, poll: asyncio.Future[Any]) -> None:
        """What a poll whose wait was given up received: kept for the next reserve."""
        if poll.cancelled() or poll.exception() is not None:
            return
        got, _ = poll.result()
        if got:
            self._leftovers.setdefault(queue, []).extend(got)

    def _take_leftovers(self, queue: str, limit: int) -> list[Reservation]:
        kept = self._leftovers.get(queue)
        if not kept:
            return []
        now = utcnow()
        fresh = [r for r in kept if r.lease_until is not None and r.lease_until > now]
        for lapsed in (r for r in kept if r not in fresh):
            self.gate.settled(lapsed)  # given back by the ledger: its key holds nothing here
        out, self._leftovers[queue] = fresh[:limit], fresh[limit:]
        return out

    async def _receive(
        self, queue: str, url: str, limit: int, wait: int
    ) -> tuple[list[Reservation], int]:
        sent = time.monotonic()
        answer = await self._connection.call(
            "receive_message",
            f"receive jobs of queue {queue!r}",
            QueueUrl=url,
            MaxNumberOfMessages=limit,
            VisibilityTimeout=visibility(self._lease),
            WaitTimeSeconds=max(0, wait),
            MessageSystemAttributeNames=SYSTEM_ATTRIBUTES,
            MessageAttributeNames=["All"],
        )
        now = server_time(answer)
        out: list[Reservation] = []
        malformed = 0
        hide: list[tuple[dict[str, Any], int]] = []
        held_back: set[str] = set()
        """Message groups of which a message was hidden until due: the rest wait behind it."""
        for message in answer.get("Messages", []):
            group = message.get("Attributes", {}).get("MessageGroupId")
            if group is not None and group in held_back:
                hide.append((message, 0))
                continue
            seen = received(message, now)
            if seen.hide_for:
                hide.append((message, seen.hide_for))
                if group is not None:
                    held_back.add(group)
                continue
            delivery = Delivery(
                queue=queue,
                url=url,
                receipt=str(message["ReceiptHandle"]),
                message_id=str(message.get("MessageId", "")),
                body=str(message.get("Body", "")),
                sent=sent,
            )
            delivered = max(1, seen.receive_count - seen.early)
            found = read_envelope(delivery.body, field="body", queue=queue, delivered=delivered)
            if isinstance(found, Malformed):
                malformed += 1
                await self._quarantine(queue, delivery, found)
                continue
            token = new_token()
            deadline = self._ledger.hold(token, delivery, delivery.sent, self._lease)
            left = deadline - time.monotonic()
            out.append(
                Reservation(
                    job=found,
                    token=token,
                    lease_until=utcnow() + timedelta(seconds=left),
                    lease=self._lease,
                    handle=delivery,
                )
            )
        if hide:
            await self._hide(url, hide)
        # A message hidden until due took a place, as one that was not a job did: the reserve
        # receives again for both (malformed.top_up), so a short answer means none are due.
        # So did a job that waits behind another of its ordering key (ordering.py).
        admitted = self.gate.admit(out)
        return admitted, malformed + len(hide) + len(out) - len(admitted)

    async def _quarantine(self, queue: str, delivery: Delivery, found: Malformed) -> None:
        where = f"queue {queue!r}: SQS message {delivery.message_id}"
        await toolkit.quarantine(
            log,
            where,
            found,
            "its failed queue",
            self._failed.record_malformed(found, queue=queue, source=delivery.message_id),
        )
        await self._connection.call(
            "delete_message",
            "delete a message that is not a job",
            QueueUrl=delivery.url,
            ReceiptHandle=delivery.receipt,
        )

    async def _hide(self, url: str, hide: list[tuple[dict[str, Any], int]]) -> None:
        """Hide messages whose carried delay has not run out, until it has; show again at
        once (0 s) those of their groups that came after them."""
        entries = [
            {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"], "VisibilityTimeout": seconds}
            for i, (m, seconds) in enumerate(hide)
        ]
        await self._connection.call(
            "change_message_visibility_batch",
            "hold back delayed jobs until they are due",
            QueueUrl=url,
            Entries=entries,
        )

    async def give_back_lapsed(self) -> None:
        """Make this process's lapsed deliveries that SQS still hides visible again."""
        back = self._ledger.returnable()
        for url in {d.url for d in back}:
            mine = [d for d in back if d.url == url]
            for start in range(0, len(mine), MOST):
                entries = [
                    {"Id": str(i), "ReceiptHandle": d.receipt, "VisibilityTimeout": 0}
                    for i, d in enumerate(mine[start : start + MOST])
                ]
                with contextlib.suppress(Exception):  # SQS's own timeout brings them back
                    await self._connection.call(
                        "change_message_visibility_batch",
                        "hand back lapsed deliveries",
                        QueueUrl=url,
                        Entries=entries,
                    )

    async def settle_polls(self) -> list[Reservation]:
        """Wait for long polls under way; everything received and not handed out."""
        if self._polls:
            await asyncio.gather(*list(self._polls), return_exceptions=True)
        await self._mover.settle()
        await asyncio.sleep(0)  # let the polls' callbacks keep what they received
        left = [r for kept in self._leftovers.values() for r in kept]
        self._leftovers.clear()
        return left + self.gate.let_go()


__all__ = ["Receiver"]
