# SPDX-License-Identifier: MIT
"""How an idle worker waits for work on Redis, and the reserve queued right behind its wait.

Why: an idle worker hears of a push through a BLPOP on the wake-up list,
and then has to run the reserve script before it holds the job. That is a
second round trip, and a second wake-up of a sleeping process, between a
push and the job's start. Sent together on one connection, the reserve
waits in Redis's input buffer and runs the moment the BLPOP returns, and
both answers come back together.

What it costs: the reserve runs however the wait ends, so a wait the
worker gives up on must still be read to its end. `behind_blpop` does
that when cancelled: it asks Redis to end the BLPOP at once (`CLIENT
UNBLOCK`, sent on another connection), reads what the reserve took, and
returns it through `Abandoned` so the caller can hand the jobs back. One
connection of the pool is held for the length of each wait, and kept for
the next (`KeptConnection`): handing it back to redis-py's pool, which takes
its lock and keeps its books, came between the job's arrival and its start.

`RedisWaiter` is the part of `RedisQueue` that waits: how long a wait may
last, the plain BLPOP (`wait`) and the one with the reserve behind it
(`reserve_behind`).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import Awaitable, Callable, Sequence
from datetime import timedelta
from typing import Any, cast

from redis import exceptions as rx
from redis.asyncio import Redis
from redis.asyncio.connection import AbstractConnection

from ..._clock import utcnow
from ...queue import Reservation
from . import scripts
from .connection import Calls, socket_timeout, translated
from .kept import KeptConnection
from .keys import Keys
from .reserving import RedisReserver

SLACK = 2.0
"""Seconds a read waits beyond the BLPOP's own timeout before the connection is given up."""


class Abandoned(Exception):
    """A wait was cancelled after its reserve may have run; `reply` is what the reserve said."""

    def __init__(self, reply: Any) -> None:
        super().__init__("the wait was cancelled")
        self.reply = reply


class _Exchange:
    """The replies of one wait, read in order from the connection that sent it."""

    def __init__(self, conn: AbstractConnection) -> None:
        self.conn = conn
        self.client_id: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self.round_trip = 0.0
        """Seconds from sending to the first answer: at least the answer's own transit."""

    async def run(self, wake: str, seconds: float, command: Sequence[Any]) -> Any:
        conn = self.conn
        await conn.send_packed_command(
            conn.pack_commands([("CLIENT", "ID"), ("BLPOP", wake, seconds), command])
        )
        sent = time.monotonic()
        self.client_id.set_result(int(await conn.read_response()))
        self.round_trip = time.monotonic() - sent
        await conn.read_response(timeout=seconds + max(SLACK, conn.socket_timeout or 0))
        try:
            return await conn.read_response()
        except rx.ResponseError as exc:  # NOSCRIPT, say: the command's own error, as its reply
            return exc


async def behind_blpop(
    client: Redis,
    wake: str,
    seconds: float,
    command: Sequence[Any],
    *,
    what: str,
    kept: KeptConnection,
) -> tuple[Any, float]:
    """BLPOP `wake` for up to `seconds`, then `command`; the command's reply, and the
    seconds its answer may have been on its way (to date what the command did).

    An error reply of the command is returned, not raised (a missing script
    is the caller's to load). If cancelled, raises `Abandoned` with the
    command's reply once the wait has been cut short and read to its end.
    The connection comes from `kept` and, read to its end, goes back there
    rather than to the pool.
    """
    pool = client.connection_pool
    async with translated(what):
        conn = await kept.take(pool)
    exchange = _Exchange(conn)
    reading = asyncio.ensure_future(exchange.run(wake, seconds, command))
    clean = False
    try:
        async with translated(what):
            reply = await asyncio.shield(reading)
        clean = True
        return reply, exchange.round_trip
    except asyncio.CancelledError:
        reply = await _cut_short(client, exchange, reading)
        clean = reading.done() and not reading.cancelled() and reading.exception() is None
        raise Abandoned(reply) from None
    finally:
        if not clean:
            reading.cancel()
            await conn.disconnect(nowait=True)  # replies may still be on their way
        await kept.put_back(pool, conn, clean=clean)


async def _cut_short(client: Redis, exchange: _Exchange, reading: asyncio.Future[Any]) -> Any:
    """End the BLPOP now and read the command's reply (None if it cannot be had)."""
    try:
        await asyncio.wait(
            {exchange.client_id, reading}, timeout=SLACK, return_when=asyncio.FIRST_COMPLETED
        )
        if not reading.done() and exchange.client_id.done():
            await client.client_unblock(exchange.client_id.result())
        return await asyncio.wait_for(asyncio.shield(reading), SLACK)
    except Exception:
        # Redis is unreachable or slow: dropping the connection drops the
        # reserve if it has not run yet; if it ran, its jobs come back when
        # their leases lapse.
        return None


def _retrieve(task: asyncio.Task[None]) -> None:
    """Mark a background wait's failure as seen; the next wait reports the outage itself."""
    if not task.cancelled():
        task.exception()


