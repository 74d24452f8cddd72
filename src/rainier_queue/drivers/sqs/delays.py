# SPDX-License-Identifier: MIT
"""A FIFO queue's delayed jobs wait in a standard queue beside it, and are moved over when due.

SQS refuses `DelaySeconds` on a message of a FIFO queue. A delayed job sent
there with its delay carried (an attribute, hidden by the first worker to
receive it early) would wait *in flight*, which `size` and `counts` then show
as running, not delayed. So a delayed job without an ordering key on a FIFO
queue goes to the queue's delay queue (names.py: `app-emails-delay` beside
`app-emails.fifo`), a standard queue, with `DelaySeconds` (a delay past
15 minutes carried there as on any standard queue). SQS counts it delayed.

Workers move what is due: an idle worker long-polls the delay queue beside
its own long poll, a busy one looks once a second at most (`EVERY`). A move
is a send to the FIFO queue, then a delete from the delay queue, in that
order: a worker that dies between the two leaves the message in the delay
queue, which shows it again after `MOVE_LEASE` and is moved again under the
same deduplication id (the message's `rq-dedup`: the job id for a push, so
a push repeated after `OutcomeUnknown` is one job too; the job id and the
reservation's token for a retry), which SQS drops as a repeat within its
5 minutes. The other order would lose the job in that window.

A job *with* an ordering key is never sent here: moved over when due it
would join the back of its key's message group, behind jobs of its key
dispatched after it. It is carried in its group instead (messages.py), which
holds the key's later jobs until it has run: the order the key asks for.

What it costs: a second SQS queue per queue, a long poll more for an idle
worker, a receive a second for a busy one (only on a FIFO connection), and
two requests more per delayed job (its move's send and delete, shared by
up to ten).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any

from ...envelope.reading import Malformed, read_envelope
from ...errors import BrokerError, NotProvisioned
from .connection import SQSConnection, server_time
from .failed import FailedStore
from .messages import DEDUP_ATTRIBUTE, SYSTEM_ATTRIBUTES, fifo_id, group_of, received
from .provisioning import Queues

log = logging.getLogger("rainier_queue.sqs")

MOVE_LEASE = 30
"""Seconds a receive of the delay queue hides what it got: a mover that died comes back
well within SQS's 5 minutes of deduplication, so its second move is no second job."""
EVERY = 1.0
"""Seconds between a busy worker's looks at a delay queue (an idle one long-polls it)."""
MOST = 10


