# SPDX-License-Identifier: MIT
"""An idle worker's wait with its reserve queued right behind it, on one connection.

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
connection of the pool is held for the length of each wait.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

from redis import exceptions as rx
from redis.asyncio import Redis
from redis.asyncio.connection import AbstractConnection

from .connection import translated

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
    client: Redis, wake: str, seconds: float, command: Sequence[Any], *, what: str
) -> tuple[Any, float]:
    """BLPOP `wake` for up to `seconds`, then `command`; the command's reply, and the
    seconds its answer may have been on its way (to date what the command did).

    An error reply of the command is returned, not raised (a missing script
    is the caller's to load). If cancelled, raises `Abandoned` with the
    command's reply once the wait has been cut short and read to its end.
    """
    pool = client.connection_pool
    async with translated(what):
        conn: AbstractConnection = await pool.get_connection()  # type: ignore[no-untyped-call]
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
        await pool.release(conn)


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


__all__ = ["Abandoned", "behind_blpop"]
