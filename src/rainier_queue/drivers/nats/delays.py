# SPDX-License-Identifier: MIT
"""Delayed dispatch on NATS 2.9, which has no scheduled messages: a subject that holds them.

A job pushed with a delay is published to its queue's delayed subject
(`<prefix>.delayed.<token>`), with its due moment, in microseconds since the
epoch, in the `Rq-Due` header. Every worker serving the queue runs a mover on
that subject's consumer (`d-<token>`): it takes what the server hands it and

- moves a job that is due onto the queue's jobs subject (its `Nats-Msg-Id`
  the job and the delayed message's sequence, so a mover that dies between
  the publish and the ack does not queue it twice within the duplicate
  window), then acknowledges the delayed message, which deletes it;
- hands back one that is not due with `-NAK {"delay": remaining}`, so the
  server brings it back when it is, and no worker polls for it.

Precision: the server's redelivery timer plus one publish, a few
milliseconds here, as long as some worker serves the queue; due by the
moving worker's clock (`due_on_server_clock` is False). Cost: each delayed
job is stored twice (on the delayed subject, then on the jobs subject), and
is a pending delivery of the delay consumer while it waits, which is why
that consumer has no cap on deliveries in flight. With no worker running,
delayed jobs wait on their subject, counted as delayed by `counts`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from datetime import timedelta

from ..._clock import utcnow
from .connection import NATSConnection, translated
from .fetching import Arrival, Fetcher
from .leases import ACK, nak

log = logging.getLogger("rainier_queue.nats")

DUE = "Rq-Due"
"""The header holding a delayed job's due moment (microseconds since the epoch)."""
WAIT = 5.0
BATCH = 256
SETTLE_TIMEOUT = 5.0


def due_micros(arrival: Arrival) -> int | None:
    headers = arrival.msg.headers or {}
    try:
        return int(headers[DUE])
    except (KeyError, ValueError):
        return None


class DelayMover:
    """Moves one queue's delayed jobs onto its jobs subject when they fall due."""

    def __init__(self, connection: NATSConnection, fetcher: Fetcher, jobs_subject: str) -> None:
        self._connection = connection
        self._fetcher = fetcher
        self._jobs = jobs_subject

    async def run(self) -> None:
        while True:
            try:
                got = await self._fetcher.wait(WAIT, BATCH)
                for arrival in got:
                    await self._move(arrival)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # an outage: the next round tries again
                log.warning("could not move delayed jobs to %r: %s", self._jobs, exc)
                await asyncio.sleep(1.0)

    async def once(self) -> None:
        """One pass over what the server hands out now, without waiting; best effort."""
        try:
            for arrival in await self._fetcher.take(BATCH):
                await self._move(arrival)
        except Exception as exc:
            log.warning("could not move delayed jobs to %r: %s", self._jobs, exc)

    async def _move(self, arrival: Arrival) -> None:
        msg = arrival.msg
        due = due_micros(arrival)
        now = int(utcnow().timestamp() * 1_000_000)
        client = await self._connection.client()
        if due is not None and due > now:
            async with translated("hold back a delayed job"):
                await client.publish(msg.reply, nak(timedelta(microseconds=due - now)))
            return
        seq = msg.metadata.sequence.stream
        headers = {k: v for k, v in (msg.headers or {}).items() if k != DUE}
        headers["Nats-Msg-Id"] = f"{headers.get('Nats-Msg-Id', '')}:due:{seq}"
        await self._connection.publish(self._jobs, msg.data, headers)
        if time.monotonic() - arrival.at < 25.0:  # well inside the delay consumer's ack wait
            async with translated("acknowledge a moved delayed job"):
                await client.request(msg.reply, ACK, timeout=SETTLE_TIMEOUT)


__all__ = ["DUE", "DelayMover", "due_micros"]