class DelayMover:
    """Moves due jobs from each FIFO queue's delay queue into it, for one queue object."""

    def __init__(self, connection: SQSConnection, queues: Queues, failed: FailedStore) -> None:
        self._connection = connection
        self._queues = queues
        self._failed = failed
        self._looked: dict[str, float] = {}
        self._polls: dict[str, asyncio.Future[int]] = {}
        self._missing: set[str] = set()
        """Queues whose delay queue was found missing (said once)."""

    def has_delays(self, queue: str) -> bool:
        """Whether `queue` has a delay queue (a FIFO connection, no explicit URL)."""
        return self._queues.names.delay(queue) is not None

    async def look(self, queue: str, limit: int = MOST) -> None:
        """A busy worker's look: receives of the delay queue until `limit` jobs are moved or
        one finds fewer than ten due, then none for `EVERY` s, nor while a long poll of it
        is under way. (A look that moves a full ten looks again at once: a backlog of due
        jobs moves as fast as the worker takes them.)"""
        if not self.has_delays(queue) or queue in self._polls:
            return
        if time.monotonic() - self._looked.get(queue, 0.0) < EVERY:
            return
        moved = 0
        while moved < limit:
            got = await self.move(queue, 0)
            moved += got
            if got < MOST:
                self._looked[queue] = time.monotonic()
                return

    def poll(self, queue: str, seconds: int) -> asyncio.Future[int] | None:
        """An idle worker's long poll of the delay queue, as a task of its own (one at a time
        per queue): it moves what falls due, which the long poll of the FIFO queue beside it
        then receives. Left to finish when the caller stops waiting; `settle` awaits it."""
        if not self.has_delays(queue):
            return None
        running = self._polls.get(queue)
        if running is not None:
            return running
        task = asyncio.ensure_future(self.move(queue, seconds))
        self._polls[queue] = task
        self._looked[queue] = time.monotonic()

        def done(finished: asyncio.Future[int]) -> None:
            self._polls.pop(queue, None)
            if not finished.cancelled() and finished.exception() is not None:
                log.warning("moving due jobs of queue %r failed: %s", queue, finished.exception())

        task.add_done_callback(done)
        return task

    async def settle(self) -> None:
        """Wait for the long polls under way (at most the connection's `wait`)."""
        if self._polls:
            await asyncio.gather(*list(self._polls.values()), return_exceptions=True)

    async def move(self, queue: str, wait: int) -> int:
        """Receive the delay queue's due messages (waiting up to `wait` s for one) and move
        them to the FIFO queue: the sends first, then the deletes. The number moved."""
        try:
            url = await self._queues.delay_url(queue)
        except NotProvisioned as exc:
            # Provisioned before delay queues: no delayed job can be in one, and pushing one
            # says what to run. The worker goes on with the queue's other jobs.
            if queue not in self._missing:
                self._missing.add(queue)
                log.warning("queue %r has no delay queue yet: %s", queue, exc)
            return 0
        if url is None:
            return 0
        answer = await self._connection.call(
            "receive_message",
            f"receive the due jobs of queue {queue!r}",
            QueueUrl=url,
            MaxNumberOfMessages=MOST,
            VisibilityTimeout=MOVE_LEASE,
            WaitTimeSeconds=max(0, wait),
            MessageSystemAttributeNames=SYSTEM_ATTRIBUTES,
            MessageAttributeNames=["All"],
        )
        messages = answer.get("Messages", [])
        if not messages:
            return 0
        now = server_time(answer)
        hide: list[dict[str, Any]] = []
        due: list[dict[str, Any]] = []
        for i, message in enumerate(messages):
            seen = received(message, now)
            if seen.hide_for:
                hide.append(
                    {
                        "Id": str(i),
                        "ReceiptHandle": message["ReceiptHandle"],
                        "VisibilityTimeout": seen.hide_for,
                    }
                )
                continue
            body = str(message.get("Body", ""))
            found = read_envelope(body, field="body", queue=queue, delivered=1)
            if isinstance(found, Malformed):
                await self._quarantine(queue, url, message, found)
                continue
            carried = message.get("MessageAttributes", {}).get(DEDUP_ATTRIBUTE, {})
            dedup = str(carried.get("StringValue") or found.id)
            due.append(
                {
                    "Id": str(i),
                    "MessageBody": body,
                    "MessageGroupId": group_of(found),
                    "MessageDeduplicationId": fifo_id(dedup),
                    "_receipt": message["ReceiptHandle"],
                }
            )
        if hide:
            await self._connection.call(
                "change_message_visibility_batch",
                f"hold back delayed jobs of queue {queue!r} until they are due",
                QueueUrl=url,
                Entries=hide,
            )
        if not due:
            return 0
        sent = await self._send(queue, due)
        if sent:
            await self._connection.call(
                "delete_message_batch",
                f"remove moved jobs from the delay queue of {queue!r}",
                QueueUrl=url,
                Entries=[{"Id": e["Id"], "ReceiptHandle": e["_receipt"]} for e in sent],
            )
        return len(sent)

    async def _send(self, queue: str, due: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Send the due jobs to the FIFO queue; those SQS took (the rest come back to the
        delay queue after `MOVE_LEASE` and are moved then)."""
        work = await self._queues.url(queue)
        limit = self._connection.settings.max_message_size
        size = sum(len(e["MessageBody"].encode("utf-8", "surrogatepass")) for e in due)
        batches = [due] if size <= limit else [[e] for e in due]
        sent: list[dict[str, Any]] = []
        for batch in batches:
            try:
                answer = await self._connection.call(
                    "send_message_batch",
                    f"move {len(batch)} due jobs to queue {queue!r}",
                    write=True,
                    QueueUrl=work,
                    Entries=[{k: v for k, v in e.items() if k != "_receipt"} for e in batch],
                )
            except BrokerError as exc:
                log.warning("could not move due jobs to queue %r (moved later): %s", queue, exc)
                continue
            refused = {str(f["Id"]) for f in answer.get("Failed", [])}
            sent += [e for e in batch if e["Id"] not in refused]
        return sent

    async def _quarantine(
        self, queue: str, url: str, message: dict[str, Any], found: Malformed
    ) -> None:
        source = str(message.get("MessageId", ""))
        log.warning("queue %r: delay queue message %s is not a job: %s", queue, source, found.error)
        await self._failed.record_malformed(found, queue=queue, source=source)
        with contextlib.suppress(BrokerError):
            await self._connection.call(
                "delete_message",
                "delete a delayed message that is not a job",
                QueueUrl=url,
                ReceiptHandle=message["ReceiptHandle"],
            )


__all__ = ["EVERY", "MOVE_LEASE", "DelayMover"]
