# SPDX-License-Identifier: MIT
"""The counter for the asyncio systems (ours, SAQ, taskiq, PgQueuer, Procrastinate): one INCR.

Every benchmark job does one thing: `INCR` a Redis counter, so that the
harness can check that exactly N jobs ran. The counter is an instrument,
and it should cost about the same in every system. The synchronous peers
count with redis-py's blocking client, about 25 µs of CPU per INCR here.
redis-py's asyncio client costs about 90 µs per command on this machine
(redis-py 8: a task, two timeouts and metrics hooks per call), which is
more than some queues spend on a whole job; with it, the benchmark measured
the counter's client more than the queues it runs in.

So the asyncio systems count through this: one connection per process and
event loop, INCRs pipelined on it, replies matched in order (Redis answers
a connection's commands in the order they came). Stdlib only, so it loads
in both venvs. It is not a Redis client: INCR, and nothing else.
"""

from __future__ import annotations

import asyncio
import collections
import os
import weakref
from typing import cast
from urllib.parse import urlsplit

from ._common import REDIS_URL, SLEEP_ENV, counter_key

_SLEEP_S = float(os.environ.get(SLEEP_ENV) or 0) / 1000
"""The I/O-bound workload's wait per job (a call to a slow service), before the INCR."""


class _Counter(asyncio.Protocol):
    """One connection: INCRs go out as they come, replies settle their futures in order."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.waiting: collections.deque[asyncio.Future[int]] = collections.deque()
        self.buffer = b""
        self.lost: BaseException | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports do not subclass asyncio's; they have the same methods.
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while (end := self.buffer.find(b"\r\n")) >= 0:
            line, self.buffer = self.buffer[:end], self.buffer[end + 2 :]
            future = self.waiting.popleft()
            if future.done():
                continue
            if line[:1] in (b":", b"+"):
                future.set_result(int(line[1:]) if line[:1] == b":" else 0)
            else:
                future.set_exception(RuntimeError(f"redis said {line.decode(errors='replace')}"))

    def connection_lost(self, exc: BaseException | None) -> None:
        self.lost = exc or ConnectionError("the counter's Redis connection closed")
        while self.waiting:
            future = self.waiting.popleft()
            if not future.done():
                future.set_exception(self.lost)

    def send(self, command: bytes) -> asyncio.Future[int]:
        assert self.transport is not None
        future = asyncio.get_running_loop().create_future()
        self.waiting.append(future)
        self.transport.write(command)
        return future


def _command(*parts: str) -> bytes:
    out = [f"*{len(parts)}\r\n".encode()]
    for part in parts:
        data = part.encode()
        out.append(b"$%d\r\n%s\r\n" % (len(data), data))
    return b"".join(out)


_connections: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Future[_Counter]] = (
    weakref.WeakKeyDictionary()
)
_incr: bytes | None = None


async def _connect() -> _Counter:
    url = urlsplit(REDIS_URL)
    loop = asyncio.get_running_loop()
    _, counter = await loop.create_connection(
        _Counter, url.hostname or "127.0.0.1", url.port or 6379
    )
    database = (url.path or "/0").strip("/") or "0"
    if database != "0":
        await counter.send(_command("SELECT", database))
    return counter


async def incr_counter() -> int:
    """INCR the run's counter (after the I/O-bound workload's sleep, if any); the new count."""
    global _incr
    if _SLEEP_S:
        await asyncio.sleep(_SLEEP_S)
    loop = asyncio.get_running_loop()
    connecting = _connections.get(loop)
    if connecting is None or (connecting.done() and _broken(connecting)):
        connecting = _connections[loop] = asyncio.ensure_future(_connect())
    counter = await connecting
    if _incr is None:
        _incr = _command("INCR", counter_key())
    return await counter.send(_incr)


def _broken(connecting: asyncio.Future[_Counter]) -> bool:
    return connecting.exception() is not None or connecting.result().lost is not None
