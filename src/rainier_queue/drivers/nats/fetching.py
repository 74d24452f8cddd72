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
- `wait(seconds, n)`: `no_wait` with `expires`, for an idle worker
  (`wait_and_reserve`). The server holds it up to `seconds` until a message
  comes, then answers as `take(n)` does. Whatever comes after the caller
  stopped waiting is kept, stamped, for the next call.

The server forgets a pull request whose connection drops, and nats-py
reconnects on its own: a request out at the drop would never be answered,
and waiting on for it would let the outage pass as an empty queue. So the
connection counts its drops and wakes every fetcher at one, and a request
that ends with nothing after a drop is `BrokerUnavailable`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections import deque
from dataclasses import dataclass

from nats.aio.msg import Msg
from nats.aio.subscription import Subscription

from .connection import API_TIMEOUT, NATSConnection, translated

GRACE = 2.0
"""Seconds past a waiting request's expiry before it is given up without its status."""
EARLY = 0.1
"""Seconds before its expiry that a waiting request ending with nothing is asked again."""


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
        connection.wake_on_drop(self._news.set)

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
            since = self._connection.drops
            name = await self._ask({"batch": limit, "no_wait": True})
            deadline = time.monotonic() + API_TIMEOUT
            while len(self._arrivals) < limit and name not in self._ended:
                if self._connection.drops != since:
                    break
                left = deadline - time.monotonic()
                if left <= 0:
                    if self._arrivals:
                        break
                    raise NoAnswer(self._api)
                self._news.clear()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(left):  # not wait_for: it can swallow a cancel
                        await self._news.wait()
            self._ended.discard(name)
            if not self._arrivals:
                self._connection.require_unbroken(since, "ask a consumer for jobs")
            return self._taken(limit)

    async def wait(self, seconds: float, limit: int = 1) -> list[Arrival]:
        """Up to `limit` messages, waiting up to `seconds` on the server for the first ([] if
        none came).

        One request, `no_wait` with `expires`: the server holds it until a message
        comes, then hands out what it has, up to `limit`, and ends it at once (a
        408). So a worker woken by one push takes the jobs behind it in the same
        round trip, and no request stays open to hand this process jobs later,
        whose leases would run while no slot waits for them.
        """
        async with self._lock:
            out = self._taken(limit)
            if out:
                return out
            began = time.monotonic()
            since = self._connection.drops
            request: dict[str, object] = {"batch": limit, "expires": int(seconds * 1e9)}
            name = await self._ask({**request, "no_wait": True})
            await self._until_over(name, limit, began + seconds + GRACE, since)
            if not self._arrivals:
                self._connection.require_unbroken(since, "wait for jobs")
            left = began + seconds - time.monotonic()
            if not self._arrivals and left > EARLY:
                # Ended with nothing long before its expiry (the server refuses a `no_wait`
                # request while others wait for the messages it has): wait the rest of the
                # time in a plain request, which the server keeps.
                request = {"batch": 1, "expires": int(left * 1e9)}
                name = await self._ask(request)
                await self._until_over(name, 1, time.monotonic() + left + GRACE, since)
            if not self._arrivals:
                # A wait the connection dropped under ends with nothing: said as an outage,
                # so the worker backs off instead of asking again at once.
                self._connection.require_connected("wait for jobs")
                self._connection.require_unbroken(since, "wait for jobs")
            return self._taken(limit)

    async def _until_over(self, name: str, limit: int, deadline: float, since: int) -> None:
        """Until request `name` ended (its status came), `limit` messages came, `deadline`,
        or the connection dropped (after `drops` read `since`), which ends every request."""
        while len(self._arrivals) < limit and name not in self._ended:
            if self._connection.drops != since:
                break
            left = deadline - time.monotonic()
            if left <= 0:
                break
            self._news.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(left):  # not wait_for: it can swallow a cancel
                    await self._news.wait()
        self._ended.discard(name)

    def leftovers(self) -> list[Arrival]:
        """Messages that arrived for nobody (after their request was given up)."""
        return self._taken(len(self._arrivals))

    async def aclose(self) -> None:
        self._connection.wake_on_drop(self._news.set, stop=True)
        sub, self._sub = self._sub, None
        if sub is not None:
            try:
                await sub.unsubscribe()
            except Exception:  # closing must not fail because the connection is gone
                return


__all__ = ["Arrival", "Fetcher", "NoAnswer"]