class RedisWaiter:
    """How one `RedisQueue` waits for work: a part of the queue, on its client and keys."""

    def __init__(
        self,
        calls: Calls,
        keys: Keys,
        *,
        lease: timedelta,
        cluster: bool,
        reserver: RedisReserver,
        hand_back: Callable[[Sequence[Reservation]], Awaitable[None]],
    ) -> None:
        self._calls = calls
        self._ready = calls.ready
        self.keys = keys
        self._lease = lease
        self._cluster = cluster
        self._reserver = reserver
        self._hand_back = hand_back
        """The queue's `hand_back_unstarted`, for what a cancelled wait's reserve took."""
        self._blocking: asyncio.Task[None] | None = None
        self._read_timeout: float | None = None
        """The client's read timeout (`connection.socket_timeout`), once known."""
        self.kept = KeptConnection()
        """The connection each wait is sent on, kept from one wait to the next."""

    @property
    def reserves_behind_wait(self) -> bool:
        """Off-cluster only: on a cluster the wake-up list lives on another slot than the queue."""
        return not self._cluster and isinstance(self._calls.client, Redis)

    async def reserve_behind(
        self, queue: str, seconds: float, limit: int
    ) -> list[Reservation] | None:
        """The reserve script sent right behind a BLPOP of `seconds`, on one connection.

        None when the script was not loaded (a restarted Redis?): the caller
        reserves the plain way. Cancelled, it hands back what the reserve took
        before the cancellation goes on.
        """
        client = self._calls.client
        assert isinstance(client, Redis), "reserves_behind_wait says when this is used"
        await self._reserver.health.check_now_and_then()
        call = self._reserver.call(queue, limit)
        keys, args, _ = call
        script = self._calls.script(scripts.RESERVE)
        command = ("EVALSHA", script.sha, len(keys.reserve_keys), *keys.reserve_keys, *args)
        what = f"wait for work on {queue!r}"
        try:
            rows, in_transit = await behind_blpop(
                client, self.keys.wake, seconds, command, what=what, kept=self.kept
            )
        except Abandoned as gone:
            if isinstance(gone.reply, list):
                taken, _ = await self._reserver.read(queue, call, gone.reply, utcnow())
                await self._hand_back(taken)
            raise asyncio.CancelledError from None
        if isinstance(rows, Exception):
            return None
        now = utcnow() - timedelta(seconds=in_transit)
        first = await self._reserver.read(queue, call, rows, now)
        return await self._reserver.top_up(queue, limit, first)

    async def wait(self, queues: Sequence[str], timeout: timedelta) -> None:
        """`Queue.wait_for_work`: a BLPOP on the wake-up list, joined by the next wait."""
        seconds = await self.seconds(queues, timeout)
        if seconds <= 0.001:
            return
        blocking = self._blocking
        if blocking is None or blocking.done():
            blocking = self._blocking = asyncio.create_task(self._block(seconds))
            blocking.add_done_callback(_retrieve)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(blocking), seconds)

    async def seconds(self, queues: Sequence[str], timeout: timedelta) -> float:
        """How long an idle worker may wait: `timeout`, or less when a delayed job falls
        due sooner, or when a lease is held that may lapse (a quarter lease)."""
        seconds = timeout.total_seconds()
        client = await self._ready()
        pipe = client.pipeline(transaction=False)
        for name in queues:
            keys = self.keys.queue(name)
            pipe.zrange(keys.delayed, 0, 0, withscores=True)
            pipe.hlen(keys.leases)
        if not self._cluster:
            pipe.time()  # due times are on the server's clock
        async with translated("look for due work"):
            answers = await pipe.execute()
            # A cluster pipeline cannot carry TIME (it names no key); any node's
            # clock will do to decide how long to wait.
            seconds_now, micros_now = answers.pop() if not self._cluster else await client.time()
        now_ms = seconds_now * 1000 + micros_now / 1000
        for i in range(0, len(answers), 2):
            soonest = cast(list[tuple[str, float]], answers[i])
            if soonest:
                seconds = min(seconds, (soonest[0][1] - now_ms) / 1000)
            if answers[i + 1]:  # someone holds a lease that may lapse
                seconds = min(seconds, self._lease.total_seconds() / 4)
        return seconds

    async def _block(self, seconds: float) -> None:
        """One BLPOP on the wake-up list, as a task of its own.

        The worker stops waiting whenever one of its jobs finishes. Cancelling
        a BLPOP mid-reply makes redis-py drop the connection (and open a new
        one next time), so the BLPOP is left to finish on its own and the
        next wait joins it if it is still running.
        """
        client = await self._ready()
        if self._read_timeout is None:
            self._read_timeout = socket_timeout(client)
        seconds = within_read_timeout(seconds, self._read_timeout)
        async with translated("wait for work"):
            await cast(Awaitable[Any], client.blpop([self.keys.wake], timeout=seconds))

    async def aclose(self) -> None:
        """End a BLPOP still running, and give the kept connection back."""
        if self._blocking is not None:
            self._blocking.cancel()
            await asyncio.gather(self._blocking, return_exceptions=True)
        client = self._calls.client
        if isinstance(client, Redis):
            await self.kept.give_back(client.connection_pool)


def within_read_timeout(seconds: float, read_timeout: float) -> float:
    """A BLPOP's `seconds`, cut so that its answer comes back inside the client's read timeout.

    redis-py reads a BLPOP's answer under the same timeout as any other command
    (5 s by default since redis-py 8), so a longer BLPOP would end as a timeout
    and be reported as an outage. A wait cut short just returns early: the
    worker looks for work and waits again, one round trip every few seconds.
    """
    if math.isinf(read_timeout):
        return seconds
    return min(seconds, max(read_timeout - min(SLACK, read_timeout / 2), 0.01))


__all__ = ["Abandoned", "RedisWaiter", "behind_blpop"]
