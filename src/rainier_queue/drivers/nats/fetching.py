# SPDX-License-Identifier: MIT
"""Pull requests to one durable consumer, and the moment each message arrived.

A driver that fences its own leases must know when the server started each
delivery's ack timer, and nats-py's `fetch` does not say: a message that
arrives after its fetch was abandoned (a worker's wait cancelled at
shutdown) waits in the subscription's queue and comes out of a later fetch
looking fresh, when its timer may have nearly run out. So pull requests are
made here, on one inbox subscription per consumer, and every message is
stamped with the monotonic time it arrived, in the subscription's callback.
A message's lease runs from that stamp, which is no earlier than the
server's delivery; the ledger's margin (drivers/fencing.py) covers the time
on the wire.

Two kinds of request, one at a time per consumer and process:

- `take(n)`: `no_wait`, for `reserve`. The server answers at once with up
  to `n` messages, then a status (404 none, 408 fewer than asked) unless it
  sent all `n`.
- `wait(seconds)`: one message, waiting up to `seconds` on the server, for
  an idle worker (`wait_and_reserve`). Whatever comes after the caller
  stopped waiting is kept, stamped, for the next call.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import deque
from dataclasses import dataclass

from nats.aio.msg import Msg
from nats.aio.subscription import Subscription

from .connection import API_TIMEOUT, NATSConnection, translated

GRACE = 2.0
"""Seconds past a waiting request's expiry before it is given up without its status."""


class NoAnswer(Exception):
    """A `no_wait` request got neither messages nor a status: the consumer may be gone."""


@dataclass(slots=True)
class Arrival:
    msg: Msg
    at: float
    """`time.monotonic()` when it arrived: its lease runs from here."""


class Fetcher:
    """Pull requests to `consumer` on `stream`, with every message's arrival stamped."""

    def __init__(self, connection: NATSConnection, stream: str, consumer: str) -> None:
        self._connection = connection
        self._api = f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{consumer}"
        self._inbox = ""
        self._sub: Subscription | None = None
        self._arrivals: deque[Arrival] = deque()
        self._ended: set[str] = set()
        self._news = asyncio.Event()
        self._lock = asyncio.Lock()
        self._count = 0

    async def _subscribed(self) -> None:
        if self._sub is not None:
            return
        client = await self._connection.client()
        self._inbox = client.new_inbox()
        async with translated("subscribe to a consumer's deliveries"):
            self._sub = await client.subscribe(f"{self._inbox}.*", cb=self._arrived)

    async def _arrived(self, msg: Msg) -> None:
        if msg.subject.startswith(self._inbox):  # a status: the request it names is over
            if len(self._ended) > 1000:  # names of requests given up, never read
                self._ended.clear()
            self._ended.add(msg.subject.rsplit(".", 1)[-1])
        else:
            self._arrivals.append(Arrival(msg, time.monotonic()))
        self._news.set()

    def _taken(self, limit: int) -> list[Arrival]:
        out: list[Arrival] = []
        while self._arrivals and len(out) < limit:
            out.append(self._arrivals.popleft())
        return out

    async def _ask(self, request: dict[str, object]) -> str:
        await self._subscribed()
        self._count += 1
        name = str(self._count)
        client = await self._connection.client()
        self._connection.require_connected("ask a consumer for jobs")
        async with translated("ask a consumer for jobs"):
            await client.publish(
                self._api, json.dumps(request).encode(), reply=f"{self._inbox}.{name}"
            )
        return name

    async def take(self, limit: int) -> list[Arrival]:
        """Up to `limit` messages, without waiting for any that are not there yet."""
        async with self._lock:
            out = self._taken(limit)
            if out:
                return out
            name = await self._ask({"batch": limit, "no_wait": True})
            deadline = time.monotonic() + API_TIMEOUT
            while len(self._arrivals) < limit and name not in self._ended:
                left = deadline - time.monotonic()
                if left <= 0:
                    if self._arrivals:
                        break
                    raise NoAnswer(self._api)
                self._news.clear()
                try:
                    await asyncio.wait_for(self._news.wait(), left)
                except TimeoutError:
                    continue
            self._ended.discard(name)
            return self._taken(limit)

    async def wait(self, seconds: float) -> list[Arrival]:
        """One message, waiting up to `seconds` for it on the server ([] if none came)."""
        async with self._lock:
            out = self._taken(1)
            if out:
                return out
            name = await self._ask({"batch": 1, "expires": int(seconds * 1e9)})
            deadline = time.monotonic() + seconds + GRACE
            while not self._arrivals and name not in self._ended:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._news.clear()
                try:
                    await asyncio.wait_for(self._news.wait(), left)
                except TimeoutError:
                    continue
            self._ended.discard(name)
            if not self._arrivals:
                # A wait the connection dropped under ends with nothing: said as an outage,
                # so the worker backs off instead of asking again at once.
                self._connection.require_connected("wait for jobs")
            return self._taken(1)

    def put_back(self, arrivals: list[Arrival]) -> None:
        """Keep messages taken by a call that was cancelled before it handed them out.

        They go back in front, with their arrival stamps (their leases still run),
        for the next call: dropped, each would wait out its ack wait unseen and
        come back counted as one more delivery, an attempt no handler ran.
        """
        self._arrivals.extendleft(reversed(arrivals))
        if arrivals:
            self._news.set()

    def leftovers(self) -> list[Arrival]:
        """Messages that arrived for nobody (after their request was given up)."""
        return self._taken(len(self._arrivals))

    async def aclose(self) -> None:
        sub, self._sub = self._sub, None
        if sub is not None:
            try:
                await sub.unsubscribe()
            except Exception:  # closing must not fail because the connection is gone
                return


__all__ = ["Arrival", "Fetcher", "NoAnswer"]
