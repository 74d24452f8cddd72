# SPDX-License-Identifier: MIT
"""Hearing about new work on PostgreSQL: one `LISTEN` connection, many waiters.

An idle worker should start a job within milliseconds of its push, not at
its next poll, and PostgreSQL can tell it: a push runs `pg_notify` in the
same statement, which is delivered when (and only if) its transaction
commits. Notifications are a hint, never the record: a lost one costs a
poll interval, never a job, because waiters are woken whenever the
listening connection (re)connects and every wait ends at its timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass
from datetime import timedelta

import psycopg
from psycopg import sql

from ... import tls
from ..schema import Tables
from .connection import connect_kwargs, unverified

log = logging.getLogger("rainier_queue.drivers.database.postgres")

PAYLOAD_LIMIT = 1000
"""Longest queue name (in bytes) a notification carries; longer ones wake every waiter.
Well under PostgreSQL's 8,000-byte payload limit."""


@dataclass(eq=False, slots=True)
class _Waiter:
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[None]
    queues: frozenset[str]
    notified: bool = False
    """Whether a notification (not only the listener coming up) woke this wait."""

    def wake(self, *, notified: bool = True) -> None:
        with contextlib.suppress(RuntimeError):  # its loop closed already
            self.loop.call_soon_threadsafe(_resolve, self, notified)

    async def wait(self, timeout: timedelta) -> str:
        """Wait for a wake-up: "notified", "listening" (the listener came up) or "timeout"."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(self.future), max(0.0, timeout.total_seconds()))
        if not self.future.done():
            return "timeout"
        return "notified" if self.notified else "listening"

    def rearm(self) -> None:
        """Ready for another wait, after one the listener's coming up ended."""
        self.future = self.loop.create_future()
        self.notified = False


def _resolve(waiter: _Waiter, notified: bool) -> None:
    waiter.notified = waiter.notified or notified
    if not waiter.future.done():
        waiter.future.set_result(None)


class Listener:
    """One `LISTEN` connection per queue object, opened when a worker first waits.

    Notifications carry the queue's name; an empty one wakes everybody.
    Whenever the connection is (re)established, every waiter is woken, so a
    push made while nobody was listening is found by their next reserve:
    notifications can be lost, jobs cannot.
    """

    def __init__(self, dsn: str, channel: str, where: str) -> None:
        self._dsn = dsn
        self._channel = channel
        self._where = where
        self._waiters: set[_Waiter] = set()
        self._task: asyncio.Task[None] | None = None
        self.listening = False
        """Whether the `LISTEN` connection is up now."""

    def register(self, queues: Collection[str]) -> _Waiter:
        loop = asyncio.get_running_loop()
        waiter = _Waiter(loop, loop.create_future(), frozenset(queues))
        self._waiters.add(waiter)
        if self._task is None or self._task.done():
            self._task = loop.create_task(self._listen(), name=f"rainier-listen {self._channel}")
        return waiter

    def unregister(self, waiter: _Waiter) -> None:
        self._waiters.discard(waiter)

    async def wait(
        self,
        queues: Collection[str],
        timeout: timedelta,
        look: Callable[[], Awaitable[timedelta | None]],
    ) -> None:
        """Return once `look` finds work due (it answers None) or a push is heard, or at
        `timeout`; `look` otherwise says how long until something comes due.

        Listen first, look second: a push landing between the two still wakes
        the wait. The listener coming up wakes every wait so that a push made
        while nobody listened is found; that wake looks again, and with nothing
        due the wait goes on rather than ending with nothing.
        """
        waiter = self.register(queues)
        loop = asyncio.get_running_loop()
        ends = loop.time() + timeout.total_seconds()
        try:
            while True:
                until_due = await look()
                if until_due is None:
                    return
                left = min(timedelta(seconds=max(0.0, ends - loop.time())), until_due)
                if await waiter.wait(left) != "listening" or loop.time() >= ends:
                    return
                waiter.rearm()
        finally:
            self.unregister(waiter)

    def wake(self, queue: str | None, *, notified: bool = True) -> None:
        for waiter in list(self._waiters):
            if not queue or queue in waiter.queues:
                waiter.wake(notified=notified)

    async def _listen(self) -> None:
        backoff = 0.1
        while True:
            try:
                conn = await psycopg.AsyncConnection.connect(
                    self._dsn, **connect_kwargs(self._dsn, "rainier-queue listener")
                )
                if unverified(self._dsn):
                    tls.warn_unverified(self._where)
                async with conn:
                    await conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self._channel)))
                    backoff = 0.1
                    self.listening = True
                    # Anything pushed while nobody listened is looked for now; a
                    # waiter that finds nothing goes on waiting (`wait_for_work`).
                    self.wake(None, notified=False)
                    async for note in conn.notifies():
                        self.wake(note.payload)
            except asyncio.CancelledError:
                self.listening = False
                raise
            except Exception as exc:  # the connection dropped: poll meanwhile, reconnect
                log.debug("LISTEN on %s lost (%s); reconnecting", self._where, exc)
            self.listening = False
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 5.0)

    async def aclose(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self.wake(None)


def channel_for(tables: Tables) -> str:
    """The `NOTIFY` channel of one set of tables: readable when short, hashed when long."""
    name = f"{tables.schema}.{tables.prefix}jobs" if tables.schema else f"{tables.prefix}jobs"
    if len(name) <= 60:
        return name
    return "rainier_" + hashlib.sha1(name.encode()).hexdigest()[:24]


def notify_payload(queue: str) -> str:
    """What a push announces: the queue's name, or nothing (wake all) if it is too long."""
    return queue if len(queue.encode()) <= PAYLOAD_LIMIT else ""
